//! gangreclaim: a starving gang of a queue that is not overused evicts victim
//! bundles of other, reclaimable queues until all its waiting tasks fit inside
//! one domain, or evicts nothing (see [`super::gang_eviction`]). Its queue must
//! be allowed to reclaim for what the gang waits for (every plugin's
//! `preemptive`, asked with the gang's whole need).
//!
//! Victims: running tasks of jobs of other queues that are reclaimable,
//! evictable (`volcano.sh/preemptable`, cooldown, the eviction guards), whose
//! PodGroup does not say `volcano.sh/preemptable: "false"`, and that the plugins
//! allow (conformance, gang and priority let every candidate go; capacity only
//! what its queues hold above their deserved share, as for reclaim; proportion
//! has no say here, as in Volcano). Victim queues go in the plugins' victim
//! queue order (capacity under hierarchy: the nearest first), else the reverse
//! of the queue order.

use super::gang_eviction::{GangEvictionAction, GangEvictionRules};
use super::gang_eviction_arguments::GangEvictionArguments;
use crate::resources::Resources;
use crate::volcano::framework::gang_eviction::GangEvictionKind;
use crate::volcano::framework::{JobInfo, Session, TaskInfo};
use std::cmp::Ordering;

/// The gangreclaim action, with its arguments from the configuration.
pub type GangReclaim = GangEvictionAction<ReclaimRules>;

impl GangReclaim {
    /// The action with these arguments.
    pub fn new(args: GangEvictionArguments) -> Self {
        Self::with(ReclaimRules, args)
    }
}

/// What gangreclaim evicts, and for whom.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReclaimRules;

impl GangEvictionRules for ReclaimRules {
    fn name(&self) -> &'static str {
        "gangreclaim"
    }

    fn kind(&self) -> GangEvictionKind {
        GangEvictionKind::Reclaim
    }

    fn serves_queue(&self, session: &Session, queue: &str) -> bool {
        !session.overused(queue)
    }

    fn may_evict_for(
        &self,
        session: &Session,
        job: &JobInfo,
        pending: &[&TaskInfo],
    ) -> Result<(), String> {
        let (Some(queue), Some(first)) = (session.state.queue(&job.queue), pending.first()) else {
            return Ok(());
        };
        let mut need = Resources::default();
        for t in pending {
            need.add(&t.resreq);
        }
        let mut whole = TaskInfo::clone(first);
        whole.resreq = need;
        session
            .tiers()
            .preemptive(&session.state, queue, &whole)
            .map_err(|r| format!("may not reclaim: {r}"))
    }

    fn takes_from(&self, session: &Session, preemptor: &JobInfo, victim: &JobInfo) -> bool {
        victim.queue != preemptor.queue
            && session
                .state
                .queue(&victim.queue)
                .is_some_and(|q| q.spec.reclaimable)
    }

    fn victim_first(
        &self,
        session: &Session,
        preemptor: &JobInfo,
        a: &JobInfo,
        b: &JobInfo,
    ) -> Ordering {
        if a.queue == b.queue {
            return Ordering::Equal;
        }
        session
            .tiers()
            .victim_queue_order(&session.state, &a.queue, &b.queue, &preemptor.queue)
            .then_with(|| session.queue_order(&b.queue, &a.queue))
    }
}
