//! The world queueing hints judge blocked jobs against: what could let one in,
//! as the last full cycle saw it when its session opened (see
//! `gang::queueing_hints`). With a thousand nodes and thousands of jobs,
//! copying it whole and comparing it whole every cycle cost more than the rest
//! of the hints; instead it is kept between cycles and each cycle works out only
//! what differs from it: the nodes whose GPUs or figures are not the very ones
//! it holds (the planner shares unchanged node entries and pod lists between
//! cycles), and the jobs that are not the very ones it holds (the planner keeps
//! each job until something of it changes). A cycle's hints then cost what
//! changed, and the world is brought up to date with the same differences once
//! the cycle's plan is committed.

use crate::gang::affine_pods::{
    AffinityChange, PlannedPod, PlannedPods, PodsOnNodes, affinity_change,
};
use crate::ledger::{ChangeJournal, JournalCursor, NodeEntry};
use crate::node_load::NodeResources;
use crate::node_metrics::NodeMetricsBook;
use crate::resources::Resources;
use crate::usage::GpuUsage;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::job_map::Jobs;
use crate::volcano::framework::nodes::SessionNode;
use crate::volcano::framework::{GangKey, JobInfo, QueueInfo, SessionState, TaskStatus};
use foldhash::{HashMap, HashMapExt};
use imbl::OrdMap;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A node's GPUs and its CPU, memory, traits and bound pods.
type NodeFigures = (Arc<NodeEntry>, NodeResources);

/// What could let a blocked job in, as one session opened with it.
#[derive(Clone)]
pub struct World {
    nodes: HashMap<String, NodeFigures>,
    /// Where the journal of the pictures' nodes stood when `nodes` were those
    /// of the picture (see `gang::kept_nodes`): only nodes it names since can
    /// differ.
    nodes_as_of: JournalCursor,
    /// The jobs the world was worked out from (shared with the planner).
    jobs: Jobs,
    /// Where the journal of the kept jobs stood when `jobs` were the kept ones
    /// (see `gang::job_cache`): only gangs it names since can differ.
    jobs_as_of: JournalCursor,
    releasing: BTreeSet<String>,
    planned: PlannedPods,
    /// The tasks the session opened with this world placed.
    placed_by_session: PlannedPods,
    cluster: Cluster,
}

/// What is copied whole every cycle: a handful of queues, quotas and settings.
#[derive(Clone)]
struct Cluster {
    queues: BTreeMap<String, QueueInfo>,
    total: Resources,
    quotas: BTreeMap<String, crate::fit::QuotaHeadroom>,
    resource_quotas: BTreeMap<String, Vec<crate::volcano::resource_quota::NamespaceQuota>>,
    topology: Arc<crate::volcano::topology::NetworkTopology>,
    measured: Arc<NodeMetricsBook>,
    namespaces: Arc<crate::placement::namespace_labels::NamespaceLabels>,
    conf: SchedulerConf,
}

