//! What preemption and reclaim are doing, as `/debug/queues` and `vgpu-scheduler
//! queues` show it: the plans waiting for evicted pods to leave, and the last
//! evictions asked with what became of them.

use serde::Serialize;

/// A pod whose GPUs are promised on room still being freed.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PipelinedView {
    /// `namespace/name` of the pod the room is for.
    pub pod: String,
    /// Its queue.
    pub queue: String,
    /// The node the room is on.
    pub node: String,
    /// The pods that must be gone first.
    pub waits_for: Vec<VictimView>,
    /// When the plan lapses if they are not (RFC 3339).
    pub deadline: String,
}

/// One pod a pipelined plan waits for.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VictimView {
    /// `namespace/name` (the UID when the pod is no longer known by name).
    pub pod: String,
    /// Evicted and terminating: its kubelet has not confirmed yet.
    pub leaving: bool,
}

/// One eviction asked of the API server.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRecord {
    /// When (RFC 3339).
    pub at: String,
    /// `namespace/name` of the victim.
    pub pod: String,
    /// `preempt` or `reclaim`.
    pub action: String,
    /// The victim's queue.
    pub queue: String,
    /// The victim's service type, if any.
    pub service_type: Option<String>,
    /// Why, naming the pod it makes room for.
    pub reason: String,
    /// `evicted`, `gone`, `refused` or `failed`.
    pub outcome: String,
    /// The API server's answer when it did not evict.
    pub detail: Option<String>,
}
