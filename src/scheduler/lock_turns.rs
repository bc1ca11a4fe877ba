//! Waiting for a node's lock during `/bind`: the turn a bind holds, the wake-ups
//! that end the wait, and how long it may last.

use super::Scheduler;
use crate::annotations::BIND_PHASE;
use crate::ledger::PodPhase;
use crate::node_lock::handoff::{LockSighting, Turn};
use crate::node_lock::mode::NodeLockMode;
use crate::node_lock::{self, LockError, LockKnowledge, ReadEverything};
use crate::object_namespace::namespace_of;
use k8s_openapi::api::core::v1::Pod;
use std::time::{Duration, Instant};

/// Shortest wait for a node lock, however long the bind waited before asking.
const LOCK_MIN_WAIT: Duration = Duration::from_secs(3);

/// How often a waiting bind looks at the lock again when no watch reports its
/// release (a cluster file): HAMi's retry interval.
const UNWATCHED_RECHECK: Duration = Duration::from_millis(100);

/// How often a waiting bind looks at the lock again although the watch reports
/// releases: for a holder nothing announces (a pod this process never heard of
/// that is gone, a lock that expires). Each look costs two API reads (the node,
/// the holder), and with slow device plugins a bind waits on every busy node:
/// at one look a second, 200 waiting nodes spent most of the client's QPS.
const WATCHED_RECHECK: Duration = Duration::from_secs(5);

/// How long a bind waits for the watch to show a node newer than its copy (one
/// a lock write was refused at, or one before its own lock write) before it
/// reads the node instead: a watch delivers a change in milliseconds, so the
/// read is left for a watch that has fallen behind or broken.
const WATCH_CATCH_UP: Duration = Duration::from_millis(500);

impl Scheduler {
    /// Until when a bind that `started` then may wait for its node's lock:
    /// `--node-lock-retry-timeout` after it started, but at least
    /// `LOCK_MIN_WAIT` (or the whole timeout, if shorter) from now.
    fn lock_deadline(&self, started: Instant) -> Instant {
        let budget = self.config.node_lock_retry_timeout;
        let now = self.clock.now();
        let far = |from: Instant, by: Duration| from.checked_add(by).unwrap_or(from);
        far(started, budget).max(far(now, LOCK_MIN_WAIT.min(budget)))
    }

    /// Waits for the bind's turn at `node`'s lock, for as long as the bind may
    /// wait for the lock itself (see [`Scheduler::lock_node`]): a pod queued
    /// behind more binds than the device plugin answers in that time fails here
    /// with the reason, instead of outliving kube-scheduler's `httpTimeout` and
    /// being cut off without one.
    pub(super) async fn wait_for_turn(&self, node: &str, started: Instant) -> Result<Turn, String> {
        let budget = self.config.node_lock_retry_timeout;
        let now = self.clock.now();
        let give_up = self.lock_deadline(started);
        let ahead = self.lock_handoff.binds_at(node);
        match tokio::time::timeout(
            give_up.saturating_duration_since(now),
            self.lock_handoff.turn(node),
        )
        .await
        {
            Ok(turn) => Ok(turn),
            Err(_) => Err(format!(
                "node {node}: {ahead} binds were ahead of this pod and did not finish within --node-lock-retry-timeout ({budget:?}): the device plugin there is slow to answer; the pod will be placed again"
            )),
        }
    }

