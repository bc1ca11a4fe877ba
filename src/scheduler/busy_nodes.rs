//! Sending a pod past a busy node.
//!
//! Only one pod per node may be between its bind and the device plugin's answer
//! (HAMi's node lock), so a pod sent to a node whose lock is held waits for that
//! answer, and under binpack consecutive pods go to the same node. A node is
//! busy when a bind is ahead of the pod there (waiting for or holding the lock,
//! or a lock is held) and either the device plugin is slow to answer (a lock
//! has lately stayed held, or the current one has been held, longer than
//! [`SLOW_ANSWER`]) or the binds ahead would keep the pod waiting longer than
//! [`LONGEST_QUEUE`]. When the device plugin answers at once, the binds of one
//! node follow each other quickly and binpack keeps filling it, exactly as
//! without this; when it takes as long as a kubelet admitting a pod, a node is
//! busy as soon as one bind holds it.
//!
//! When the policy's best node is busy, the pod goes instead to the best node
//! that is not busy and that the policy likes at most `--busy-node-tolerance`
//! points less (of its 0–100 preference: a node's utilisation in percent under
//! binpack, its free share under spread); if every such node is busy too, to the
//! one among them with the fewest binds ahead, when that is fewer than at the
//! best node. Otherwise it waits for the best node, as before.
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
use std::time::Duration;

/// A device plugin holding a lock longer than this is slow to answer: a lock
/// handed on at once takes a few API round trips, a kubelet admitting a pod
/// hundreds of milliseconds.
pub const SLOW_ANSWER: Duration = Duration::from_millis(100);

/// Longest a pod is queued behind the binds of one node when a nearly as good
/// node is free, however quickly the device plugin answers.
pub const LONGEST_QUEUE: Duration = Duration::from_secs(1);

/// Why a candidate is left out of the search for a spare node.
const BUSY_OR_WORSE: &str = "busy or not nearly as good as the best node";

/// The candidates of `inner` that the policy likes at least `floor` and that
/// `admit` lets through.
struct NearlyAsGood<'s, S: ?Sized> {
    inner: &'s S,
    admit: &'s dyn Fn(&str) -> bool,
    request: &'s PodRequest,
    policy: NodePolicy,
    floor: f64,
}

impl<S: NodeSource + ?Sized> NearlyAsGood<'_, S> {
    fn admits(&self, i: usize, score: f64) -> bool {
        self.policy.preference(score) >= self.floor && (self.admit)(self.inner.name(i))
    }

    fn admitted(&self, i: usize) -> bool {
        self.inner
            .rank(i, self.request)
            .is_some_and(|r| self.admits(i, r.score))
    }
}

impl<S: NodeSource + ?Sized> NodeSource for NearlyAsGood<'_, S> {
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
    /// `best_score`) because `best` is busy (see the module documentation).
    /// `None` when `best` is not busy or no other node qualifies.
    pub(super) fn spare_node(
        &self,
        pod: Option<&Pod>,
        ctx: &PodContext,
        names: &NodeNames,
        best: &str,
        best_score: f64,
    ) -> Option<String> {
        let tolerance = self.config.busy_node_tolerance?;
        let now = self.clock.now();
        let handoff = &self.lock_handoff;
        let hold = handoff.hold_time();
        let busy = |node: &str| {
            let ahead = handoff.binds_ahead_at(node, now);
            ahead > 0
                && (hold > SLOW_ANSWER
                    || handoff.held_for(node, now) > SLOW_ANSWER
                    || hold * ahead as u32 > LONGEST_QUEUE)
        };
        if !busy(best) {
            return None;
        }
        let policy = ctx.policies.node;
        let floor = policy.preference(best_score) - tolerance;
        let conf = self.node_judge();
        let judge = conf.judge();
        let facts = PodFacts::of(self, judge, pod, ctx);
        let task = facts.task(ctx, pod);
        let ledger = self.ledger.read();
        let candidates = LedgerCandidates::new(self, &ledger, names);
        let choose = |admit: &dyn Fn(&str) -> bool| {
            let source = NearlyAsGood {
                inner: &candidates,
                admit,
                request: &ctx.request,
                policy,
                floor,
            };
            choose_node(&source, ctx, &task, judge).ok().map(|c| c.node)
        };
        let idle = |node: &str| !busy(node);
        let spare = choose(&idle).or_else(|| {
            // Every node nearly as good is busy: the one with the fewest binds
            // ahead, if that is fewer than at the best node.
            let fewest = (0..candidates.len())
                .filter(|&i| {
                    candidates.rank(i, &ctx.request).is_some_and(|r| {
                        r.usable && r.may_fit && policy.preference(r.score) >= floor
                    })
                })
                .map(|i| handoff.binds_ahead_at(candidates.name(i), now))
                .min()?;
            if fewest >= handoff.binds_ahead_at(best, now) {
                return None;
            }
            choose(&|node: &str| handoff.binds_ahead_at(node, now) <= fewest)
        })?;
        tracing::debug!(pod = %ctx.name, busy = best, instead = %spare, "best node busy with binds; a nearly as good one takes the pod");
        Some(spare)
    }
}
