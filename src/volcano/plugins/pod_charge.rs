//! The pod count Volcano charges a queue: every task asks one `pods` besides
//! its requests (Volcano's `GetPodResourceRequest`), so a queue's `guarantee`
//! or `deserved` amount naming `pods` is compared with how many pods the queue
//! holds. The limit checks leave that dimension out (see
//! `proportion::requested_dims`); capacity's reclaim rules count it, and so
//! does proportion where Volcano's does: its deserved amounts share the
//! cluster's pod slots out like any resource, and "overused", the queue order's
//! share and "above deserved" for reclaim compare the pod count too.

use crate::placement::resource_fit::POD_COUNT;
use crate::resources::{MILLI, Resources};
use crate::volcano::framework::kept_per_job::KeptPerJob;
use crate::volcano::framework::{JobInfo, QueueInfo, SessionState, TaskStatus};
use crate::volcano::proportion::ratio;
use std::collections::BTreeMap;

/// `resources` with `pods` more pods.
pub(crate) fn plus_pods(mut resources: Resources, pods: usize) -> Resources {
    if pods > 0 {
        let count = i64::try_from(pods).unwrap_or(i64::MAX);
        resources.add(&Resources::from_units([(POD_COUNT, count)]));
    }
    resources
}

/// What a task is charged: its requests and one pod.
pub(crate) fn task_charge(resreq: &Resources) -> Resources {
    plus_pods(resreq.clone(), 1)
}

/// Per queue, how many pods its tasks ask for and how many hold resources, kept
/// up to date through the session's allocate and deallocate events: the `pods`
/// a plugin that shares the cluster's pod slots out (proportion) adds to the
/// queue's request and allocated figures, which count CPU, memory and devices
/// only.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct QueuePods {
    by_queue: BTreeMap<String, Counts>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Counts {
    /// Unfinished tasks (those `request` covers).
    asked: usize,
    /// Tasks holding resources (those `allocated` covers).
    held: usize,
}

impl Counts {
    /// What one job's tasks ask for and hold.
    fn of(job: &JobInfo) -> Self {
        let mut counts = Self::default();
        for t in &job.tasks {
            if matches!(t.status, TaskStatus::Succeeded | TaskStatus::Failed)
                || t.deleted_unplaced()
            {
                continue;
            }
            counts.asked += 1;
            if t.holds_resources() {
                counts.held += 1;
            }
        }
        counts
    }
}

/// Every queue's pods as sessions open, kept from one session to the next: a
/// job's counts are taken out of its queue's and added again only when the job
/// changed (see `kept_per_job`).
#[derive(Debug, Default)]
pub(crate) struct KeptQueuePods {
    /// Each job's queue and counts.
    by_job: KeptPerJob<(String, Counts)>,
    /// Their sums by queue (queues without a pod left out).
    by_queue: BTreeMap<String, Counts>,
}

impl KeptQueuePods {
    /// Counts every queue's pods as the session opens, looking again only at
    /// the jobs that changed since the last.
    pub(crate) fn count(&mut self, state: &SessionState) -> QueuePods {
        let by_queue = &mut self.by_queue;
        self.by_job.follow(
            &state.jobs,
            [],
            |job| (job.queue.clone(), Counts::of(job)),
            |_, (before, after)| {
                if let Some((queue, counts)) = before {
                    take_out(by_queue, queue, *counts);
                }
                if let Some((queue, counts)) = after {
                    add_in(by_queue, queue, *counts);
                }
            },
        );
        QueuePods {
            by_queue: self.by_queue.clone(),
        }
    }
}

fn add_in(by_queue: &mut BTreeMap<String, Counts>, queue: &str, counts: Counts) {
    if counts == Counts::default() {
        return;
    }
    let sum = match by_queue.get_mut(queue) {
        Some(sum) => sum,
        None => by_queue.entry(queue.to_owned()).or_default(),
    };
    sum.asked += counts.asked;
    sum.held += counts.held;
}

fn take_out(by_queue: &mut BTreeMap<String, Counts>, queue: &str, counts: Counts) {
    let Some(sum) = by_queue.get_mut(queue) else {
        return;
    };
    sum.asked = sum.asked.saturating_sub(counts.asked);
    sum.held = sum.held.saturating_sub(counts.held);
    if *sum == Counts::default() {
        by_queue.remove(queue);
    }
}

impl QueuePods {
    /// A task of `queue` was placed (or a placement given back by an undone
    /// eviction).
    pub(crate) fn placed(&mut self, queue: &str) {
        if let Some(c) = self.by_queue.get_mut(queue) {
            c.held = c.held.saturating_add(1);
        }
    }

    /// A task of `queue` stopped holding resources (an eviction, a placement
    /// taken back).
    pub(crate) fn released(&mut self, queue: &str) {
        if let Some(c) = self.by_queue.get_mut(queue) {
            c.held = c.held.saturating_sub(1);
        }
    }

    /// `q`'s request with one pod per unfinished task.
    pub(crate) fn request(&self, q: &QueueInfo) -> Resources {
        plus_pods(q.request.clone(), self.counts(q.name()).asked)
    }

    /// `q`'s allocated amount with one pod per task holding resources.
    pub(crate) fn allocated(&self, q: &QueueInfo) -> Resources {
        plus_pods(q.allocated.clone(), self.counts(q.name()).held)
    }

    /// [`crate::volcano::proportion::share`] of [`Self::allocated`] in
    /// `deserved`, without building the sum: queue order asks it at every
    /// comparison.
    pub(crate) fn allocated_share(&self, q: &QueueInfo, deserved: &Resources) -> f64 {
        let held = i64::try_from(self.counts(q.name()).held)
            .unwrap_or(i64::MAX)
            .saturating_mul(MILLI);
        deserved
            .iter()
            .map(|(dim, d)| {
                let mut allocated = q.allocated.get(dim);
                if dim == POD_COUNT {
                    allocated = allocated.saturating_add(held);
                }
                ratio(allocated, d)
            })
            .fold(0.0, f64::max)
    }

    fn counts(&self, queue: &str) -> Counts {
        self.by_queue.get(queue).copied().unwrap_or_default()
    }
}
