//! Sending a pod past a busy node.
//!
//! Only one pod per node may be between its bind and the device plugin's answer
//! (HAMi's node lock), so a pod sent to a node whose lock is held waits for that
//! answer, and under binpack consecutive pods go to the same node. A node is
//! busy when a bind is ahead of the pod there (waiting for or holding the lock,
//! or a lock is held) and either the device plugin is slow to answer (a lock
//! has lately stayed held, or the current one has been held, longer than
//! [`SLOW_ANSWER`]), or the binds ahead would keep the pod waiting longer than
//! [`LONGEST_QUEUE`], or pods come faster than one node hands its lock on
//! ([`OUTPACED_AT`] placed within one lock's hold, once a bind here has taken
//! a lock). Until the first release of a lock taken here is seen,
//! the device plugin is taken to answer in [`SLOW_ANSWER`], or in the longest a
//! lock taken here has been held so far if that is longer: a burst that arrives right after a start
//! would otherwise pile onto the first node (hundreds of `/filter`s a second
//! reach it before its first bind has even taken the lock) and wait there for
//! a slow device plugin, one pod at a time. When the device plugin answers at
//! once, the binds of one node follow each other quickly and binpack keeps
//! filling it, exactly as without this, as long as pods come no faster than
//! it answers; when they do (a burst), the burst fills nodes nearly as good
//! side by side: a pod goes to a node without binds ahead only while fewer
//! nodes have binds ahead than pods came within one lock's hold (at most
//! [`MOST_SIDE_BY_SIDE`]), and otherwise joins the one with the fewest; when the
//! device plugin takes as long as a kubelet admitting a pod, a node is busy as
//! soon as one bind holds it.
//!
//! When the policy's best node is busy, the pod goes instead to the best node
//! that is not busy and that the policy likes at most `--busy-node-tolerance`
//! points less (of its 0–100 preference: a node's utilisation in percent under
//! binpack, its free share under spread); if every such node is busy too, to the
//! one among them with the fewest binds ahead, when that is fewer than at the
//! best node. Otherwise it waits for the best node, as before.
//!
//! One case overrides the tolerance: when the binds ahead at the best node
//! would, at the device plugin's pace, keep the pod waiting longer than a bind
//! may wait (`--node-lock-retry-timeout`), its bind would fail there and the
//! pod would come back to be placed again; it goes instead to the best node
//! the policy finds among those where it would be bound in time, as if the
//! best node were full (a node nearly as good is taken only if the pod would
//! be bound there in time too). Before the first answer is seen, each bind
//! ahead is taken to last [`SLOWEST_ANSWER`] for this (or the longest a lock
//! taken here has been held, if longer): a node then takes binds of a burst
//! that arrives right after a start until those ahead of the next pod would
//! take longer than that timeout (about twenty by default), not all it has
//! room for, most of which would time out behind a slow device plugin.
//!
//! The tolerance bounds what the policy gives up: under binpack a pod is never
//! placed on a node more than that many points emptier than the node binpack
//! would have chosen (unless that node could not bind it in time, as above), so nodes are still filled fullest first, and only nodes
//! within the tolerance of each other are filled side by side. With plugin node
//! scores (Volcano's `nodeorder`, `binpack`, ...) the tolerance bounds the
//! policy's share of the score; the plugins still order the nodes it admits.

use super::{PodContext, Scheduler};
use crate::device::request::PodRequest;
use crate::fit::{FitRequest, Placement, QuotaHeadroom};
use crate::node_lock::handoff::LockHandoff;
use crate::placement::{
    NodeFacts, NodeJudge, NodeRejection, NodeSource, RankFacts, TaskFacts, best_node,
};
use crate::policy::NodePolicy;
use std::cell::{Cell, OnceCell};
use std::time::{Duration, Instant};

/// A device plugin holding a lock longer than this is slow to answer: a lock
/// handed on at once takes a few API round trips, a kubelet admitting a pod
/// hundreds of milliseconds.
pub const SLOW_ANSWER: Duration = Duration::from_millis(100);

/// How long a device plugin may take to answer, as far as anyone knows before
/// it first has: a kubelet admitting a pod under load.
pub const SLOWEST_ANSWER: Duration = Duration::from_secs(1);

/// Longest a pod is queued behind the binds of one node when a nearly as good
/// node is free, however quickly the device plugin answers.
pub const LONGEST_QUEUE: Duration = Duration::from_secs(1);

/// Pods placed within one lock's hold, beyond which pods come faster than one
/// node hands its lock on: a node with a bind ahead is then busy, however
/// quickly its device plugin answers, and a burst fills as many nodes side by
/// side as it takes to keep up. Two, not one: a pair that happens to come
/// close together in a trickle leaves binpack filling one node.
pub const OUTPACED_AT: usize = 2;

