//! Queueing hints, as kube-scheduler calls them: a job allocate tried and could
//! not place is not tried again until something changed that could let it in.
//! With thousands of gangs waiting on a full cluster, trying each of them in every
//! cycle is what a cycle costs; with hints, a cycle tries the jobs that changed and
//! those something was freed for.
//!
//! What could let a blocked job in, and so wakes every blocked job:
//! - room appearing: a GPU whose usage went down on any dimension, a node whose
//!   pods' CPU or memory requests went down, a node added, or one whose
//!   registration, cordons, labels, taints or allocatable changed;
//! - a pod starting to leave (its room may be pipelined onto);
//! - any queue's figures other than what it holds growing (deserved shares move
//!   with every queue's request, weight and capacity; less held opens a queue);
//! - namespace quotas, ResourceQuotas, HyperNodes, node metrics, namespaces'
//!   labels, the configuration, or the cluster's total changing.
//!
//! A pod arriving on a node (bound there, or planned there) wakes the blocked
//! jobs that follow pods through required pod affinity: it may be the pod they
//! wait for. A pod leaving a node, or one on a node whose labels change, wakes
//! every blocked job: it may have repelled one (`gang::affine_pods`).
//!
//! A job's own change (any of its pods, its PodGroup, its priority, its admission)
//! wakes that job. Room only taken since it failed (other jobs placed, pods bound)
//! cannot let it in: allocate fills a gang member by member on the room left when
//! its turn comes, and that room only shrinks while nothing above happens. A cycle
//! whose plan was overtaken at commit forgets every hint: the room jobs saw at
//! their turn is then not what the ledger shows.
//!
//! Skipping is invisible in decisions: a skipped job is noted with the message it
//! waited with, and a differential test compares plans with hints to plans of
//! sessions that try everything.

use crate::gang::affine_pods::{
    AffinePods, AffinityChange, PlannedPods, affinity_change, follows_pods,
};
use crate::ledger::NodeEntry;
use crate::node_load::NodeResources;
use crate::node_metrics::NodeMetricsBook;
use crate::resources::Resources;
use crate::usage::GpuUsage;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::allocate_hints::AllocateHints;
use crate::volcano::framework::{GangKey, JobInfo, QueueInfo, SessionState, TaskStatus};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Blocked jobs and the world they were blocked in, kept between cycles.
#[derive(Default)]
pub struct QueueingHints {
    /// The world as the last full cycle saw it when it opened.
    world: Option<World>,
    /// Jobs allocate could not place, with what they were when it tried.
    blocked: BTreeMap<GangKey, Blocked>,
    /// A full cycle planned and not yet committed: what to remember once its
    /// commit shows whether the ledger holds what its session decided.
    planned: Option<(
        Opened,
        AllocateHints,
        BTreeMap<GangKey, String>,
        PlannedPods,
    )>,
}

/// A blocked job: what it was when allocate failed it, and why it waited.
struct Blocked {
    job: JobMark,
    message: String,
}

/// What a job was: the job itself, shared with the planner's kept jobs (a job
/// that did not change between cycles is the very same one).
struct JobMark {
    job: Arc<JobInfo>,
    /// Whether a task waits for other pods through required pod affinity.
    follows_pods: bool,
}

impl JobMark {
    fn of(job: &Arc<JobInfo>) -> Self {
        Self {
            job: job.clone(),
            follows_pods: follows_pods(job.tasks.iter().map(|t| &*t.pod)),
        }
    }

    /// Everything allocate reads of the job but its tasks. Allocate tries only
    /// admitted jobs, whether they were admitted before the session or by its
    /// enqueue: being admitted since changes nothing for it.
    fn bare(&self) -> JobInfo {
        let mut bare = self.job.without_tasks();
        bare.inqueue = true;
        bare
    }
}

impl PartialEq for JobMark {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.job, &other.job);
        // Tasks by identity: UID, the pod version (kept alive, so compared by
        // address), status, gate, priority.
        Arc::ptr_eq(a, b)
            || (self.bare() == other.bare()
                && a.tasks.len() == b.tasks.len()
                && a.tasks.iter().zip(&b.tasks).all(|(a, b)| {
                    a.uid == b.uid
                        && Arc::ptr_eq(&a.pod, &b.pod)
                        && a.status == b.status
                        && a.gated == b.gated
                        && a.priority == b.priority
                }))
    }
}

