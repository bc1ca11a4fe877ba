//! Which knowledge about a pod is newest. Watch events arrive after our own writes
//! and may describe the pod as it was before them; lists (re-lists, resyncs) are
//! snapshots that may be older than what happened while they were taken. Without
//! care, either can undo a reservation we just made (double booking) or bring back
//! one we just released (a phantom hold).
//!
//! The rules:
//! - Our own write is recorded as a *local mark* (`Held` with its placement, or
//!   `Released`). Until a watch event shows the pod in that state (watch events of
//!   one pod arrive in order, so after that every event is newer) or `SETTLE`
//!   passes, events that contradict the mark are stale and ignored.
//! - A deleted or finished pod is final: nothing brings it back.
//! - A snapshot started at time `L` never changes a pod the ledger touched after
//!   `L`, nor one with a local mark.

use crate::device::model::PodDevices;
use std::time::{Duration, Instant};

/// How long a local mark outlives a missing confirmation (a write whose event
/// never comes, e.g. a patch that failed on the wire).
pub const SETTLE: Duration = Duration::from_secs(60);

/// How long bookkeeping for a pod the ledger no longer holds is kept.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// How often that bookkeeping is swept. A sweep visits every pod the ledger
/// knows of, so it runs a few times per [`FORGET_AFTER`] rather than every
/// minute: a pod is forgotten between `FORGET_AFTER` and `FORGET_AFTER +
/// PRUNE_EVERY` after it was last touched (a replay on a virtual clock would
/// otherwise sweep thousands of pods every simulated minute).
pub const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Our own last write about a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalMark {
    /// We placed the pod here (filter or bind).
    Held {
        /// Node.
        node: String,
        /// Devices per container.
        devices: PodDevices,
    },
    /// We released the pod's GPUs and cleared (or will clear) its annotations.
    Released,
}

/// Bookkeeping per pod UID.
#[derive(Debug, Clone)]
pub struct PodMeta {
    /// Last time the ledger's view of this pod changed, from any source.
    pub touched: Instant,
    /// Our own last write not yet confirmed by a watch event, and when it was made
    /// (boxed: most pods have none, and there is one `PodMeta` per pod).
    pub local: Option<Box<(LocalMark, Instant)>>,
    /// Deleted or finished: never tracked again.
    pub finished: bool,
}

impl PodMeta {
    /// Fresh bookkeeping touched now.
    pub fn new(now: Instant) -> Self {
        Self {
            touched: now,
            local: None,
            finished: false,
        }
    }

    /// The local mark if it is still in force.
    pub fn active_mark(&self, now: Instant) -> Option<&LocalMark> {
        self.local
            .as_ref()
            .filter(|l| now.duration_since(l.1) < SETTLE)
            .map(|l| &l.0)
    }

    /// Whether a snapshot started at `since` may change this pod.
    pub fn snapshot_may_change(&self, since: Instant, now: Instant) -> bool {
        !self.finished && self.touched <= since && self.active_mark(now).is_none()
    }
}
