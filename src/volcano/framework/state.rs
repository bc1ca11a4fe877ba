//! What a session works on: jobs, queues and nodes copied from the cluster when it
//! opened, changed only through statements. Plugins read it; only the session
//! writes it.

use super::job::{GangKey, JobInfo, TaskInfo};
use super::job_map::Jobs;
use super::nodes::NodeSet;
use super::queue::QueueInfo;
use crate::resources::Resources;
use crate::resources::VgpuDims;
use crate::volcano::disruption_budget::DisruptionBudget;
use crate::volcano::resource_quota::NamespaceQuota;
use crate::volcano::topology::NetworkTopology;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The session's picture of the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionState {
    /// Jobs by gang, shared with the planner's copy kept between cycles: a
    /// persistent map, so that handing it to a session and dropping it cost
    /// nothing per job, and a session copies only the jobs it changes (and the
    /// few map nodes on their way), with the log of the gangs changed on its
    /// way (see `job_map`).
    pub jobs: Jobs,
    /// Queues by name (every queue that exists, and the default queue).
    pub queues: BTreeMap<String, QueueInfo>,
    /// Nodes and their usage.
    pub nodes: NodeSet,
    /// Everything the cluster offers: node CPU and memory plus registered vGPUs.
    pub total: Resources,
    /// The vGPU resource names.
    pub dims: VgpuDims,
    /// When the session opened.
    pub now: DateTime<Utc>,
    /// Plan only this job, and also its members without our gate (the `/filter`
    /// fallback for pods that reached kube-scheduler ungated).
    pub only: Option<GangKey>,
    /// PodDisruptionBudgets.
    pub budgets: Vec<DisruptionBudget>,
    /// ResourceQuotas by namespace, in name order.
    pub resource_quotas: BTreeMap<String, Vec<NamespaceQuota>>,
    /// HyperNodes resolved against the session's nodes.
    pub topology: Arc<NetworkTopology>,
}

impl SessionState {
    /// A job.
    pub fn job(&self, key: &GangKey) -> Option<&JobInfo> {
        self.jobs.get(key).map(|j| &**j)
    }

    /// A queue.
    pub fn queue(&self, name: &str) -> Option<&QueueInfo> {
        self.queues.get(name)
    }

    /// A task by its job and UID.
    pub fn task(&self, job: &GangKey, uid: &str) -> Option<&TaskInfo> {
        self.jobs.get(job)?.tasks.iter().find(|t| t.uid == uid)
    }

    /// Whether this session may place the task: it waits, and it carries our gate
    /// (or the session plans its job alone, for pods that arrived ungated).
    pub fn plannable(&self, task: &TaskInfo) -> bool {
        plannable_when(task, self.only.is_some())
    }

    /// Allocated over all queues.
    pub fn allocated_total(&self) -> Resources {
        let mut r = Resources::default();
        for q in self.queues.values() {
            r.add(&q.allocated);
        }
        r
    }

    /// In-queue reservations over all queues.
    pub fn inqueue_total(&self) -> Resources {
        let mut r = Resources::default();
        for q in self.queues.values() {
            r.add(&q.inqueue);
        }
        r
    }
}

/// Whether a session may place the task: it waits, and it carries our gate, or
/// the session plans its job alone (`alone`), for pods that arrived ungated.
pub fn plannable_when(task: &TaskInfo, alone: bool) -> bool {
    task.is_pending() && (task.gated || alone)
}