impl Cluster {
    fn of(state: &SessionState, conf: &SchedulerConf) -> Self {
        Self {
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

    /// Whether only room was taken between `self` (earlier) and `now`.
    fn only_took_room(&self, now: &Cluster) -> bool {
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
            && self.queues.len() == now.queues.len()
            && self.queues.iter().all(|(name, before)| {
                now.queues
                    .get(name)
                    .is_some_and(|after| queue_only_took(before, after))
            })
    }
}

/// How a session's state differs from the world: the nodes and jobs that are
/// not the very ones the world holds, with what follows from those jobs.
pub struct WorldChanges {
    /// Changed, added (`Some`) and removed (`None`) nodes.
    nodes: HashMap<String, Option<NodeFigures>>,
    /// Where the journals of the pictures' nodes and of the kept jobs stand now.
    nodes_as_of: JournalCursor,
    jobs_as_of: JournalCursor,
    /// Changed, added (`Some`) and removed (`None`) jobs.
    jobs: Vec<(GangKey, Option<Arc<JobInfo>>)>,
    /// Tasks of those jobs placed on a node now (`Some`), or no longer (`None`).
    planned: BTreeMap<String, Option<PlannedPod>>,
    /// Releasing tasks of those jobs as the world holds them, and now.
    releasing_before: Vec<String>,
    releasing_now: Vec<String>,
    cluster: Cluster,
}

/// What the planner notes as it keeps nodes and jobs from one cycle to the
/// next: which nodes and which jobs it replaced (see `gang::kept_nodes` and
/// `gang::job_cache`). The state a cycle's hints are worked out from is the
/// last picture and the kept jobs these name.
#[derive(Clone, Copy)]
pub struct Journals<'a> {
    pub nodes: &'a ChangeJournal,
    pub jobs: &'a ChangeJournal<GangKey>,
}

/// What a cycle's hints are worked out against: a world kept from an earlier
/// cycle with the changes since, or, when none is kept, a world of its own.
pub enum OpenedWorld {
    Changed(WorldChanges),
    Whole(World),
}

impl World {
    /// The world as `state` shows it, worked out whole.
    pub fn of(state: &SessionState, conf: &SchedulerConf, journals: Journals<'_>) -> Self {
        Self {
            nodes: state
                .nodes
                .iter()
                .map(|n| (n.name.clone(), (n.gpus.clone(), n.resources.clone())))
                .collect(),
            nodes_as_of: journals.nodes.end(),
            jobs: state.jobs.clone(),
            jobs_as_of: journals.jobs.end(),
            releasing: state.jobs.values().flat_map(|j| releasing(j)).collect(),
            planned: PlannedPods::of(state),
            placed_by_session: PlannedPods::default(),
            cluster: Cluster::of(state, conf),
        }
    }

    /// How `state` differs from this world, looking closely only at what is not
    /// shared with it.
    pub fn changes(
        &self,
        state: &SessionState,
        conf: &SchedulerConf,
        journals: Journals<'_>,
    ) -> WorldChanges {
        let mut changes = WorldChanges {
            nodes: HashMap::new(),
            nodes_as_of: journals.nodes.end(),
            jobs_as_of: journals.jobs.end(),
            jobs: Vec::new(),
            planned: BTreeMap::new(),
            releasing_before: Vec::new(),
            releasing_now: Vec::new(),
            cluster: Cluster::of(state, conf),
        };
        match journals.nodes.since(self.nodes_as_of) {
            Some(named) => {
                let named: BTreeSet<&str> = named.map(|name| &**name).collect();
                for name in named {
                    self.compare_node(name, state, &mut changes.nodes);
                }
            }
            None => {
                for node in state.nodes.iter() {
                    self.compare_node(&node.name, state, &mut changes.nodes);
                }
                for name in self.nodes.keys() {
                    if state.nodes.get(name).is_none() {
                        changes.nodes.insert(name.clone(), None);
                    }
                }
            }
        }
        for (key, before, now) in self.changed_jobs(&state.jobs, journals.jobs) {
            if let Some(before) = before {
                changes.releasing_before.extend(releasing(before));
                for (uid, _) in PlannedPods::of_job(before) {
                    changes.planned.insert(uid, None);
                }
            }
            if let Some(now) = now {
                changes.releasing_now.extend(releasing(now));
                for (uid, placed) in PlannedPods::of_job(now) {
                    changes.planned.insert(uid, Some(placed));
                }
            }
            changes.jobs.push((key.clone(), now.cloned()));
        }
        changes
    }

    /// Notes node `name` in `changed` when the state's differs from the world's.
    fn compare_node(
        &self,
        name: &str,
        state: &SessionState,
        changed: &mut HashMap<String, Option<NodeFigures>>,
    ) {
        match (self.nodes.get(name), state.nodes.get(name)) {
            (Some(figures), Some(node)) if same_node(figures, node) => {}
            (_, Some(node)) => {
                changed.insert(
                    node.name.clone(),
                    Some((node.gpus.clone(), node.resources.clone())),
                );
            }
            (Some(_), None) => {
                changed.insert(name.to_string(), None);
            }
            (None, None) => {}
        }
    }

