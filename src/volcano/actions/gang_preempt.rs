//! gangpreempt: inside one queue, a starving gang of higher priority evicts
//! victim bundles of lower-priority jobs until all its waiting tasks fit inside
//! one domain, or evicts nothing (see [`super::gang_eviction`]). Unlike
//! preempt, which makes room task by task on one node after another, it looks
//! at the gang's whole need at once, and prefers victims whose jobs stay ready
//! (safe bundles) to breaking a job (whole bundles, evicted all together).
//!
//! Victims: running tasks of other jobs of the same queue whose job priority is
//! lower than the gang's, evictable (`volcano.sh/preemptable`, cooldown, the
//! eviction guards), whose PodGroup does not say `volcano.sh/preemptable:
//! "false"`, and that the plugins allow (conformance, gang, priority and
//! capacity answer as in Volcano). Victim jobs go in the reverse of the job
//! order: the job that would be scheduled last is evicted first.

use super::gang_eviction::{GangEvictionAction, GangEvictionRules};
use super::gang_eviction_arguments::GangEvictionArguments;
use crate::volcano::framework::gang_eviction::GangEvictionKind;
use crate::volcano::framework::{JobInfo, Session, TaskInfo};
use std::cmp::Ordering;

/// The gangpreempt action, with its arguments from the configuration.
pub type GangPreempt = GangEvictionAction<PreemptRules>;

impl GangPreempt {
    /// The action with these arguments.
    pub fn new(args: GangEvictionArguments) -> Self {
        Self::with(PreemptRules, args)
    }
}

/// What gangpreempt evicts, and for whom.
#[derive(Debug, Clone, Copy, Default)]
pub struct PreemptRules;

impl GangEvictionRules for PreemptRules {
    fn name(&self) -> &'static str {
        "gangpreempt"
    }

    fn kind(&self) -> GangEvictionKind {
        GangEvictionKind::Preempt
    }

    fn serves_queue(&self, _: &Session, _: &str) -> bool {
        true
    }

    fn may_evict_for(&self, _: &Session, _: &JobInfo, _: &[&TaskInfo]) -> Result<(), String> {
        Ok(())
    }

    fn takes_from(&self, _: &Session, preemptor: &JobInfo, victim: &JobInfo) -> bool {
        victim.queue == preemptor.queue && victim.priority < preemptor.priority
    }

    fn victim_first(&self, session: &Session, _: &JobInfo, a: &JobInfo, b: &JobInfo) -> Ordering {
        session.job_order(&b.key, &a.key)
    }
}
