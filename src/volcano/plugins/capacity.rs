//! capacity: explicit per-queue deserved amounts (`spec.deserved`) and, with
//! `enableHierarchy: true`, a queue tree through `spec.parent` in which allocation
//! and admission must fit the queue and every ancestor. A queue may grow past its
//! deserved amount up to its real capability. See `volcano::capacity` for the
//! arithmetic, and `capacity_reclaim` for reclaim between queues (with the
//! argument `ancestorReclaimLevel`).

use super::capacity_reclaim::{AncestorLevels, ReclaimTree};
use super::proportion::without_cards;
use super::queue_tree::QueueTree;
use crate::volcano::capacity::{allocatable_excess, share, within_deserved_somewhere};
use crate::volcano::conf::{ANCESTOR_RECLAIM_LEVEL, ConfError};
use crate::volcano::framework::gang_eviction::{GangEviction, GangEvictionKind};
use crate::volcano::framework::plugin::{Plugin, Vote};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{
    JobInfo, QueueInfo, QueueReport, Rejection, SessionState, TaskInfo,
};
use crate::volcano::proportion::enqueue_excess;
use std::cmp::Ordering;

/// The capacity plugin.
#[derive(Debug, Default)]
pub struct Capacity {
    hierarchy: bool,
    levels: AncestorLevels,
    tree: QueueTree,
}

/// Builds the plugin: its option `enableHierarchy` and its argument
/// `ancestorReclaimLevel` (default 0, as in Volcano).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[ANCESTOR_RECLAIM_LEVEL])?;
    Ok(Some(Box::new(Capacity {
        hierarchy: ctx.option.hierarchy(),
        levels: AncestorLevels::from_args(&ctx.args)?,
        tree: QueueTree::default(),
    })))
}

impl Capacity {
    /// The tree as reclaim reads it (ancestor levels only under hierarchy).
    fn reclaim_tree(&self) -> ReclaimTree<'_> {
        ReclaimTree {
            tree: &self.tree,
            levels: self.levels.under(self.hierarchy),
        }
    }

    /// `i`'s dominant share of its deserved amount, its pods counted when that
    /// amount names them (Volcano's share runs over every deserved dimension).
    fn share(&self, state: &SessionState, i: usize) -> f64 {
        let allocated = self.tree.held_with_pods(state, i);
        share(&allocated, &self.tree.nodes[i].deserved)
    }

    /// A broken hierarchy closes the queue; a parent queue holds no jobs.
    fn check_queue(&self, i: usize) -> Result<(), Rejection> {
        let node = &self.tree.nodes[i];
        let queue = &self.tree.names[i];
        if let Some(e) = &node.error {
            return Err(Rejection {
                plugin: "capacity",
                queue: queue.clone(),
                dimension: "state".into(),
                message: format!("treated as Closed: {e}"),
            });
        }
        if self.hierarchy && !node.is_leaf() {
            return Err(Rejection {
                plugin: "capacity",
                queue: queue.clone(),
                dimension: "hierarchy".into(),
                message: "has child queues; only leaf queues hold jobs".into(),
            });
        }
        Ok(())
    }
}

