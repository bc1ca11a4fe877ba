//! Sending a pod past a busy node.
//!
//! Only one pod per node may be between its bind and the device plugin's answer
//! (HAMi's node lock), so a pod sent to a node whose lock is held waits for that
//! answer, and under binpack consecutive pods go to the same node. When the
//! policy's best node is busy (a bind waits for or holds its lock, or its lock is
//! held), the pod goes instead to the best node that is not busy and that the
//! policy likes at most `--busy-node-tolerance` points less (of its 0–100
//! preference: a node's utilisation in percent under binpack, its free share
//! under spread). Without such a node it waits for the busy one, as before.
//!
//! The tolerance bounds what the policy gives up: under binpack a pod is never
//! placed on a node more than that many points emptier than the node binpack
//! would have chosen, so nodes are still filled fullest first, and only nodes
//! within the tolerance of each other are filled side by side. With plugin node
//! scores (Volcano's `nodeorder`, `binpack`, ...) the tolerance bounds the
//! policy's share of the score; the plugins still order the nodes it admits.

use super::filter::{LedgerCandidates, PodFacts};
use super::{PodContext, Scheduler};
use crate::device::request::PodRequest;
use crate::extender::node_names::NodeNames;
use crate::fit::{FitRequest, Placement, QuotaHeadroom};
use crate::placement::{NodeFacts, NodeRejection, NodeSource, RankFacts, choose_node};
use crate::policy::NodePolicy;
use k8s_openapi::api::core::v1::Pod;

/// Why a candidate is left out of the search for a spare node.
const BUSY_OR_WORSE: &str = "busy or not nearly as good as the best node";

/// The candidates of `inner` that are not busy and that the policy likes at
/// least `floor`.
struct IdleNearlyAsGood<'s, S: ?Sized> {
    inner: &'s S,
    scheduler: &'s Scheduler,
    request: &'s PodRequest,
    policy: NodePolicy,
    floor: f64,
}

impl<S: NodeSource + ?Sized> IdleNearlyAsGood<'_, S> {
    fn admits(&self, i: usize, score: f64) -> bool {
        self.policy.preference(score) >= self.floor
            && !self.scheduler.node_is_busy(self.inner.name(i))
    }

    fn admitted(&self, i: usize) -> bool {
        self.inner
            .rank(i, self.request)
            .is_some_and(|r| self.admits(i, r.score))
    }
}

impl<S: NodeSource + ?Sized> NodeSource for IdleNearlyAsGood<'_, S> {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn name(&self, i: usize) -> &str {
        self.inner.name(i)
    }

    fn sorted_by_name(&self) -> bool {
        self.inner.sorted_by_name()
    }

    fn rank(&self, i: usize, request: &PodRequest) -> Option<RankFacts> {
        let rank = self.inner.rank(i, request)?;
        if self.admits(i, rank.score) {
            Some(rank)
        } else {
            Some(RankFacts {
                usable: false,
                may_fit: false,
                ..rank
            })
        }
    }

    fn fit(&self, i: usize, request: &FitRequest<'_>) -> Result<Placement, NodeRejection> {
        if !self.admitted(i) {
            return Err(NodeRejection::Unusable(BUSY_OR_WORSE));
        }
        self.inner.fit(i, request)
    }

    fn quota(&self, namespace: &str) -> QuotaHeadroom {
        self.inner.quota(namespace)
    }

    fn facts(&self, i: usize) -> Option<NodeFacts<'_>> {
        if !self.admitted(i) {
            return None;
        }
        self.inner.facts(i)
    }
}

impl Scheduler {
    /// A node to use instead of `best` (whose policy score before placing was
    /// `best_score`) because `best` is busy: the best node that is not busy and
    /// is within the tolerance (see the module documentation). `None` when `best`
    /// is not busy or no such node fits.
    pub(super) fn spare_node(
        &self,
        pod: Option<&Pod>,
        ctx: &PodContext,
        names: &NodeNames,
        best: &str,
        best_score: f64,
    ) -> Option<String> {
        let tolerance = self.config.busy_node_tolerance?;
        if !self.node_is_busy(best) {
            return None;
        }
        let policy = ctx.policies.node;
        let conf = self.node_judge();
        let judge = conf.judge();
        let facts = PodFacts::of(self, judge, pod, ctx);
        let ledger = self.ledger.read();
        let candidates = LedgerCandidates {
            ledger: &ledger,
            names,
        };
        let spare = IdleNearlyAsGood {
            inner: &candidates,
            scheduler: self,
            request: &ctx.request,
            policy,
            floor: policy.preference(best_score) - tolerance,
        };
        let choice = choose_node(&spare, ctx, &facts.task(ctx, pod), judge).ok()?;
        tracing::debug!(pod = %ctx.name, busy = best, instead = %choice.node, "best node busy with a bind; a nearly as good one takes the pod");
        Some(choice.node)
    }
}