/// What could let a blocked job in, as one session opened with it.
struct World {
    nodes: HashMap<String, (Arc<NodeEntry>, NodeResources)>,
    releasing: BTreeSet<String>,
    planned: PlannedPods,
    /// The tasks the session opened with this world placed.
    placed_by_session: PlannedPods,
    queues: BTreeMap<String, QueueInfo>,
    total: Resources,
    quotas: BTreeMap<String, crate::fit::QuotaHeadroom>,
    resource_quotas: BTreeMap<String, Vec<crate::volcano::resource_quota::NamespaceQuota>>,
    topology: Arc<crate::volcano::topology::NetworkTopology>,
    measured: Arc<NodeMetricsBook>,
    namespaces: Arc<crate::placement::namespace_labels::NamespaceLabels>,
    conf: SchedulerConf,
}

impl World {
    fn of(state: &SessionState, conf: &SchedulerConf) -> Self {
        Self {
            nodes: state
                .nodes
                .iter()
                .map(|n| (n.name.clone(), (n.gpus.clone(), n.resources.clone())))
                .collect(),
            releasing: state
                .jobs
                .values()
                .flat_map(|j| &j.tasks)
                .filter(|t| t.status == TaskStatus::Releasing)
                .map(|t| t.uid.clone())
                .collect(),
            planned: PlannedPods::of(state),
            placed_by_session: PlannedPods::default(),
            queues: state.queues.clone(),
            total: state.total.clone(),
            quotas: state.nodes.quotas().clone(),
            resource_quotas: state.resource_quotas.clone(),
            topology: state.topology.clone(),
            measured: state.nodes.measured().clone(),
            namespaces: state.nodes.namespaces().clone(),
            conf: conf.clone(),
        }
    }

    /// What happened between `self` (earlier) and `now` on the nodes' pods,
    /// when nothing else that could let a blocked job in happened: `None` when
    /// something did.
    fn only_filled_up_to(&self, now: &World) -> Option<AffinityChange> {
        if !self.only_took_room(now) {
            return None;
        }
        match affinity_change(&self.pods(), &self.placed_by_session, &now.pods()) {
            AffinityChange::Other => None,
            change => Some(change),
        }
    }

    /// The pods on nodes, as affinity sees them.
    fn pods(&self) -> AffinePods<'_> {
        AffinePods {
            bound: &self.nodes,
            planned: &self.planned,
        }
    }

    /// Whether room was only taken between `self` (earlier) and `now`.
    fn only_took_room(&self, now: &World) -> bool {
        // Measured usage is judged against the clock (samples go stale), which no
        // comparison of two pictures can follow.
        self.measured.is_empty()
            && now.measured.is_empty()
            && self.total == now.total
            && self.quotas == now.quotas
            && self.resource_quotas == now.resource_quotas
            && self.topology == now.topology
            && self.namespaces == now.namespaces
            && self.conf == now.conf
            && now.releasing.is_subset(&self.releasing)
            && self.queues.len() == now.queues.len()
            && self.queues.iter().all(|(name, before)| {
                now.queues
                    .get(name)
                    .is_some_and(|after| queue_only_took(before, after))
            })
            && now.nodes.iter().all(|(name, (gpus, resources))| {
                self.nodes.get(name).is_some_and(|(was_gpus, was)| {
                    node_only_took(was_gpus, gpus) && resources_only_took(was, resources)
                })
            })
    }
}

/// The queue's figures are the same but for more held.
fn queue_only_took(before: &QueueInfo, after: &QueueInfo) -> bool {
    before.spec == after.spec
        && before.request == after.request
        && before.inqueue == after.inqueue
        && before.elastic == after.elastic
        && no_less(&before.allocated, &after.allocated)
        && before
            .cards
            .iter()
            .all(|(card, n)| after.cards.get(card).is_some_and(|m| m >= n))
}

/// Every dimension of `before` is at least as large in `after`.
fn no_less(before: &Resources, after: &Resources) -> bool {
    before.iter().all(|(dim, value)| after.get(dim) >= value)
}

/// The node's GPUs are the same devices with no less used on any.
fn node_only_took(before: &Arc<NodeEntry>, after: &Arc<NodeEntry>) -> bool {
    if Arc::ptr_eq(before, after) {
        return true;
    }
    before.devices == after.devices
        && before.unusable_reason == after.unusable_reason
        && before.registration_error == after.registration_error
        && before.cordoned == after.cordoned
        && usage_only_grew(&before.effective, &after.effective)
        && usage_only_grew(&before.usage, &after.usage)
}

