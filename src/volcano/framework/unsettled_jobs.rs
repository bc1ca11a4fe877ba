//! The jobs the actions may have something to do for. On a busy cluster
//! almost every job is settled: admitted, valid, ready, with no member
//! waiting for a place or pipelined (a running queue pod is a job of its
//! own). For such a job enqueue has nothing to admit, allocate nothing to
//! place or note, backfill nothing to start, and preempt and reclaim no
//! member to make room for; passing over thousands of them in every action
//! of every session made a session cost what runs rather than what changed.
//!
//! Whether a job is settled depends only on the job, the plugins in force and
//! which queues exist. The planner hands every session the same `Arc` for a
//! job nothing changed, in a persistent map whose unchanged parts the maps of
//! consecutive sessions share: the unsettled jobs are kept from one session to
//! the next and brought up to date from the difference between the two maps,
//! which skips what they share. Within a session, the jobs its statements
//! changed are found the same way, against the map it opened on.

use super::job::{GangKey, JobInfo, TaskStatus};
use super::job_map::Jobs;
use super::map_diff::{job_changes, job_changes_unkept};
use super::plugin::JobInvalid;
use super::rejection::Rejection;
use super::session::QUEUE_NOT_FOUND;
use super::state::SessionState;
use super::tiers::Tiers;
use crate::volcano::conf::PluginOption;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::sync::Arc;

/// The jobs that were not settled in the jobs a session opened on.
#[derive(Debug, Default)]
pub(crate) struct UnsettledJobs {
    /// The jobs the unsettled ones were found among.
    among: Jobs,
    /// What they were judged with besides the jobs; `None` before any.
    basis: Option<Basis>,
    /// The jobs not settled among them (held, so that the actions need not
    /// look each one up again).
    jobs: BTreeMap<GangKey, Arc<JobInfo>>,
}

/// What settles a job besides the job itself: the plugins (their validity and
/// readiness checks) and the queues that exist (a job of a missing queue is
/// invalid).
#[derive(Debug, PartialEq)]
struct Basis {
    plugins: Vec<Arc<PluginOption>>,
    queues: Vec<String>,
}

impl Basis {
    fn of(state: &SessionState, tiers: &Tiers) -> Self {
        Self {
            plugins: tiers.slots().map(|s| s.option.clone()).collect(),
            queues: state.queues.keys().cloned().collect(),
        }
    }
}

impl UnsettledJobs {
    /// Brings the unsettled jobs up to `state`'s: judges again only the jobs
    /// that differ from the ones they were found among, or every job when the
    /// plugins or the queues changed.
    pub(crate) fn follow(&mut self, state: &SessionState, tiers: &Tiers) {
        let basis = Basis::of(state, tiers);
        if self.basis.as_ref() == Some(&basis) {
            for (key, _, job) in job_changes(&self.among, &state.jobs).iter() {
                match job {
                    Some(job) if settled(state, tiers, job) => {
                        self.jobs.remove(key);
                    }
                    Some(job) => {
                        if let Some(kept) = self.jobs.get_mut(key) {
                            *kept = Arc::clone(job);
                        } else {
                            self.jobs.insert(key.clone(), Arc::clone(job));
                        }
                    }
                    None => {
                        self.jobs.remove(key);
                    }
                }
            }
        } else {
            self.jobs = state
                .jobs
                .iter()
                .filter(|(_, job)| !settled(state, tiers, job))
                .map(|(key, job)| (key.clone(), Arc::clone(job)))
                .collect();
            self.basis = Some(basis);
        }
        self.among = state.jobs.clone();
    }

