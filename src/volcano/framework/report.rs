//! One queue's standing after a session, for `GET /debug/queues`, Queue status and
//! metrics. The session fills what it keeps itself; plugins fill what they derive
//! (deserved, capability, share, card use).

use crate::volcano::objects::QueueState;
use crate::volcano::resources::Resources;
use serde::Serialize;
use std::collections::BTreeMap;

/// One queue's state, for `GET /debug/queues` and metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueReport {
    /// Queue name.
    pub name: String,
    /// `status.state` of the Queue object.
    pub state: QueueState,
    /// Set when the session treats the queue as closed although its state is Open
    /// (a broken hierarchy).
    pub state_reason: Option<String>,
    /// Weight.
    pub weight: u32,
    /// Priority.
    pub priority: i32,
    /// Parent queue (`None` for the top level).
    pub parent: Option<String>,
    /// Whether other queues may reclaim from it.
    pub reclaimable: bool,
    /// Whether the queue may hold jobs (no child queues).
    pub leaf: bool,
    /// Guarantee.
    pub guarantee: Option<Resources>,
    /// Capability in force (with dimensions inherited from the parent under
    /// hierarchical capacity).
    pub capability: Option<Resources>,
    /// The effective limit (`None` without a quota plugin or for a broken queue).
    pub real_capability: Option<Resources>,
    /// Deserved amount (`None` without a quota plugin).
    pub deserved: Option<Resources>,
    /// Allocated resources.
    pub allocated: Resources,
    /// Allocated plus pending.
    pub request: Resources,
    /// Admitted, not yet running.
    pub inqueue: Resources,
    /// Elastic part of running jobs.
    pub elastic: Resources,
    /// Dominant share of deserved in use.
    pub share: f64,
    /// Whether allocation skips the queue.
    pub overused: bool,
    /// `volcano.sh/card.quota`.
    pub card_quota: BTreeMap<String, i64>,
    /// Cards in use per quota key.
    pub card_used: BTreeMap<String, i64>,
    /// Cards in use per card type.
    pub cards_allocated: BTreeMap<String, i64>,
}
