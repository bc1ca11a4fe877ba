//! PodGroup and Queue status as Volcano writes it, so `kubectl get pg,queue`
//! tells the truth about what the planner decided.

use crate::resources::Resources;
use crate::volcano::framework::{GangPhase, GangVerdict};
use serde_json::{Value, json};

/// The PodGroup `status` for a verdict. `now` is RFC 3339.
///
/// Like Volcano: a gang that waits gets condition `Unschedulable` with the reason
/// and message; a gang that reached its minimum gets `Scheduled`.
pub fn podgroup_status(v: &GangVerdict, now: &str) -> Value {
    let condition = match (&v.reason, v.phase) {
        (Some(reason), GangPhase::Pending | GangPhase::Inqueue) => json!({
            "type": "Unschedulable",
            "status": "True",
            "reason": reason,
            "message": v.message.clone().unwrap_or_default(),
            "lastTransitionTime": now,
            "transitionID": "",
        }),
        (_, GangPhase::Running | GangPhase::Completed) => json!({
            "type": "Scheduled",
            "status": "True",
            "reason": "tasks in gang are ready to be scheduled",
            "message": "",
            "lastTransitionTime": now,
            "transitionID": "",
        }),
        _ => Value::Null,
    };
    let mut status = json!({
        "phase": v.phase.as_str(),
        "running": v.running,
        "succeeded": v.succeeded,
        "failed": v.failed,
    });
    if !condition.is_null() {
        status["conditions"] = json!([condition]);
    }
    status
}

/// What decides whether a PodGroup status needs writing again: everything but
/// the timestamps.
pub fn podgroup_status_key(status: &Value) -> Value {
    let mut key = status.clone();
    if let Some(conditions) = key.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions {
            if let Some(o) = c.as_object_mut() {
                o.remove("lastTransitionTime");
            }
        }
    }
    key
}

/// The Queue `status` for a report: allocated resources and PodGroup counts.
pub fn queue_status(allocated: &Resources, counts: &QueueCounts) -> Value {
    json!({
        "allocated": allocated,
        "pending": counts.pending,
        "inqueue": counts.inqueue,
        "running": counts.running,
        "completed": counts.completed,
    })
}

/// PodGroups of one queue by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueCounts {
    /// Pending PodGroups.
    pub pending: usize,
    /// Inqueue PodGroups.
    pub inqueue: usize,
    /// Running PodGroups.
    pub running: usize,
    /// Completed PodGroups.
    pub completed: usize,
}

impl QueueCounts {
    /// Counts one gang.
    pub fn add(&mut self, phase: GangPhase) {
        match phase {
            GangPhase::Pending => self.pending += 1,
            GangPhase::Inqueue => self.inqueue += 1,
            GangPhase::Running => self.running += 1,
            GangPhase::Completed => self.completed += 1,
        }
    }
}
