//! The plugin trait: Volcano's extension points, each optional. A plugin implements
//! the points it has an opinion on; the defaults say nothing (order: equal; votes:
//! abstain; checks: pass; scores: 0), so a plugin is only as large as its opinions.
//!
//! How the session combines plugins, tier by tier, is in [`super::tiers`].

use super::gang_eviction::GangEviction;
use super::job::{JobInfo, TaskInfo};
use super::queue::QueueInfo;
use super::rejection::Rejection;
use super::report::QueueReport;
use super::state::SessionState;
use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::objects::QueueSpec;
use std::any::Any;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// What a plugin derived from the jobs when a session opened, kept for the next
/// session over the same cluster (see [`Plugin::keep`]).
pub trait KeptFigures: Any + Send + fmt::Debug {}

impl<T: Any + Send + fmt::Debug> KeptFigures for T {}

/// A plugin's answer to a yes/no question it may abstain from (enqueueable,
/// pipelined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Vote {
    /// No opinion.
    Abstain,
    /// Yes.
    Permit,
    /// No, and why.
    Reject(Rejection),
}

/// Why a job cannot be scheduled at all this session (Volcano's job-valid result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInvalid {
    /// Volcano's condition reason (`NotEnoughTasks`, ...).
    pub reason: &'static str,
    /// What users read.
    pub message: String,
}

/// A task placed or taken back, for plugins that keep figures of their own.
#[derive(Debug, Clone, Copy)]
pub struct TaskEvent<'a> {
    /// The task, with the charge it was placed with.
    pub task: &'a TaskInfo,
    /// Its queue.
    pub queue: &'a str,
}

/// Volcano's extension points. Every method has a default that expresses no
/// opinion; see [`super::tiers`] for how answers are combined.
pub trait Plugin: fmt::Debug + Send + Sync {
    /// The plugin's name in the configuration.
    fn name(&self) -> &'static str;

    /// Called once when a session opens, after the session's own state is built:
    /// derive what the plugin keeps (deserved amounts, shares, trees).
    fn open(&mut self, _state: &SessionState) {}

    /// What the plugin derived from the jobs when the session opened, as it was
    /// then (not as the session's placements moved it since), for the next
    /// session to derive again only for the jobs that changed (see
    /// `kept_per_job`). Only a plugin built from an equal configuration entry
    /// gets it, so it may depend on the plugin's arguments and switches as well
    /// as on the session state (never on other plugins' entries, which a
    /// constructor may read through `BuildContext::conf`).
    fn keep(&mut self) -> Option<Box<dyn KeptFigures>> {
        None
    }

    /// Hands the plugin, before [`Self::open`], what the same plugin, built
    /// from an equal configuration entry, kept from the last session
    /// ([`Self::keep`]).
    fn reuse(&mut self, _kept: Box<dyn KeptFigures>) {}

    /// Called on the plugins `/filter` consults, which no session opens, with every
    /// Queue as it is now, and again whenever one changes: a plugin whose predicate
    /// or node order depends on queues derives here what it derives from them in
    /// [`Plugin::open`], so that `/filter` and the planner judge nodes alike.
    fn observe_queues(&mut self, _queues: &BTreeMap<String, QueueSpec>) {}

    /// Job order: `Less` serves `a` first.
    fn job_order(&self, _state: &SessionState, _a: &JobInfo, _b: &JobInfo) -> Ordering {
        Ordering::Equal
    }

    /// Task order inside a job: `Less` places `a` first.
    fn task_order(&self, _a: &TaskInfo, _b: &TaskInfo) -> Ordering {
        Ordering::Equal
    }

    /// Queue order: `Less` serves `a` first.
    fn queue_order(&self, _state: &SessionState, _a: &QueueInfo, _b: &QueueInfo) -> Ordering {
        Ordering::Equal
    }

    /// Whether the job can be scheduled at all (enough pods exist...).
    fn job_valid(&self, _state: &SessionState, _job: &JobInfo) -> Result<(), JobInvalid> {
        Ok(())
    }

    /// Whether the job holds enough to start; `None`: no opinion.
    fn job_ready(&self, _job: &JobInfo) -> Option<bool> {
        None
    }

    /// Whether the job holds enough, counting tasks pipelined onto resources being
    /// freed.
    fn job_pipelined(&self, _job: &JobInfo) -> Vote {
        Vote::Abstain
    }

    /// Whether the job still wants more (preemption helps only starving jobs);
    /// `None`: no opinion.
    fn job_starving(&self, _job: &JobInfo) -> Option<bool> {
        None
    }

    /// Whether the job may be admitted to its queue (enqueue).
    fn job_enqueueable(&self, _state: &SessionState, _job: &JobInfo) -> Vote {
        Vote::Abstain
    }

    /// The job was admitted: count what it reserves.
    fn job_enqueued(&mut self, _state: &SessionState, _job: &JobInfo) {}

