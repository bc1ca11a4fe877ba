//! proportion: queues share the cluster by weight (water-filling, with guarantees
//! and capabilities); a queue may be allocated up to its deserved share and is
//! skipped once it holds it, and admission checks its real capability. See
//! `volcano::proportion` for the arithmetic. As Volcano's, it counts one `pods`
//! per task (see `pod_charge`): the cluster's pod slots are shared out too, and
//! a queue with pods still waiting within its share of them is not overused.

use super::kept_water_fill::{KeptWaterFill, QueueShares};
use super::pod_charge::{KeptQueuePods, QueuePods, task_charge};
use crate::resources::Resources;
use crate::volcano::card_quota::CARD_DIMENSION_PREFIX;
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::{KeptFigures, Plugin, TaskEvent, Vote};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{
    JobInfo, QueueInfo, QueueReport, Rejection, SessionState, TaskInfo,
};
use crate::volcano::proportion::{ProportionInput, allocatable_excess, enqueue_excess, overused};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The proportion plugin.
#[derive(Debug, Default)]
pub struct Proportion {
    /// Per queue: real capability and deserved amount.
    shares: Arc<QueueShares>,
    /// Per queue: the pods it asks for and holds.
    pods: QueuePods,
    /// The same as the session opened, kept for the next session.
    opened: KeptProportion,
}

/// What proportion keeps from one session to the next: the queues' pods and
/// the water-filling they were shared out by.
#[derive(Debug, Default)]
struct KeptProportion {
    pods: KeptQueuePods,
    fill: KeptWaterFill,
}

/// Builds the plugin. Listed together with capacity, it steps aside: capacity's
/// explicit `spec.deserved` is the more specific statement of intent, and Volcano
/// documents the two as incompatible.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    if ctx.conf.enabled("capacity") {
        return Ok(None);
    }
    Ok(Some(Box::new(Proportion::default())))
}

/// A charge without its `card/<name>` dimensions (card quotas are capacity-card's).
pub(crate) fn without_cards(r: &Resources) -> Resources {
    r.split_prefix(CARD_DIMENSION_PREFIX).1
}

impl Proportion {
    fn deserved(&self, queue: &str) -> Option<&Resources> {
        self.shares.get(queue).map(|(_, d)| d)
    }

    fn share(&self, q: &QueueInfo) -> f64 {
        self.deserved(q.name())
            .map_or(0.0, |d| self.pods.allocated_share(q, d))
    }
}

impl Plugin for Proportion {
    fn name(&self) -> &'static str {
        "proportion"
    }

    fn open(&mut self, state: &SessionState) {
        self.pods = self.opened.pods.count(state);
        let inputs = state.queues.iter().map(|(name, q)| {
            let input = ProportionInput {
                weight: q.spec.weight,
                guarantee: q.spec.guarantee.clone().unwrap_or_default(),
                capability: q.spec.capability.clone(),
                request: self.pods.request(q),
            };
            (name.as_str(), input)
        });
        self.shares = self.opened.fill.shares(&state.total, inputs);
    }

    fn keep(&mut self) -> Option<Box<dyn KeptFigures>> {
        Some(Box::new(std::mem::take(&mut self.opened)))
    }

    fn reuse(&mut self, kept: Box<dyn KeptFigures>) {
        if let Ok(opened) = (kept as Box<dyn std::any::Any>).downcast::<KeptProportion>() {
            self.opened = *opened;
        }
    }

    /// Higher queue priority first, then the lower share of its deserved amount.
    fn queue_order(&self, _: &SessionState, a: &QueueInfo, b: &QueueInfo) -> Ordering {
        b.spec
            .priority
            .cmp(&a.spec.priority)
            .then_with(|| self.share(a).total_cmp(&self.share(b)))
    }

    fn overused(&self, _: &SessionState, q: &QueueInfo) -> bool {
        self.deserved(q.name())
            .is_some_and(|d| overused(d, &self.pods.allocated(q)))
    }

    fn allocatable(
        &self,
        _: &SessionState,
        q: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        if let Some(deserved) = self.deserved(q.name())
            && let Some(x) =
                allocatable_excess(&q.allocated, &without_cards(&task.resreq), deserved)
        {
            return Err(Rejection::exceeded(
                "proportion",
                q.name(),
                x,
                "deserved",
                None,
            ));
        }
        Ok(())
    }

    fn job_enqueueable(&self, state: &SessionState, job: &JobInfo) -> Vote {
        let min = without_cards(&job.min_request().unwrap_or_default());
        if min.is_empty() {
            return Vote::Permit;
        }
        let (Some(q), Some((real, _))) = (state.queue(&job.queue), self.shares.get(&job.queue))
        else {
            return Vote::Abstain;
        };
        match enqueue_excess(&min, &q.allocated, &q.inqueue, &q.elastic, real) {
            Some(x) => Vote::Reject(Rejection::exceeded(
                "proportion",
                q.name(),
                x,
                "capability",
                None,
            )),
            None => Vote::Permit,
        }
    }

    /// An Open queue may reclaim for a task while it stays within its deserved
    /// share.
    fn preemptive(
        &self,
        _: &SessionState,
        q: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        Rejection::unless_open("proportion", q)?;
        if let Some(deserved) = self.deserved(q.name())
            && let Some(x) =
                allocatable_excess(&q.allocated, &without_cards(&task.resreq), deserved)
        {
            return Err(Rejection::exceeded(
                "proportion",
                q.name(),
                x,
                "deserved",
                None,
            ));
        }
        Ok(())
    }

    /// Victims only from queues above their deserved share, and only while they
    /// stay above it.
    fn reclaimable(
        &self,
        state: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        let mut allocated: BTreeMap<&str, Resources> = BTreeMap::new();
        let mut victims = Vec::new();
        for c in candidates {
            let Some(queue) = state.job(&c.job).map(|j| j.queue.as_str()) else {
                continue;
            };
            let (Some(q), Some(deserved)) = (state.queue(queue), self.deserved(queue)) else {
                continue;
            };
            let held = allocated
                .entry(q.name())
                .or_insert_with(|| self.pods.allocated(q));
            if held.first_excess(deserved).is_some() {
                held.saturating_sub(&task_charge(&c.resreq));
                victims.push(c.uid.clone());
            }
        }
        Some(victims)
    }

    fn on_allocate(&mut self, _: &SessionState, event: &TaskEvent<'_>) {
        self.pods.placed(event.queue);
    }

    fn on_deallocate(&mut self, _: &SessionState, event: &TaskEvent<'_>) {
        self.pods.released(event.queue);
    }

    fn describe_queue(&self, _: &SessionState, q: &QueueInfo, report: &mut QueueReport) {
        if let Some((real, deserved)) = self.shares.get(q.name()) {
            report.real_capability = Some(real.clone());
            report.deserved = Some(deserved.clone());
            report.share = self.share(q);
        }
    }
}
