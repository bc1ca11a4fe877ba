//! What the gang eviction actions (`gangpreempt`, `gangreclaim`) tell the
//! plugins when they ask which victims may go (Volcano's eviction context of its
//! unified evictable hook). The plugins answer for whole candidate lists, in the
//! order the victims would go, so that a quota plugin can count each victim as
//! gone before judging the next.

use super::job::{JobInfo, TaskInfo};

/// Which gang eviction action asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GangEvictionKind {
    /// `gangpreempt`: victims of the starving job's own queue.
    Preempt,
    /// `gangreclaim`: victims of other, reclaimable queues.
    Reclaim,
}

/// The starving job and where room is sought for it.
#[derive(Debug, Clone, Copy)]
pub struct GangEviction<'a> {
    /// Which action asks.
    pub kind: GangEvictionKind,
    /// The starving job.
    pub job: &'a JobInfo,
    /// One of its waiting tasks with the request of all of them: a plugin that
    /// judges victims against what the preemptor asks (capacity: only victims
    /// holding something it needs free anything for it) sees the job's whole need.
    pub need: &'a TaskInfo,
    /// The HyperNode (or the cluster-wide root) whose nodes the victims are on.
    pub domain: &'a str,
}