    /// Takes the node lock during the bind's `turn`, waiting for another pod's lock
    /// until `--node-lock-retry-timeout` after the bind `started`, so that time a
    /// strict gang member spent at its barrier counts against the same budget and
    /// the whole bind stays near kube-scheduler's `httpTimeout`; but always for at
    /// least `LOCK_MIN_WAIT` (members of one gang on one node queue for the lock
    /// right after their barrier opens). Each new look at the lock follows a
    /// release the watch saw, not a timer.
    pub(super) async fn lock_node(
        &self,
        turn: &mut Turn,
        node: &str,
        (uid, ns, name): (&str, &str, &str),
        started: Instant,
    ) -> Result<(), LockError> {
        let give_up = self.lock_deadline(started);
        let recheck = if self.api.reports_changes() {
            WATCHED_RECHECK
        } else {
            UNWATCHED_RECHECK
        };
        loop {
            turn.mark_seen();
            let taken = match self.config.node_lock {
                NodeLockMode::Node => {
                    node_lock::acquire(
                        self.api.as_ref(),
                        self.lock_knowledge(),
                        self.clock.wall(),
                        node,
                        ns,
                        name,
                        self.config.node_lock_timeout,
                    )
                    .await
                }
                NodeLockMode::Pods => self.claim_node(node, uid, ns, name).await,
            };
            match taken {
                Err(LockError::Contention { .. }) if self.clock.now() < give_up => {
                    let grace = self
                        .lock_handoff
                        .release_grace_left(node, self.clock.now())
                        .map(|left| left + Duration::from_millis(1));
                    turn.wait_for_release(grace.map_or(recheck, |g| g.min(recheck)))
                        .await;
                }
                other => return other,
            }
        }
    }

    /// What node locks are taken from: with watches, the watch's copy of the
    /// node; a cluster file's store is local, and reading it costs nothing.
    pub(super) fn lock_knowledge(&self) -> &dyn LockKnowledge {
        if self.api.reports_changes() {
            self
        } else {
            &ReadEverything
        }
    }

    /// Lets go of `node` for the pod `uid` (`ns/name`) whose bind failed: its
    /// lock annotation, or under `--node-lock pods` its claim.
    pub(super) async fn unlock_node(&self, node: &str, (uid, ns, name): (&str, &str, &str)) {
        match self.config.node_lock {
            NodeLockMode::Node => {
                if let Err(e) = node_lock::release(self.api.as_ref(), node, ns, name).await {
                    tracing::warn!(node, error = %e, "could not release node lock after a failed bind");
                }
            }
            NodeLockMode::Pods => self.give_up_node_claim(uid),
        }
    }

    /// A pod the device plugin has answered for (bind phase `success` or
    /// `failed`) no longer needs its node's lock, which the next bind may then
    /// take over even if the device plugin has not released it.
    pub(super) fn nudge_lock_of_answered_pod(&self, pod: &Pod) {
        let answered = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(BIND_PHASE))
            .is_some_and(|p| p == "success" || p == "failed");
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && answered
        {
            self.lock_handoff.answered(
                node,
                namespace_of(&pod.metadata),
                pod.metadata.name.as_deref().unwrap_or_default(),
                self.clock.now(),
            );
        }
    }
}

/// What the watches told this process about node locks and their owners.
#[async_trait::async_trait]
impl LockKnowledge for Scheduler {
    async fn sighting(&self, node: &str, stale: Option<&str>) -> Option<LockSighting> {
        self.lock_handoff
            .sighting_after(node, stale, WATCH_CATCH_UP)
            .await
    }

    /// The hold is timed from the write until the watch shows it released.
    fn writing(&self, node: &str, over: Option<&str>) {
        self.lock_handoff.writing(node, over, self.clock.now());
    }

    fn write_refused(&self, node: &str) {
        self.lock_handoff.write_refused(node);
    }

    /// An owner the device plugin answered for is done (once the device plugin
    /// had time to release the lock itself); one the ledger has binding or bound
    /// on this node still waits for it; of any other owner (gone, finished,
    /// another process's) nothing is known here.
    fn owner_is_stale(&self, node: &str, namespace: &str, pod: &str) -> Option<bool> {
        if self
            .lock_handoff
            .answered_long_ago(node, namespace, pod, self.clock.now())
        {
            return Some(true);
        }
        let ledger = self.ledger.read();
        let waiting = ledger
            .pods_named(namespace, pod)
            .any(|p| p.node == node && matches!(p.phase, PodPhase::Binding | PodPhase::Bound));
        waiting.then_some(false)
    }
}
