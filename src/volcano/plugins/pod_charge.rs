//! The pod count Volcano charges a queue: every task asks one `pods` besides
//! its requests (Volcano's `GetPodResourceRequest`), so a queue's `guarantee`
//! or `deserved` amount naming `pods` is compared with how many pods the queue
//! holds. The limit checks leave that dimension out (see
//! `proportion::requested_dims`); capacity's reclaim rules count it, and so
//! does proportion where Volcano's does: its deserved amounts share the
//! cluster's pod slots out like any resource, and "overused", the queue order's
//! share and "above deserved" for reclaim compare the pod count too.

use crate::placement::resource_fit::POD_COUNT;
use crate::resources::Resources;
use crate::volcano::framework::{QueueInfo, SessionState, TaskStatus};
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

impl QueuePods {
    /// Counts every queue's pods as the session opens.
    pub(crate) fn count(state: &SessionState) -> Self {
        let mut by_queue: BTreeMap<String, Counts> = BTreeMap::new();
        for job in state.jobs.values() {
            let counts = by_queue.entry(job.queue.clone()).or_default();
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
        }
        Self { by_queue }
    }

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

    fn counts(&self, queue: &str) -> Counts {
        self.by_queue.get(queue).copied().unwrap_or_default()
    }
}
