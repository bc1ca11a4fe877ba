//! What a session decided: the placements to commit, the evictions to make, and
//! where every job stands and why.

use super::job::{GangKey, TaskPlacement};
use super::report::QueueReport;
use serde::Serialize;
use std::collections::BTreeMap;

/// One task a committed statement placed.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTask {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Whether it carries our gate (to lift on commit).
    pub gated: bool,
    /// Node and GPUs, for tasks that ask for vGPUs.
    pub placement: Option<TaskPlacement>,
    /// Placed on resources still being freed: it may start only once the victims
    /// are gone.
    pub pipelined: bool,
}

/// A job's tasks placed by one committed statement.
#[derive(Debug, Clone, PartialEq)]
pub struct JobCommit {
    /// The job.
    pub gang: GangKey,
    /// Its queue.
    pub queue: String,
    /// The tasks placed, in decision order.
    pub members: Vec<PlannedTask>,
    /// The tasks evicted to make room for them (preempt, reclaim).
    pub evictions: Vec<Eviction>,
}

/// A task a committed statement evicts.
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its job.
    pub job: GangKey,
    /// Its queue.
    pub queue: String,
    /// The node its GPUs are on, if it holds any.
    pub node: Option<String>,
    /// Its job's service type (`volcano.sh/service-type`), if any.
    pub service_type: Option<String>,
    /// The action that evicts it.
    pub action: EvictAction,
    /// Why (names the preemptor).
    pub reason: String,
}

/// The action behind an eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EvictAction {
    /// Within a queue: a job of higher priority takes the room.
    Preempt,
    /// Across queues: a queue below its deserved share takes back what it lent.
    Reclaim,
    /// `gangpreempt`: as preempt, whole victim bundles for a whole gang at once.
    GangPreempt,
    /// `gangreclaim`: as reclaim, whole victim bundles for a whole gang at once.
    GangReclaim,
}

impl EvictAction {
    /// Every action that evicts.
    pub const ALL: [EvictAction; 4] = [
        EvictAction::Preempt,
        EvictAction::Reclaim,
        EvictAction::GangPreempt,
        EvictAction::GangReclaim,
    ];

    /// The action of this name ([`Self::as_str`]), if any.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// The action's name in the configuration, in events and in metrics, so an
    /// eviction is told apart by the action that chose it.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictAction::Preempt => "preempt",
            EvictAction::Reclaim => "reclaim",
            EvictAction::GangPreempt => "gangpreempt",
            EvictAction::GangReclaim => "gangreclaim",
        }
    }

    /// What happens to the victim (`preempted`, `reclaimed`), the opening of
    /// its reason.
    pub fn verb(self) -> &'static str {
        match self {
            EvictAction::Preempt | EvictAction::GangPreempt => "preempted",
            EvictAction::Reclaim | EvictAction::GangReclaim => "reclaimed",
        }
    }

    /// The opening of the victim's `Evict` event: what happened to it, and by
    /// which action when that is not the plain one the word already names.
    pub fn event_title(self) -> &'static str {
        match self {
            EvictAction::Preempt => "Preempted",
            EvictAction::Reclaim => "Reclaimed",
            EvictAction::GangPreempt => "Preempted by gangpreempt",
            EvictAction::GangReclaim => "Reclaimed by gangreclaim",
        }
    }
}

/// A job's phase, named as Volcano names PodGroup phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GangPhase {
    /// Not admitted by its queue yet.
    Pending,
    /// Admitted, waiting for a place for all of its minimum.
    Inqueue,
    /// At least its minimum is placed or running.
    Running,
    /// Every member finished.
    Completed,
}

impl GangPhase {
    /// The PodGroup `status.phase` value.
    pub fn as_str(self) -> &'static str {
        match self {
            GangPhase::Pending => "Pending",
            GangPhase::Inqueue => "Inqueue",
            GangPhase::Running => "Running",
            GangPhase::Completed => "Completed",
        }
    }
}

/// Where a job stands after the session, and why it waits. `Eq`, so that two
/// shared verdicts compare by address first (the diffs of verdict maps compare
/// every entry of a changed map node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangVerdict {
    /// `namespace/name`.
    pub gang: String,
    /// True for a plain pod (no PodGroup).
    pub single: bool,
    /// Queue.
    pub queue: String,
    /// Phase.
    pub phase: GangPhase,
    /// minMember.
    pub min_member: usize,
    /// Pods that belong to it.
    pub members: usize,
    /// Pods placed (bound, binding, planned) or finished successfully.
    pub ready: usize,
    /// Pods on nodes.
    pub running: usize,
    /// Pods succeeded.
    pub succeeded: usize,
    /// Pods failed.
    pub failed: usize,
    /// Why it waits (Volcano's condition reason), if it does.
    pub reason: Option<&'static str>,
    /// The waiting message, e.g. `2/8 tasks in gang unschedulable: ...`: the
    /// words a waiting member's `/filter` answers with, so shown as kube-scheduler
    /// shows them.
    #[serde(serialize_with = "crate::extender::format_verbs::serialize_optional_text")]
    pub message: Option<String>,
    /// The `apiVersion` of the PodGroup that declared the gang when it is
    /// Kubernetes' own (`scheduling.k8s.io/...`); absent for Volcano's and for
    /// plain pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// `namespace/name` of the Workload a native PodGroup was made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// How a native PodGroup may be disrupted: `Pod` (members one by one) or
    /// `PodGroup` (all together, or none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disruption_mode: Option<String>,
}

/// Every job's verdict by job, in a persistent map: most verdicts stay the
/// same from one cycle to the next, and are shared between cycles rather than
/// copied. Each verdict is shared too: a change to a map whose nodes another
/// cycle still holds copies the entries of every node on its path, and a
/// verdict's names and message would be copied with them.
pub type Verdicts = imbl::OrdMap<GangKey, std::sync::Arc<GangVerdict>>;

/// What a session decided.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SessionOutcome {
    /// Placements to commit (with the evictions that make room for them), in
    /// decision order.
    pub commits: Vec<JobCommit>,
    /// Every job's standing (shared with what the session kept for the next
    /// one: a copy costs nothing, a change copies only its way to the job).
    pub verdicts: Verdicts,
    /// Jobs the enqueue action admitted in this session.
    pub enqueued: Vec<GangKey>,
    /// The queues after the session.
    pub queues: Vec<QueueReport>,
    /// Each node a commit places a task on, with the generation its entry had in
    /// the snapshot: the commit books as planned only where it is unchanged.
    pub node_generations: BTreeMap<String, u64>,
}

impl SessionOutcome {
    /// Every eviction of every commit, in decision order.
    pub fn evictions(&self) -> impl Iterator<Item = &Eviction> {
        self.commits.iter().flat_map(|c| &c.evictions)
    }

    /// Every task placed (or pipelined) by every commit, in decision order.
    pub fn placements(&self) -> impl Iterator<Item = &PlannedTask> {
        self.commits.iter().flat_map(|c| &c.members)
    }
}