    /// Whether the task may be placed in its queue now.
    fn allocatable(
        &self,
        _state: &SessionState,
        _queue: &QueueInfo,
        _task: &TaskInfo,
    ) -> Result<(), Rejection> {
        Ok(())
    }

    /// Whether the queue holds more than its share (allocate skips it).
    fn overused(&self, _state: &SessionState, _queue: &QueueInfo) -> bool {
        false
    }

    /// Whether the queue may take resources from others for the task (reclaim).
    fn preemptive(
        &self,
        _state: &SessionState,
        _queue: &QueueInfo,
        _task: &TaskInfo,
    ) -> Result<(), Rejection> {
        Ok(())
    }

    /// Whether the plugin's predicates and scores only repeat what kube-scheduler
    /// checked before calling `/filter`: they run in the planner, which places
    /// pods before kube-scheduler sees them, and are left out of `/filter`.
    fn planner_only(&self) -> bool {
        false
    }

    /// Whether this plugin has a predicate (lets node choice skip the call).
    fn filters_nodes(&self) -> bool {
        false
    }

    /// Rules a node out for the task.
    fn predicate(&self, _task: &TaskFacts<'_>, _node: &NodeFacts<'_>) -> Result<(), String> {
        Ok(())
    }

    /// Whether this plugin scores nodes (lets node choice skip the call).
    fn scores_nodes(&self) -> bool {
        false
    }

    /// Whether this plugin's node scores can tell nodes apart for this task (a
    /// score that would be the same on every node is skipped, and with it the
    /// cost of judging every node).
    fn scores_task(&self, _task: &TaskFacts<'_>) -> bool {
        true
    }

    /// The node's score for the task (higher is better).
    fn node_order(&self, _task: &TaskFacts<'_>, _node: &NodeFacts<'_>) -> f64 {
        0.0
    }

    /// The weight this plugin gives preferred inter-pod affinity, which node
    /// choice scores over all candidates at once (0: none).
    fn pod_affinity_weight(&self) -> f64 {
        0.0
    }

    /// Scores of the HyperNodes a job with a network-topology constraint could be
    /// placed in (`candidates`, each able to hold it), higher is better: one per
    /// candidate, or none for no opinion.
    fn hyper_node_order(
        &self,
        _state: &SessionState,
        _job: &JobInfo,
        _candidates: &[&str],
    ) -> Vec<f64> {
        Vec::new()
    }

    /// Which of `candidates` the preemptor may evict (same queue); `None`: no
    /// opinion.
    fn preemptable(
        &self,
        _state: &SessionState,
        _preemptor: &TaskInfo,
        _candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        None
    }

    /// Which of `candidates` the reclaimer may evict (other queues); `None`: no
    /// opinion.
    fn reclaimable(
        &self,
        _state: &SessionState,
        _reclaimer: &TaskInfo,
        _candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        None
    }

    /// Which of `candidates` the gang eviction actions may evict (Volcano's
    /// unified evictable hook); `None`: no opinion. Unlike `preemptable` and
    /// `reclaimable`, no `enableXxx` switch turns it off, as in Volcano; and gang
    /// safety is not judged here: those actions evict whole victim bundles.
    fn gang_evictable(
        &self,
        _state: &SessionState,
        _eviction: &GangEviction<'_>,
        _candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        None
    }

    /// For a plugin that groups HyperNodes into gradients for gangs with a hard
    /// network-topology constraint: how many HyperNodes the gang eviction actions
    /// may search room in for one such gang, the widest first. `None`: the plugin
    /// has no gradients, and room is sought in the whole cluster.
    fn eviction_hyper_nodes(&self) -> Option<usize> {
        None
    }

    /// Which queue's tasks go first when victims of queues `a` and `b` could make
    /// room for a preemptor of `preemptor`: `Less` evicts from `a` first.
    fn victim_queue_order(
        &self,
        _state: &SessionState,
        _a: &str,
        _b: &str,
        _preemptor: &str,
    ) -> Ordering {
        Ordering::Equal
    }

    /// Tasks the plugin wants evicted regardless of any preemptor (UIDs); `None`: no
    /// opinion.
    fn victim_tasks(&self, _state: &SessionState) -> Option<Vec<String>> {
        None
    }

    /// A task was placed (or pipelined) in this session.
    fn on_allocate(&mut self, _state: &SessionState, _event: &TaskEvent<'_>) {}

    /// A placement was taken back (a discarded statement, an eviction).
    fn on_deallocate(&mut self, _state: &SessionState, _event: &TaskEvent<'_>) {}

    /// Adds what the plugin derives about a queue to its report.
    fn describe_queue(&self, _state: &SessionState, _queue: &QueueInfo, _report: &mut QueueReport) {
    }

    /// Remarks for operators about how the plugin reads its configuration.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}
