//! Jobs and tasks as a session sees them (Volcano's `JobInfo` / `TaskInfo`): a
//! PodGroup (or a plain queue pod, a gang of one) and its member pods, each with
//! what it asks for, what it holds, and where it stands.

use crate::device::model::PodDevices;
use crate::fit::PodContext;
use crate::volcano::resources::Resources;
use crate::volcano::task_topology::TopologyAnnotations;
use crate::volcano::topology::TopologyConstraint;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A gang: a PodGroup, or a plain pod that names a queue (a gang of one).
/// Keys are cloned wherever a persistent map of gangs is changed (a changed
/// entry copies the keys of every node on its path), so the names are shared,
/// not copied.
#[derive(Debug, Clone)]
pub struct GangKey {
    /// Namespace of the PodGroup (or pod).
    pub namespace: Arc<str>,
    /// PodGroup name (or pod name for a gang of one).
    pub name: Arc<str>,
    /// True for a plain pod without a PodGroup.
    pub single: bool,
}

/// Names compared as text, in namespace, name, single order. Keys are mostly
/// clones of one another (a job's key in every persistent map that holds it),
/// so two names that are one shared string compare equal without reading it:
/// the maps compare keys at every lookup, change and difference.
impl Ord for GangKey {
    fn cmp(&self, other: &Self) -> Ordering {
        shared_text_cmp(&self.namespace, &other.namespace)
            .then_with(|| shared_text_cmp(&self.name, &other.name))
            .then_with(|| self.single.cmp(&other.single))
    }
}

impl PartialOrd for GangKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for GangKey {
    fn eq(&self, other: &Self) -> bool {
        self.single == other.single
            && (Arc::ptr_eq(&self.name, &other.name) || self.name == other.name)
            && (Arc::ptr_eq(&self.namespace, &other.namespace) || self.namespace == other.namespace)
    }
}

impl Eq for GangKey {}

/// The text hashed, as the names are compared.
impl std::hash::Hash for GangKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.namespace.hash(state);
        self.name.hash(state);
        self.single.hash(state);
    }
}

/// Two shared strings compared as text; one string shared twice is equal to
/// itself without being read.
fn shared_text_cmp(a: &Arc<str>, b: &Arc<str>) -> Ordering {
    if Arc::ptr_eq(a, b) {
        Ordering::Equal
    } else {
        a.cmp(b)
    }
}

impl GangKey {
    /// Namespace and name as the book keys PodGroups.
    pub fn owned_names(&self) -> (String, String) {
        (self.namespace.to_string(), self.name.to_string())
    }
}

impl fmt::Display for GangKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.single {
            write!(f, "pod {}/{}", self.namespace, self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// Where a task stands (Volcano's task statuses, those an extender can observe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaskStatus {
    /// Waiting for a place.
    Pending,
    /// Holds GPUs: placed by this session, or reserved in the ledger by an earlier
    /// plan or a `/filter`, not yet on a node.
    Allocated,
    /// Placed on resources that are still being freed (by evictions); it starts once
    /// they are gone.
    Pipelined,
    /// On a node (`spec.nodeName` set), not finished.
    Running,
    /// Being evicted: still on its node until its kubelet confirms.
    Releasing,
    /// Finished successfully.
    Succeeded,
    /// Failed.
    Failed,
}

impl TaskStatus {
    /// Whether the task counts toward its gang's minimum now (Volcano's ready
    /// statuses: allocated, binding, bound, running; and succeeded).
    pub fn is_ready(self) -> bool {
        matches!(
            self,
            TaskStatus::Allocated | TaskStatus::Running | TaskStatus::Succeeded
        )
    }

    /// Whether the task holds (or is about to hold) resources its queue is charged
    /// for.
    pub fn holds_resources(self) -> bool {
        matches!(
            self,
            TaskStatus::Allocated
                | TaskStatus::Pipelined
                | TaskStatus::Running
                | TaskStatus::Releasing
        )
    }
}

/// Where a task's GPUs are.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPlacement {
    /// Node name.
    pub node: String,
    /// GPUs per container (init containers first).
    pub devices: PodDevices,
    /// How many entries of `devices` are init containers.
    pub init_count: usize,
}

impl TaskPlacement {
    /// A node and no GPUs: the placement of a task that asks for no vGPU, which
    /// the ledger does not book (it books GPUs) and the pod carries as its pin.
    pub fn without_gpus(&self) -> bool {
        self.devices.is_empty()
    }
}

