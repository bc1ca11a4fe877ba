//! Jobs kept from one planning cycle to the next. With thousands of gangs
//! waiting, assembling every job from its members' tasks (a copy of each task)
//! and adding every task to its queue's figures cost more than the session
//! itself, although between two cycles almost no job changed. A job is built
//! again only when something it is built from changed: one of its tasks (the
//! task cache builds a new one whenever its member, its holding or its node
//! changed, so the same task means the same inputs), its member set, its
//! PodGroup, its admission by an earlier enqueue, or something every job is
//! built from (PriorityClasses, whether enqueue runs). The kept jobs are held in
//! a persistent map that a session shares whole: handing it over and dropping it
//! cost nothing per job, and a session copies only the jobs it changes. Their
//! queues' figures are kept summed beside ([`QueueTotals`]).

use super::priority_classes::PriorityClasses;
use super::queue_totals::QueueTotals;
use crate::ledger::ChangeJournal;
use crate::volcano::framework::job_figures::JobFigures;
use crate::volcano::framework::job_map::Jobs;
use crate::volcano::framework::{GangKey, JobInfo, TaskInfo};
use crate::volcano::objects::PodGroupSpec;
use foldhash::HashMap;
use std::sync::Arc;

/// What every job is built from besides its own members and PodGroup: when any
/// of it changes, every job is built again.
#[derive(Clone, PartialEq)]
pub struct SharedJobInputs {
    /// Task and job priorities are read from them.
    pub priority_classes: PriorityClasses,
    /// Without enqueue, every job counts as admitted.
    pub enqueue_on: bool,
}

/// What one job was built from.
pub struct JobInputs<'a> {
    /// Its members' tasks, in member order.
    pub tasks: Vec<Arc<TaskInfo>>,
    /// Its PodGroup.
    pub group: Option<&'a PodGroupSpec>,
    /// Admitted by enqueue in an earlier cycle.
    pub inqueue: bool,
}

/// A job with what it was built from and what it adds to its queue.
struct Cached {
    tasks: Vec<Arc<TaskInfo>>,
    group: Option<PodGroupSpec>,
    inqueue: bool,
    /// The sweep this entry was last asked for in.
    seen: u64,
    job: Arc<JobInfo>,
    figures: JobFigures,
}

impl Cached {
    fn built_from(&self, inputs: &JobInputs<'_>) -> bool {
        self.inqueue == inputs.inqueue
            && self.tasks.len() == inputs.tasks.len()
            && self
                .tasks
                .iter()
                .zip(&inputs.tasks)
                .all(|(a, b)| Arc::ptr_eq(a, b))
            && self.group.as_ref() == inputs.group
    }
}

/// Jobs by gang, kept between cycles.
#[derive(Default)]
pub struct JobCache {
    entries: HashMap<GangKey, Cached>,
    /// The kept jobs, shared whole with each session.
    jobs: Jobs,
    /// Their figures summed by queue.
    totals: QueueTotals,
    /// What the kept jobs were built with.
    shared: Option<SharedJobInputs>,
    /// Counts cycles that asked for every job: entries not asked for in one
    /// are forgotten.
    sweeps: u64,
    /// Jobs built (not taken from the cache) since last counted.
    built: usize,
    /// The gangs whose kept job was replaced, added or removed, in order: what
    /// a reader of the kept jobs (the queueing hints) compares again. Begun
    /// anew when every job is forgotten.
    journal: ChangeJournal<GangKey>,
}

impl JobCache {
    /// Starts a cycle: forgets every kept job when what every job is built from
    /// changed, and then says so (every job must be asked for again).
    pub fn open(&mut self, shared: &SharedJobInputs) -> bool {
        if self.shared.as_ref() == Some(shared) {
            return false;
        }
        self.entries.clear();
        self.jobs.clear();
        self.totals.clear();
        self.journal = ChangeJournal::default();
        self.shared = Some(shared.clone());
        true
    }

    /// The job of gang `key`: the one kept when nothing it was built from
    /// changed, otherwise a new one from `build` (kept for the next cycle, its
    /// figures in its queue's sums in place of the old job's).
    pub fn job(
        &mut self,
        key: &GangKey,
        inputs: JobInputs<'_>,
        build: impl FnOnce(&[Arc<TaskInfo>]) -> JobInfo,
    ) -> Arc<JobInfo> {
        let sweep = self.sweeps;
        if let Some(cached) = self.entries.get_mut(key)
            && cached.built_from(&inputs)
        {
            cached.seen = sweep;
            return cached.job.clone();
        }
        let job = build(&inputs.tasks);
        let figures = JobFigures::of(&job, inputs.inqueue);
        let job = Arc::new(job);
        self.built += 1;
        self.totals.add(&figures);
        self.jobs.insert(key.clone(), job.clone());
        self.journal.record(key.clone());
        let replaced = self.entries.insert(
            key.clone(),
            Cached {
                tasks: inputs.tasks,
                group: inputs.group.cloned(),
                inqueue: inputs.inqueue,
                seen: sweep,
                job: job.clone(),
                figures,
            },
        );
        if let Some(old) = replaced {
            self.totals.remove(&old.figures);
        }
        job
    }

    /// Forgets the job of a gang that has no member left.
    pub fn forget(&mut self, key: &GangKey) {
        if let Some(old) = self.entries.remove(key) {
            self.jobs.remove(key);
            self.journal.record(key.clone());
            self.totals.remove(&old.figures);
        }
    }

    /// After a cycle that asked for every gang's job: forgets jobs that were not
    /// asked for (gone from the book).
    pub fn forget_unasked(&mut self) {
        let sweep = self.sweeps;
        let Self {
            entries,
            jobs,
            totals,
            journal,
            ..
        } = self;
        entries.retain(|key, cached| {
            let asked = cached.seen == sweep;
            if !asked {
                jobs.remove(key);
                journal.record(key.clone());
                totals.remove(&cached.figures);
            }
            asked
        });
        self.sweeps += 1;
    }

    /// How many jobs had to be built since the last call.
    pub fn take_built(&mut self) -> usize {
        std::mem::take(&mut self.built)
    }

    /// Every kept job by gang (shared, not copied).
    pub fn jobs(&self) -> Jobs {
        self.jobs.clone()
    }

    /// The gangs whose kept job changed, in order (see the field).
    pub fn journal(&self) -> &ChangeJournal<GangKey> {
        &self.journal
    }

    /// The kept jobs' figures summed by queue.
    pub fn totals(&self) -> &QueueTotals {
        &self.totals
    }
}