impl Plugin for Capacity {
    fn name(&self) -> &'static str {
        "capacity"
    }

    fn open(&mut self, state: &SessionState) {
        self.tree = QueueTree::build(state, self.hierarchy);
    }

    /// Higher priority first, then the lower share of the deserved amount, then
    /// queues with a deserved amount before best-effort ones.
    fn queue_order(&self, state: &SessionState, a: &QueueInfo, b: &QueueInfo) -> Ordering {
        let (Some(ia), Some(ib)) = (self.tree.position(a.name()), self.tree.position(b.name()))
        else {
            return Ordering::Equal;
        };
        let has_deserved = |i: usize| !self.tree.nodes[i].deserved.is_empty();
        b.spec
            .priority
            .cmp(&a.spec.priority)
            .then_with(|| self.share(state, ia).total_cmp(&self.share(state, ib)))
            .then_with(|| has_deserved(ib).cmp(&has_deserved(ia)))
    }

    fn allocatable(
        &self,
        state: &SessionState,
        q: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        let Some(i) = self.tree.position(q.name()) else {
            return Ok(());
        };
        self.check_queue(i)?;
        let candidate = without_cards(&task.resreq);
        for n in self.tree.chain(i) {
            let Some(real) = &self.tree.nodes[n].real_capability else {
                continue;
            };
            let allocated = self.tree.sum(state, n, |q| &q.allocated);
            if let Some(x) = allocatable_excess(&allocated, &candidate, real) {
                return Err(Rejection::exceeded(
                    "capacity",
                    q.name(),
                    x,
                    "capability",
                    self.tree.ancestor_name(i, n),
                ));
            }
        }
        Ok(())
    }

    fn job_enqueueable(&self, state: &SessionState, job: &JobInfo) -> Vote {
        let Some(i) = self.tree.position(&job.queue) else {
            return Vote::Abstain;
        };
        if let Err(r) = self.check_queue(i) {
            return Vote::Reject(r);
        }
        let min = without_cards(&job.min_request().unwrap_or_default());
        if min.is_empty() {
            return Vote::Permit;
        }
        for n in self.tree.chain(i) {
            let Some(real) = &self.tree.nodes[n].real_capability else {
                continue;
            };
            let allocated = self.tree.sum(state, n, |q| &q.allocated);
            let inqueue = self.tree.sum(state, n, |q| &q.inqueue);
            let elastic = self.tree.sum(state, n, |q| &q.elastic);
            if let Some(x) = enqueue_excess(&min, &allocated, &inqueue, &elastic, real) {
                return Vote::Reject(Rejection::exceeded(
                    "capacity",
                    &job.queue,
                    x,
                    "capability",
                    self.tree.ancestor_name(i, n),
                ));
            }
        }
        Vote::Permit
    }

    /// An Open queue may reclaim for a task as Volcano's capacity decides: the
    /// task must fit the queue's real capability on every dimension it asks
    /// for, and the queue must stay within its deserved amount on at least one of
    /// them (a queue short on GPUs may reclaim GPUs although its CPU is past its
    /// deserved amount), or, with `ancestorReclaimLevel`, so must an ancestor
    /// within that many levels.
    fn preemptive(
        &self,
        state: &SessionState,
        q: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        let Some(i) = self.tree.position(q.name()) else {
            return Ok(());
        };
        self.check_queue(i)?;
        Rejection::unless_open("capacity", q)?;
        let allocated = self.tree.sum(state, i, |q| &q.allocated);
        let candidate = without_cards(&task.resreq);
        let node = &self.tree.nodes[i];
        if let Some(real) = &node.real_capability
            && let Some(x) = allocatable_excess(&allocated, &candidate, real)
        {
            return Err(Rejection::exceeded(
                "capacity",
                q.name(),
                x,
                "capability",
                None,
            ));
        }
        match within_deserved_somewhere(&allocated, &candidate, &node.deserved) {
            Ok(()) => Ok(()),
            Err(_)
                if self
                    .reclaim_tree()
                    .ancestor_may_reclaim(state, i, &candidate) =>
            {
                Ok(())
            }
            Err(x) => Err(Rejection::exceeded(
                "capacity",
                q.name(),
                x,
                "deserved",
                None,
            )),
        }
    }

    /// Victims only from queues above their deserved amount (and, with
    /// `ancestorReclaimLevel`, whose ancestors are too), and only while they stay
    /// above it.
    fn reclaimable(
        &self,
        state: &SessionState,
        reclaimer: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(self.reclaim_tree().victims(state, reclaimer, candidates))
    }

    /// `gangpreempt`: every candidate (capacity has no say within a queue).
    /// `gangreclaim`: as `reclaimable`, against the starving job's whole need.
    fn gang_evictable(
        &self,
        state: &SessionState,
        eviction: &GangEviction<'_>,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        match eviction.kind {
            GangEvictionKind::Preempt => Some(candidates.iter().map(|t| t.uid.clone()).collect()),
            GangEvictionKind::Reclaim => Some(self.reclaim_tree().victims(
                state,
                eviction.need,
                candidates,
            )),
        }
    }

    /// Under hierarchy, as Volcano: victims of the queues nearest the preemptor's
    /// in the tree (sharing the deepest ancestor with it) go first, so a team
    /// takes back from its sibling before it reaches into another organisation.
    fn victim_queue_order(&self, _: &SessionState, a: &str, b: &str, preemptor: &str) -> Ordering {
        if !self.hierarchy {
            return Ordering::Equal;
        }
        let shared = |q: &str| -> usize {
            let (Some(i), Some(p)) = (self.tree.position(q), self.tree.position(preemptor)) else {
                return 0;
            };
            let mine = &self.tree.nodes[p].ancestors;
            self.tree.nodes[i]
                .ancestors
                .iter()
                .filter(|anc| mine.contains(anc))
                .count()
        };
        shared(b).cmp(&shared(a))
    }

    fn describe_queue(&self, state: &SessionState, q: &QueueInfo, report: &mut QueueReport) {
        let Some(i) = self.tree.position(q.name()) else {
            return;
        };
        let node = &self.tree.nodes[i];
        report.state_reason = node.error.as_ref().map(ToString::to_string);
        report.leaf = node.is_leaf();
        report.capability = node.capability.clone();
        report.real_capability = node.real_capability.clone();
        report.deserved = Some(node.deserved.clone());
        report.allocated = self.tree.sum(state, i, |q| &q.allocated);
        report.request = self.tree.sum(state, i, |q| &q.request);
        report.inqueue = self.tree.sum(state, i, |q| &q.inqueue);
        report.elastic = self.tree.sum(state, i, |q| &q.elastic);
        report.cards_allocated = self.tree.cards(state, i);
        report.share = self.share(state, i);
    }
}