/// What a task asks of the GPUs.
#[derive(Debug, Clone)]
pub enum GpuAsk {
    /// No vGPU: placed by its requests (CPU, memory, pod slots, extended
    /// resources) and pinned to its node, since kube-scheduler never asks the
    /// extender about it.
    None,
    /// A parsed vGPU request, shared: a task is copied into every session (and
    /// into the queueing hints), its parse is read only.
    Vgpu(Arc<PodContext>),
    /// The request cannot be read; the task can never be placed.
    Invalid(String),
}

impl PartialEq for GpuAsk {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (GpuAsk::None, GpuAsk::None) => true,
            (GpuAsk::Vgpu(a), GpuAsk::Vgpu(b)) => a.uid == b.uid && a.request == b.request,
            (GpuAsk::Invalid(a), GpuAsk::Invalid(b)) => a == b,
            _ => false,
        }
    }
}

/// One member pod of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInfo {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its job.
    pub job: GangKey,
    /// Role inside the job (`volcano.sh/task-spec`).
    pub role: Option<String>,
    /// Priority (higher first).
    pub priority: i32,
    /// Creation time.
    pub created: Option<DateTime<Utc>>,
    /// Where it stands.
    pub status: TaskStatus,
    /// Carries our scheduling gate (the planner lifts it).
    pub gated: bool,
    /// Carries gates of others: it cannot start with its gang.
    pub foreign_gates: bool,
    /// Its CPU and memory requests (milli-units).
    pub requests: Resources,
    /// What its queue is charged for it: CPU and memory requests plus its vGPUs
    /// (what its GPUs take once placed, its request before).
    pub resreq: Resources,
    /// Physical GPUs it holds, per card type (capacity-card).
    pub cards: BTreeMap<String, i64>,
    /// What it asks of the GPUs.
    pub gpu: GpuAsk,
    /// Its GPUs, once placed.
    pub placement: Option<TaskPlacement>,
    /// May be evicted for another (`volcano.sh/preemptable`).
    pub preemptable: bool,
    /// May not evict others (`preemptionPolicy: Never`).
    pub never_preempts: bool,
    /// Protected from eviction this long after it was bound
    /// (`volcano.sh/cooldown-time`).
    pub cooldown: Option<std::time::Duration>,
    /// When it was bound to its node.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Kind of its first owner (`ReplicaSet`, `Job`, ...).
    pub owner_kind: Option<String>,
    /// The pod (metadata trimmed), for plugins that read it.
    pub pod: Arc<Pod>,
}

impl TaskInfo {
    /// Whether the task waits for a place and this session may give it one.
    pub fn is_pending(&self) -> bool {
        self.status == TaskStatus::Pending && !self.foreign_gates
    }

    /// Whether the task asks for nothing at all (Volcano's best-effort tasks, which
    /// backfill places).
    pub fn is_best_effort(&self) -> bool {
        matches!(self.gpu, GpuAsk::None) && self.resreq.is_empty()
    }

    /// Deleted before it was ever given a place: Volcano's Releasing task without
    /// a node. It is on its way out of its gang: it counts neither as ready nor
    /// as valid, asks for and holds nothing, and is never placed.
    pub fn deleted_unplaced(&self) -> bool {
        self.status == TaskStatus::Releasing && self.placement.is_none()
    }

    /// Whether the task holds (or is about to hold) resources its queue is charged
    /// for: [`TaskStatus::holds_resources`], but for a task deleted before it was
    /// placed, which holds none.
    pub fn holds_resources(&self) -> bool {
        self.status.holds_resources() && !self.deleted_unplaced()
    }
}

/// Counts of a job's tasks by standing.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TaskCounts {
    /// Placed, holding GPUs, or finished successfully (not being evicted).
    pub ready: usize,
    /// Not failed and not held back by someone else's gate.
    pub valid: usize,
    /// On nodes.
    pub running: usize,
    /// Finished successfully.
    pub succeeded: usize,
    /// Failed.
    pub failed: usize,
    /// Pipelined onto resources being freed.
    pub pipelined: usize,
    /// `ready` per role.
    pub ready_roles: BTreeMap<String, usize>,
    /// `valid` per role.
    pub valid_roles: BTreeMap<String, usize>,
    /// `pipelined` per role.
    pub pipelined_roles: BTreeMap<String, usize>,
}