    /// What happened between this world and `changes`, when nothing that could
    /// let a blocked job in happened but pods arriving: `None` when something did.
    pub fn only_filled_up_to(&self, changes: &WorldChanges) -> Option<AffinityChange> {
        if !self.only_took_room(changes) {
            return None;
        }
        let nodes: Vec<&str> = changes.nodes.keys().map(String::as_str).collect();
        let tasks: Vec<&str> = changes.planned.keys().map(String::as_str).collect();
        let now = Overlaid {
            world: self,
            changes,
        };
        match affinity_change(self, &self.placed_by_session, &now, (&nodes, &tasks)) {
            AffinityChange::Other => None,
            change => Some(change),
        }
    }

    /// Whether room was only taken between this world and `changes`.
    fn only_took_room(&self, changes: &WorldChanges) -> bool {
        self.cluster.only_took_room(&changes.cluster)
            && changes
                .releasing_now
                .iter()
                .all(|uid| self.releasing.contains(uid))
            && changes.nodes.iter().all(|(name, now)| match now {
                // A node gone takes room only.
                None => true,
                Some((gpus, resources)) => self.nodes.get(name).is_some_and(|(was_gpus, was)| {
                    node_only_took(was_gpus, gpus) && resources_only_took(was, resources)
                }),
            })
    }

    /// Brings the world up to `changes`; `placed`: the tasks the session opened
    /// with it placed.
    pub fn apply(&mut self, changes: WorldChanges, placed: PlannedPods) {
        self.nodes_as_of = changes.nodes_as_of;
        self.jobs_as_of = changes.jobs_as_of;
        for (name, figures) in changes.nodes {
            match figures {
                Some(figures) => {
                    self.nodes.insert(name, figures);
                }
                None => {
                    self.nodes.remove(&name);
                }
            }
        }
        for (key, job) in changes.jobs {
            match job {
                Some(job) => {
                    self.jobs.insert(key, job);
                }
                None => {
                    self.jobs.remove(&key);
                }
            }
        }
        for (uid, placed) in changes.planned {
            self.planned.set(uid, placed);
        }
        for uid in &changes.releasing_before {
            self.releasing.remove(uid);
        }
        self.releasing.extend(changes.releasing_now);
        self.cluster = changes.cluster;
        self.apply_placed(placed);
    }

    /// The GPUs of every node.
    pub fn node_entries(&self) -> impl Iterator<Item = &NodeEntry> + Clone {
        self.nodes.values().map(|(gpus, _)| &**gpus)
    }

    /// A job as the world holds it.
    pub fn job(&self, key: &GangKey) -> Option<&Arc<JobInfo>> {
        self.jobs.get(key)
    }

    /// Notes the tasks the session opened with this world placed.
    pub fn apply_placed(&mut self, placed: PlannedPods) {
        self.placed_by_session = placed;
    }

    /// Where this world differs from one worked out whole from the same state
    /// (nothing when it is current): how a change missed shows.
    pub fn differences_from(&self, whole: &World) -> Vec<String> {
        let mut differences = Vec::new();
        let nodes_differ = self.nodes.len() != whole.nodes.len()
            || self.nodes.iter().any(|(name, (gpus, resources))| {
                whole
                    .nodes
                    .get(name)
                    .is_none_or(|(g, r)| !Arc::ptr_eq(g, gpus) || r != resources)
            });
        if nodes_differ {
            differences.push("nodes".to_string());
        }
        let jobs_differ = self.jobs.len() != whole.jobs.len()
            || self
                .jobs
                .iter()
                .zip(&whole.jobs)
                .any(|((a, ja), (b, jb))| a != b || !Arc::ptr_eq(ja, jb));
        if jobs_differ {
            differences.push("jobs".to_string());
        }
        if self.releasing != whole.releasing {
            differences.push(format!(
                "releasing tasks: kept {:?}, whole {:?}",
                self.releasing, whole.releasing
            ));
        }
        if !self.planned.same_as(&whole.planned) {
            differences.push("planned tasks".to_string());
        }
        differences
    }
}

impl WorldChanges {
    /// Whether a node's GPUs, figures or pods changed, or a task was placed on
    /// a node or taken off one: room moved somewhere.
    pub fn touch_nodes(&self) -> bool {
        !self.nodes.is_empty() || !self.planned.is_empty()
    }