/// Most nodes a burst that outpaces the turns fills side by side. The nodes it
/// takes are what binpack gives up; past a few dozen they gain no speed, as
/// what holds the binds back then is the API server (docs/benchmarks.md: on
/// the calibrated control plane a 1,000-pod burst went as fast on 32 nodes as
/// on 64 or 200, and half as fast on 13).
pub const MOST_SIDE_BY_SIDE: usize = 32;

/// Why a candidate is left out of the search for a spare node.
pub(crate) const BUSY_OR_WORSE: &str = "busy or not nearly as good as the best node";

/// The candidates of `inner` that the policy likes at least `floor` and that
/// `admit` lets through (by position).
struct NearlyAsGood<'s, S: ?Sized> {
    inner: &'s S,
    admit: &'s dyn Fn(usize) -> bool,
    request: &'s PodRequest,
    policy: NodePolicy,
    floor: f64,
}

impl<S: NodeSource + ?Sized> NearlyAsGood<'_, S> {
    fn admits(&self, i: usize, score: f64) -> bool {
        self.policy.preference(score) >= self.floor && (self.admit)(i)
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
        // A node that cannot take the pod anyway is ranked out as it is, without
        // asking `admit` (which looks the node up in the lock handoff's book).
        if rank.usable && rank.may_fit && !self.admits(i, rank.score) {
            Some(RankFacts {
                usable: false,
                may_fit: false,
                ..rank
            })
        } else {
            Some(rank)
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

/// How long a lock is expected to stay held, for the two questions asked.
#[derive(Clone, Copy)]
struct Pace {
    /// For whether a node is busy.
    hold: Duration,
    /// For whether the binds ahead would be answered within the bind's budget.
    hold_for_budget: Duration,
    /// A bind here has taken a lock: one has been released since, or one is
    /// held now.
    turns_taken: bool,
}

impl Pace {
    fn of(handoff: &LockHandoff, now: Instant) -> Self {
        match handoff.mean_hold() {
            Some(mean) => Self {
                hold: mean,
                hold_for_budget: mean,
                turns_taken: true,
            },
            None => {
                let held = handoff.longest_current_hold(now);
                let longest = held.unwrap_or_default();
                Self {
                    // No device plugin answer seen yet: as slow as a slow one,
                    // or as the longest hold so far, so that at most
                    // LONGEST_QUEUE / SLOW_ANSWER binds pile onto a node before
                    // its device plugin's speed is known.
                    hold: longest.max(SLOW_ANSWER),
                    // And as if each bind ahead took as long as the slowest
                    // kubelets take, for whether it is answered in time.
                    hold_for_budget: longest.max(SLOWEST_ANSWER),
                    turns_taken: held.is_some(),
                }
            }
        }
    }
}

/// How long `ahead` binds take at `hold` each.
fn queue_time(hold: Duration, ahead: usize) -> Duration {
    hold.saturating_mul(u32::try_from(ahead).unwrap_or(u32::MAX))
}

/// What a pod sent to a node now would queue behind.
#[derive(Debug, Clone, Copy)]
struct Queue {
    /// Binds ahead of it.
    ahead: usize,
    /// Whether that makes the node busy (see the module documentation).
    busy: bool,
}

/// The queue at each candidate, asked of the lock handoff at most once per
/// candidate: the searches for a spare node pass over the candidates up to
/// four times, and the handoff's book is behind a lock and keyed by name.
struct Queues<'a> {
    handoff: &'a LockHandoff,
    now: Instant,
    /// How long a lock is expected to stay held, for whether a node is busy.
    hold: Duration,
    /// Pods placed within one lock's hold, up to [`MOST_SIDE_BY_SIDE`]: while
    /// pods come that fast, how many nodes may fill side by side.
    side_by_side: usize,
    seen: Vec<Cell<Option<Queue>>>,
}

impl<'a> Queues<'a> {
    fn new(handoff: &'a LockHandoff, now: Instant, pace: &Pace, candidates: usize) -> Self {
        let Pace {
            hold, turns_taken, ..
        } = *pace;
        // Only binds that take turns at a lock here can be outpaced; where none
        // does (a cluster file's binds lock nothing to be answered) the pace
        // of pods says nothing about the turns, and searching past every node
        // with a bind on its way would cost each `/filter` a second pass over
        // the candidates for nothing.
        let side_by_side = if turns_taken {
            handoff.placed_within(hold, now).min(MOST_SIDE_BY_SIDE)
        } else {
            0
        };
        Self {
            handoff,
            now,
            hold,
            side_by_side,
            seen: vec![Cell::new(None); candidates],
        }
    }

    /// Pods come faster than a node hands its lock on (see [`OUTPACED_AT`]).
    fn outpaced(&self) -> bool {
        self.side_by_side >= OUTPACED_AT
    }

    /// The queue at `node`, asked now.
    fn at(&self, node: &str) -> Queue {
        let ahead = self.handoff.binds_ahead_at(node, self.now);
        let busy = ahead > 0
            && (self.outpaced()
                || self.hold > SLOW_ANSWER
                || queue_time(self.hold, ahead) > LONGEST_QUEUE
                || self.handoff.held_for(node, self.now) > SLOW_ANSWER);
        Queue { ahead, busy }
    }

    /// The queue at the candidate at position `i` of `source`.
    fn of<S: NodeSource + ?Sized>(&self, source: &S, i: usize) -> Queue {
        let Some(seen) = self.seen.get(i) else {
            return self.at(source.name(i));
        };
        if let Some(queue) = seen.get() {
            return queue;
        }
        let queue = self.at(source.name(i));
        seen.set(Some(queue));
        queue
    }
}

impl Scheduler {
    /// A node to use instead of `best` (whose policy score before placing was
    /// `best_score`) because `best` is busy (see the module documentation),
    /// among `candidates` (best read once per candidate: see `RankMemo`).
    /// `None` when `best` is not busy or no other node qualifies.
    pub(super) fn spare_node<S: NodeSource + ?Sized>(
        &self,
        candidates: &S,
        ctx: &PodContext,
        task: &TaskFacts<'_>,
        judge: &dyn NodeJudge,
        best: &str,
        best_score: f64,
    ) -> Option<String> {
        let tolerance = self.config.busy_node_tolerance?;
        let now = self.clock.now();
        let handoff = &self.lock_handoff;
        let pace = Pace::of(handoff, now);
        let queues = Queues::new(handoff, now, &pace, candidates.len());
        let Pace {
            hold_for_budget, ..
        } = pace;
        let at_best = queues.at(best);
        if !at_best.busy {
            return None;
        }
        let policy = ctx.policies.node;
        let floor = policy.preference(best_score) - tolerance;
        let choose_above = |floor: f64, admit: &dyn Fn(usize) -> bool| {
            let source = NearlyAsGood {
                inner: candidates,
                admit,
                request: &ctx.request,
                policy,
                floor,
            };
            best_node(&source, ctx, task, judge).map(|c| c.node)
        };
        let within_tolerance = |admit: &dyn Fn(usize) -> bool| choose_above(floor, admit);
        let budget = self.config.node_lock_retry_timeout;
        let in_time = |queue: Queue| queue_time(hold_for_budget, queue.ahead) <= budget;
        let queue = |i: usize| queues.of(candidates, i);
        // A burst that outpaces the turns opens no more nodes than pods come
        // in one turn: enough for the turns to keep up with it, and no more
        // nodes than that given up to packing when something else (the
        // control plane) is what holds the binds back.
        let opening = OnceCell::new();
        let may_open = || {
            *opening.get_or_init(|| {
                !queues.outpaced()
                    || !handoff.nodes_with_binds_ahead_reach(queues.side_by_side, now)
            })
        };
        let open_or_may_open = |q: Queue| q.ahead > 0 || may_open();
        let idle = |i: usize| {
            let q = queue(i);
            !q.busy && in_time(q) && open_or_may_open(q)
        };
        let spare = within_tolerance(&idle).or_else(|| {
            // Every node nearly as good is busy: the one with the fewest binds
            // ahead, if that is fewer than at the best node.
            let fewest = (0..candidates.len())
                .filter(|&i| {
                    candidates.rank(i, &ctx.request).is_some_and(|r| {
                        r.usable && r.may_fit && policy.preference(r.score) >= floor
                    })
                })
                .map(&queue)
                .filter(|&q| open_or_may_open(q))
                .map(|q| q.ahead)
                .min()?;
            if fewest >= at_best.ahead {
                return None;
            }
            // Not in time there either: then the best node is not (it has more
            // ahead), and the case below finds one that is.
            within_tolerance(&|i: usize| {
                let q = queue(i);
                q.ahead <= fewest && in_time(q)
            })
        });
        let spare = match spare {
            Some(spare) => {
                tracing::debug!(pod = %ctx.name, busy = best, instead = %spare, "best node busy with binds; a nearly as good one takes the pod");
                spare
            }
            // The binds ahead at the best node would outlast the bind's wait:
            // the pod would fail there, so the policy's best node where it
            // would not takes it, however much less the policy likes it.
            None if !in_time(at_best) => {
                let spare = choose_above(f64::NEG_INFINITY, &|i: usize| in_time(queue(i)))?;
                tracing::debug!(pod = %ctx.name, busy = best, instead = %spare, "binds ahead at the best node would outlast --node-lock-retry-timeout");
                spare
            }
            None => return None,
        };
        Some(spare)
    }
}
