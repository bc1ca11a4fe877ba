//! The last planning cycle's picture, for `/debug/queues`, `vgpu-scheduler
//! queues` and the queue metrics.

use super::eviction_view::{EvictionRecord, PipelinedView};
use super::gang_verdicts::GangVerdicts;
use super::status::QueueCounts;
use crate::volcano::framework::QueueReport;
use serde::Serialize;
use std::collections::BTreeMap;

/// The last cycle's picture.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangView {
    /// When the cycle ran (RFC 3339).
    pub planned_at: Option<String>,
    /// Queues: deserved, allocated, share...
    pub queues: Vec<QueueReport>,
    /// PodGroups per phase, by queue.
    pub gang_counts: BTreeMap<String, QueueCounts>,
    /// Every gang and why it waits.
    pub gangs: GangVerdicts,
    /// Pods waiting for evicted pods to leave, and whom they wait for.
    pub pipelined: Vec<PipelinedView>,
    /// The last evictions asked, oldest first.
    pub evictions: Vec<EvictionRecord>,
    /// How the configuration in force is applied (conflicting plugins, replaced
    /// values).
    pub configuration_notes: Vec<String>,
}