/// A job (PodGroup, or a gang of one).
#[derive(Debug, Clone)]
pub struct JobInfo {
    /// The gang.
    pub key: GangKey,
    /// Its queue.
    pub queue: String,
    /// minMember (1 for a gang of one).
    pub min_member: usize,
    /// minTaskMember per role.
    pub min_roles: BTreeMap<String, usize>,
    /// minResources, if stated.
    pub min_resources: Option<Resources>,
    /// Cards its first minMember members state with `volcano.sh/card.request`, as
    /// `card/<name>` dimensions.
    pub card_request: Resources,
    /// Priority (higher first).
    pub priority: i32,
    /// Creation time (the PodGroup's, else its oldest member's).
    pub created: Option<DateTime<Utc>>,
    /// How long it may wait before the `sla` plugin admits it ahead of others
    /// (`volcano.sh/sla-waiting-time` / `sla-waiting-time` on its PodGroup; for a
    /// gang of one, on its pod).
    pub waiting_time: Option<std::time::Duration>,
    /// Its PodGroup does not exist (yet).
    pub group_missing: bool,
    /// `volcano.sh/service.type` of its PodGroup (or, for a gang of one, its pod).
    pub service_type: Option<String>,
    /// Its PodGroup's task-topology annotations, when it has any (the
    /// `task-topology` plugin reads them).
    pub task_topology: Option<TopologyAnnotations>,
    /// Admitted by enqueue (in this session or an earlier one).
    pub inqueue: bool,
    /// How far apart on the network its members may be (`spec.networkTopology`).
    pub network_topology: Option<TopologyConstraint>,
    /// Its members may only be disrupted together (a native PodGroup's
    /// `disruptionMode: PodGroup`, v1beta1 `{all: {}}`): preemption and reclaim
    /// evict all of its running members or none, even where it would keep its
    /// minimum without some of them.
    pub disrupted_whole: bool,
    /// Its PodGroup lets its members be evicted by the gang eviction actions:
    /// false only when the PodGroup says `volcano.sh/preemptable: "false"`, as
    /// Volcano reads an unset value there as allowed.
    pub group_preemptable: bool,
    /// Tasks in a stable order (priority, age, name).
    pub tasks: Vec<TaskInfo>,
    /// What the tasks holding resources are charged, summed.
    pub allocated: Resources,
}

/// Field by field, except that a job is equal to itself without looking: the
/// difference between two maps of jobs that share most of their nodes (see
/// `UnsettledJobs`) compares every job of a node that changed with itself,
/// and comparing a job field by field compares each member's whole pod.
impl PartialEq for JobInfo {
    fn eq(&self, other: &Self) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        // Taken apart whole, so that a field added is compared too.
        let Self {
            key,
            queue,
            min_member,
            min_roles,
            min_resources,
            card_request,
            priority,
            created,
            waiting_time,
            group_missing,
            service_type,
            task_topology,
            inqueue,
            network_topology,
            disrupted_whole,
            group_preemptable,
            tasks,
            allocated,
        } = self;
        *key == other.key
            && *queue == other.queue
            && *min_member == other.min_member
            && *min_roles == other.min_roles
            && *min_resources == other.min_resources
            && *card_request == other.card_request
            && *priority == other.priority
            && *created == other.created
            && *waiting_time == other.waiting_time
            && *group_missing == other.group_missing
            && *service_type == other.service_type
            && *task_topology == other.task_topology
            && *inqueue == other.inqueue
            && *network_topology == other.network_topology
            && *disrupted_whole == other.disrupted_whole
            && *group_preemptable == other.group_preemptable
            && *tasks == other.tasks
            && *allocated == other.allocated
    }
}

/// A job equals itself (no figure of it is a float that could be NaN). Said
/// so, two `Arc`s of the same job compare equal without comparing every task
/// and pod: the planner's job maps are compared whole each cycle (to follow
/// only what changed), and most of their entries are the same `Arc`.
impl Eq for JobInfo {}

impl JobInfo {
    /// The job's own figures without its tasks, at the cost of those figures
    /// alone (the queueing hints keep every waiting job's figures each cycle).
    pub fn without_tasks(&self) -> JobInfo {
        JobInfo {
            key: self.key.clone(),
            queue: self.queue.clone(),
            min_member: self.min_member,
            min_roles: self.min_roles.clone(),
            min_resources: self.min_resources.clone(),
            card_request: self.card_request.clone(),
            priority: self.priority,
            created: self.created,
            waiting_time: self.waiting_time,
            group_missing: self.group_missing,
            service_type: self.service_type.clone(),
            task_topology: self.task_topology.clone(),
            inqueue: self.inqueue,
            network_topology: self.network_topology.clone(),
            disrupted_whole: self.disrupted_whole,
            group_preemptable: self.group_preemptable,
            tasks: Vec::new(),
            allocated: self.allocated.clone(),
        }
    }