fn usage_only_grew(before: &[GpuUsage], after: &[GpuUsage]) -> bool {
    before.len() == after.len()
        && before.iter().zip(after).all(|(b, a)| {
            a.used >= b.used
                && a.usedmem >= b.usedmem
                && a.usedcores >= b.usedcores
                && a.mig == b.mig
        })
}

/// The node's CPU and memory are the same but for more requested.
fn resources_only_took(before: &NodeResources, after: &NodeResources) -> bool {
    before.allocatable == after.allocatable
        && before.traits == after.traits
        && no_less(&before.requested, &after.requested)
}

/// What a cycle's hints were worked out from, to remember after its session.
pub struct Opened {
    world: World,
    /// Jobs allocate may try whose tasks all wait, as they were.
    candidates: BTreeMap<GangKey, JobMark>,
}

impl QueueingHints {
    /// The jobs of `state` allocate may skip (blocked before, unchanged since,
    /// and nothing happened since that could let them in), and what to remember
    /// after the session.
    pub fn open(&mut self, state: &SessionState, conf: &SchedulerConf) -> (AllocateHints, Opened) {
        let world = World::of(state, conf);
        match self
            .world
            .as_ref()
            .and_then(|before| before.only_filled_up_to(&world))
        {
            None => self.blocked.clear(),
            Some(AffinityChange::Added) => self.blocked.retain(|_, b| !b.job.follows_pods),
            Some(_) => {}
        }
        let mut hints = AllocateHints::default();
        let mut candidates = BTreeMap::new();
        for (key, job) in &state.jobs {
            // Only jobs none of whose tasks holds anything: what allocate does
            // for them depends on nothing of their own but what the mark keeps.
            if job.tasks.is_empty() || job.tasks.iter().any(|t| t.status != TaskStatus::Pending) {
                continue;
            }
            // The very job it was blocked as (kept between cycles): nothing of
            // it to compare.
            if let Some(blocked) = self.blocked.get(key)
                && Arc::ptr_eq(&blocked.job.job, job)
            {
                hints.skip.insert(key.clone(), blocked.message.clone());
                continue;
            }
            let mark = JobMark::of(job);
            match self.blocked.get(key) {
                Some(blocked) if blocked.job == mark => {
                    hints.skip.insert(key.clone(), blocked.message.clone());
                }
                _ => {
                    candidates.insert(key.clone(), mark);
                }
            }
        }
        (hints, Opened { world, candidates })
    }

    /// A full cycle's session is done: what it opened with, what allocate
    /// skipped, the jobs allocate tried and could not place, and the tasks it
    /// placed.
    pub fn planned(
        &mut self,
        opened: Opened,
        skipped: AllocateHints,
        unplaced: BTreeMap<GangKey, String>,
        placed: PlannedPods,
    ) {
        self.planned = Some((opened, skipped, unplaced, placed));
    }

    /// The cycle's plan is committed: its hints are kept when every commit was
    /// booked as planned, and all are forgotten otherwise.
    pub fn committed(&mut self, all_booked: bool) {
        match self.planned.take() {
            Some((opened, skipped, unplaced, placed)) if all_booked => {
                self.remember(opened, &skipped, unplaced, placed)
            }
            _ if all_booked => {}
            _ => self.forget(),
        }
    }

    /// Remembers a full cycle: the world it opened with and the tasks it placed,
    /// and the jobs still blocked after it (those allocate skipped, and those it
    /// tried and could not place).
    fn remember(
        &mut self,
        opened: Opened,
        skipped: &AllocateHints,
        unplaced: BTreeMap<GangKey, String>,
        placed: PlannedPods,
    ) {
        let Opened {
            mut world,
            mut candidates,
        } = opened;
        world.placed_by_session = placed;
        let mut blocked = std::mem::take(&mut self.blocked);
        blocked.retain(|key, _| skipped.skip.contains_key(key));
        for (key, message) in unplaced {
            if let Some(job) = candidates.remove(&key) {
                blocked.insert(key, Blocked { job, message });
            }
        }
        self.world = Some(world);
        self.blocked = blocked;
    }

    /// Forgets every hint (a commit was overtaken: what jobs saw at their turn
    /// is not what the ledger holds).
    fn forget(&mut self) {
        self.world = None;
        self.blocked.clear();
    }
}