    /// Every job of `jobs` that may not be settled, in key order, each once:
    /// those unsettled when the session opened, those changed since (`jobs`
    /// being the session's jobs now), and those of `also` (sorted keys).
    pub(crate) fn with<'a>(
        &'a self,
        jobs: &'a Jobs,
        also: impl Iterator<Item = &'a GangKey> + 'a,
    ) -> impl Iterator<Item = (&'a GangKey, &'a Arc<JobInfo>)> + 'a {
        // Where keys meet, the job as it is now wins over the one kept.
        let changed: Vec<(&GangKey, Seen<'_>)> = job_changes_unkept(&self.among, jobs)
            .iter()
            .filter_map(|(key, _, _)| match jobs.get_key_value(key) {
                Some((key, job)) => Some((key, Seen::Now(job))),
                None => self
                    .among
                    .get_key_value(key)
                    .map(|(key, _)| (key, Seen::Gone)),
            })
            .collect();
        let changed = changed.into_iter();
        let kept = self.jobs.iter().map(|(key, job)| (key, Seen::Now(job)));
        let also = also.map(|key| (key, Seen::Unknown));
        SortedUnion::new(changed, SortedUnion::new(kept, also)).filter_map(|(key, seen)| match seen
        {
            Seen::Now(job) => Some((key, job)),
            Seen::Gone => None,
            Seen::Unknown => jobs.get(key).map(|job| (key, job)),
        })
    }
}

/// A job of the union, as far as its source knows it.
#[derive(Clone, Copy)]
pub(crate) enum Seen<'a> {
    /// The job as it is now.
    Now(&'a Arc<JobInfo>),
    /// It is gone since the session opened.
    Gone,
    /// To be looked up.
    Unknown,
}

/// Whether no action has anything to do for the job:
/// it finished, or it is admitted, valid, ready by every plugin, with no
/// member waiting or pipelined and no network-topology constraint (which
/// allocate checks even with nothing to place).
fn settled(state: &SessionState, tiers: &Tiers, job: &JobInfo) -> bool {
    if job.is_completed() {
        return true;
    }
    job.inqueue
        && job.network_topology.is_none()
        && job
            .tasks
            .iter()
            .all(|t| !matches!(t.status, TaskStatus::Pending | TaskStatus::Pipelined))
        && job.is_ready()
        && tiers.job_ready(job)
        && job_valid(state, tiers, job).is_ok()
}

/// Whether the job can be scheduled at all: its PodGroup and its queue exist
/// and no plugin finds it invalid.
pub(crate) fn job_valid(
    state: &SessionState,
    tiers: &Tiers,
    job: &JobInfo,
) -> Result<(), JobInvalid> {
    if job.group_missing {
        return Err(JobInvalid {
            reason: "NotEnoughTasks",
            message: format!(
                "PodGroup {}/{} does not exist yet; its pods wait for it",
                job.key.namespace, job.key.name
            ),
        });
    }
    // Volcano's scheduler leaves such a job aside without a word (its
    // admission refuses it); here the gang's waiting members say why.
    if state.queue(&job.queue).is_none() {
        return Err(JobInvalid {
            reason: QUEUE_NOT_FOUND,
            message: Rejection::unknown_queue(&job.queue).to_string(),
        });
    }
    tiers.job_valid(state, job)
}

/// The union of two iterators of keyed items in key order, each key once:
/// where both hold a key, the item of the first.
pub(crate) struct SortedUnion<'a, T, A, B>
where
    A: Iterator<Item = (&'a GangKey, T)>,
    B: Iterator<Item = (&'a GangKey, T)>,
{
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<'a, T, A, B> SortedUnion<'a, T, A, B>
where
    A: Iterator<Item = (&'a GangKey, T)>,
    B: Iterator<Item = (&'a GangKey, T)>,
{
    /// The union of `a` and `b`, both in key order.
    pub(crate) fn new(a: A, b: B) -> Self {
        Self {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<'a, T, A, B> Iterator for SortedUnion<'a, T, A, B>
where
    A: Iterator<Item = (&'a GangKey, T)>,
    B: Iterator<Item = (&'a GangKey, T)>,
{
    type Item = (&'a GangKey, T);

    fn next(&mut self) -> Option<Self::Item> {
        let next = match (self.a.peek(), self.b.peek()) {
            (Some((a, _)), Some((b, _))) if b < a => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }?;
        // The same key in either (or repeated in one) comes out once.
        let key = next.0;
        while self.a.next_if(|(k, _)| *k == key).is_some() {}
        while self.b.next_if(|(k, _)| *k == key).is_some() {}
        Some(next)
    }
}