    /// Counts of the tasks by standing.
    pub fn counts(&self) -> TaskCounts {
        let mut c = TaskCounts::default();
        for t in self.tasks.iter().filter(|t| !t.deleted_unplaced()) {
            let role = t.role.clone().unwrap_or_default();
            match t.status {
                TaskStatus::Failed => {
                    c.failed += 1;
                    continue;
                }
                TaskStatus::Succeeded => c.succeeded += 1,
                TaskStatus::Running | TaskStatus::Releasing => c.running += 1,
                _ => {}
            }
            if t.foreign_gates && t.status == TaskStatus::Pending {
                continue;
            }
            c.valid += 1;
            *c.valid_roles.entry(role.clone()).or_default() += 1;
            if t.status == TaskStatus::Pipelined {
                c.pipelined += 1;
                *c.pipelined_roles.entry(role.clone()).or_default() += 1;
            }
            // A member being evicted is on its way out: counting it would let the
            // gang's waiting members start on other room while it terminates, and
            // run below minMember once it is gone.
            if t.status.is_ready() {
                c.ready += 1;
                *c.ready_roles.entry(role).or_default() += 1;
            }
        }
        c
    }

    /// Whether the job reached its minimum: minMember ready, and every role's
    /// minimum (skipped, as Volcano skips it, when minMember is below the sum of the
    /// role minimums).
    pub fn reaches_minimum(&self, ready: usize, ready_roles: &BTreeMap<String, usize>) -> bool {
        let role_sum: usize = self.min_roles.values().sum();
        ready >= self.min_member
            && (self.min_member < role_sum
                || self
                    .min_roles
                    .iter()
                    .all(|(role, min)| ready_roles.get(role).copied().unwrap_or(0) >= *min))
    }

    /// Whether the job holds its minimum now. Job order asks this of both jobs
    /// at every comparison, so a job without role minimums is answered by a count
    /// alone (the same answer [`Self::counts`] gives, without its maps).
    pub fn is_ready(&self) -> bool {
        if self.min_roles.is_empty() {
            let ready = self.tasks.iter().filter(|t| t.status.is_ready()).count();
            return ready >= self.min_member;
        }
        let c = self.counts();
        self.reaches_minimum(c.ready, &c.ready_roles)
    }

    /// How many tasks count towards the job's minimum at all (not failed, not
    /// held back by someone else's gate): [`Self::counts`]'s `valid`, without
    /// its maps.
    pub fn valid_count(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| {
                t.status != TaskStatus::Failed
                    && !(t.foreign_gates && t.status == TaskStatus::Pending)
            })
            .count()
    }

    /// Whether every task finished successfully.
    pub fn is_completed(&self) -> bool {
        !self.tasks.is_empty() && self.tasks.iter().all(|t| t.status == TaskStatus::Succeeded)
    }

    /// What admission checks against the queue: minResources, or for a gang of one
    /// its own request; `None` for a PodGroup without minResources (admitted at once,
    /// the allocate simulation being the real check).
    pub fn min_request(&self) -> Option<Resources> {
        match (&self.min_resources, self.key.single) {
            (Some(min), _) => Some(min.clone()),
            (None, true) => {
                let mut r = Resources::default();
                for t in self.tasks.iter().take(self.min_member.max(1)) {
                    r.add(&t.resreq);
                }
                Some(r)
            }
            (None, false) => None,
        }
    }

    /// The nodes of the tasks holding resources (placed, pipelined, running,
    /// being evicted), one per task.
    pub fn placed_nodes(&self) -> impl Iterator<Item = &str> {
        self.tasks
            .iter()
            .filter(|t| t.holds_resources())
            .filter_map(|t| t.placement.as_ref().map(|p| p.node.as_str()))
    }

    /// Position of a task by UID.
    pub fn task_index(&self, uid: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.uid == uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(namespace: &str, name: &str, single: bool) -> GangKey {
        GangKey {
            namespace: namespace.into(),
            name: name.into(),
            single,
        }
    }

    proptest! {
        /// Keys order and compare as their text does, whether their names are
        /// one shared string or two equal ones.
        #[test]
        fn keys_order_as_their_names(
            a in ("[ab]{0,2}", "[ab]{0,2}", any::<bool>()),
            b in ("[ab]{0,2}", "[ab]{0,2}", any::<bool>()),
            share in any::<bool>(),
        ) {
            let x = key(&a.0, &a.1, a.2);
            let mut y = key(&b.0, &b.1, b.2);
            if share && a.0 == b.0 {
                y.namespace = Arc::clone(&x.namespace);
            }
            if share && a.1 == b.1 {
                y.name = Arc::clone(&x.name);
            }
            let text = (a.0.as_str(), a.1.as_str(), a.2).cmp(&(b.0.as_str(), b.1.as_str(), b.2));
            prop_assert_eq!(x.cmp(&y), text);
            prop_assert_eq!(x == y, text == Ordering::Equal);
            prop_assert_eq!(y.cmp(&x), text.reverse());
        }
    }
}