    /// The jobs that differ from the world: each as it is now, `None` when gone.
    pub fn jobs(&self) -> impl Iterator<Item = (&GangKey, Option<&Arc<JobInfo>>)> {
        self.jobs.iter().map(|(key, job)| (key, job.as_ref()))
    }
}

/// The world as it is in a session's state: the world kept, with the changes
/// since laid over it.
struct Overlaid<'a> {
    world: &'a World,
    changes: &'a WorldChanges,
}

impl PodsOnNodes for World {
    fn planned(&self, uid: &str) -> Option<&PlannedPod> {
        self.planned.get(uid)
    }

    fn node(&self, name: &str) -> Option<&NodeResources> {
        self.nodes.get(name).map(|(_, resources)| resources)
    }
}

impl PodsOnNodes for Overlaid<'_> {
    fn planned(&self, uid: &str) -> Option<&PlannedPod> {
        match self.changes.planned.get(uid) {
            Some(now) => now.as_ref(),
            None => self.world.planned(uid),
        }
    }

    fn node(&self, name: &str) -> Option<&NodeResources> {
        match self.changes.nodes.get(name) {
            Some(now) => now.as_ref().map(|(_, resources)| resources),
            None => self.world.node(name),
        }
    }
}

/// Whether the session's node is the very one the world holds: the same entry
/// and pod list, the same traits and figures.
fn same_node((gpus, resources): &NodeFigures, node: &SessionNode) -> bool {
    Arc::ptr_eq(gpus, &node.gpus)
        && Arc::ptr_eq(&resources.pods, &node.resources.pods)
        && match (&resources.traits, &node.resources.traits) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
        && resources.allocatable == node.resources.allocatable
        && resources.requested == node.resources.requested
}

/// A job that differs between two maps: its key, and the job in each (`None`
/// where it is missing).
type JobDifference<'a> = (
    &'a GangKey,
    Option<&'a Arc<JobInfo>>,
    Option<&'a Arc<JobInfo>>,
);

impl World {
    /// The jobs of `now` that are not the very ones the world holds: those the
    /// journal of kept jobs names since the world's, or, when it no longer
    /// reaches back, those a walk over both finds.
    fn changed_jobs<'a>(
        &'a self,
        now: &'a OrdMap<GangKey, Arc<JobInfo>>,
        journal: &'a ChangeJournal<GangKey>,
    ) -> Vec<JobDifference<'a>> {
        let Some(named) = journal.since(self.jobs_as_of) else {
            return walk_changed_jobs(&self.jobs, now);
        };
        let named: BTreeSet<&GangKey> = named.collect();
        named
            .into_iter()
            .filter_map(|key| {
                let (before, after) = (self.jobs.get(key), now.get(key));
                let same = match (before, after) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                };
                (!same).then_some((key, before, after))
            })
            .collect()
    }
}

/// The jobs of `now` that are not the very ones of `before`, walking both in
/// key order.
fn walk_changed_jobs<'a>(
    before: &'a OrdMap<GangKey, Arc<JobInfo>>,
    now: &'a OrdMap<GangKey, Arc<JobInfo>>,
) -> Vec<JobDifference<'a>> {
    let mut changed = Vec::new();
    let (mut b, mut n) = (before.iter().peekable(), now.iter().peekable());
    loop {
        let order = match (b.peek(), n.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((kb, _)), Some((kn, _))) => kb.cmp(kn),
        };
        match order {
            Ordering::Less => {
                if let Some((key, job)) = b.next() {
                    changed.push((key, Some(job), None));
                }
            }
            Ordering::Greater => {
                if let Some((key, job)) = n.next() {
                    changed.push((key, None, Some(job)));
                }
            }
            Ordering::Equal => {
                if let (Some((key, was)), Some((_, job))) = (b.next(), n.next())
                    && !Arc::ptr_eq(was, job)
                {
                    changed.push((key, Some(was), Some(job)));
                }
            }
        }
    }
    changed
}

/// The job's tasks that are leaving their nodes.
fn releasing(job: &JobInfo) -> impl Iterator<Item = String> + '_ {
    job.tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Releasing)
        .map(|t| t.uid.clone())
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
