//! Builds the state a planning session works on from the gang book (members,
//! PodGroups, Queues) and a moment's look at the ledger (GPU usage, who holds what,
//! node CPU and memory, namespace quotas). The ledger is read only while the
//! picture is taken (node entries are shared, not copied); everything else (pod
//! parses, charges, queue figures) is built after, and the session then plans
//! without holding anything.

use super::book::{GangBook, Member, MemberPhase};
use super::job_cache::{JobCache, JobInputs, SharedJobInputs};
use super::kept_holdings::KeptHoldings;
use super::kept_nodes::KeptNodes;
use super::memberless_group::{memberless_job, reaches_session};
use super::membership::DEFAULT_QUEUE;
use super::node_sums::NodeSums;
use super::planner_book::PlannerBook;
use super::queue_totals::QueueTotals;
use super::task_cache::{TaskCache, TaskInputs};
use crate::fit::{PodContext, QuotaHeadroom};
use crate::ledger::Ledger;
use crate::node_metrics::NodeMetricsBook;
use crate::resources::{Resources, VgpuDims};
use crate::volcano::card_quota::{card_request, card_request_resources};
use crate::volcano::conf::{Action, SchedulerConf};
use crate::volcano::framework::charge::{placement_charge, request_charge};
use crate::volcano::framework::job::{GpuAsk, TaskPlacement};
use crate::volcano::framework::nodes::{NodeSet, SessionNode, SharedNodes};
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::score_order::ScoreOrder;
use crate::volcano::framework::shared_namespaces::shared_namespace;
use crate::volcano::framework::{GangKey, JobInfo, SessionState, TaskInfo, TaskStatus};
use crate::volcano::objects::{PodGroupSpec, QueueSpec};
use crate::volcano::resource_quota::NamespaceQuota;
use crate::volcano::task_topology::TopologyAnnotations;
use crate::volcano::topology::NetworkTopology;
use crate::volcano::waiting_time::waiting_time;
use chrono::{DateTime, Utc};
use foldhash::{HashMap, HashMapExt, HashSet};
use k8s_openapi::api::core::v1::Pod;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Parses a pod's vGPU request (`None`: the pod asks for no vGPU).
pub type ParsePod<'a> = &'a dyn Fn(&Pod) -> Result<Option<PodContext>, String>;

/// What the picture is taken of, besides the ledger.
pub struct SnapshotInput<'a> {
    /// Members, PodGroups, Queues.
    pub book: &'a GangBook,
    /// Actions and plugins in force.
    pub conf: &'a SchedulerConf,
    /// vGPU resource names.
    pub dims: &'a VgpuDims,
    /// Jobs admitted by enqueue in earlier cycles and not yet placed.
    pub inqueue: &'a BTreeSet<GangKey>,
    /// Plan only this job (and its ungated members).
    pub only: Option<&'a GangKey>,
    /// The vGPU parse.
    pub parse: ParsePod<'a>,
    /// Now, for plugins that count time.
    pub now: DateTime<Utc>,
}

/// What a session needs of the ledger, copied (node entries shared) while the
/// ledger is read-locked: as little as possible, so `/filter` waits for nothing.
/// What the ledger holds for each member is kept between cycles
/// ([`KeptHoldings`]) and brought up to date while the picture is taken.
pub struct LedgerPicture {
    /// Sorted by name; shared with the nodes kept between cycles.
    nodes: SharedNodes,
    /// Their positions by name.
    index: Arc<FxHashMap<String, usize>>,
    /// What the session reads of all of them together.
    sums: NodeSums,
    /// Those that can take a GPU, in score order.
    order: Arc<ScoreOrder>,
    quotas: BTreeMap<String, QuotaHeadroom>,
    allocatable: Resources,
    /// Every node's measured usage (shared with the ledger, not copied).
    measured: Arc<NodeMetricsBook>,
    /// Every namespace's labels (shared with the ledger, not copied).
    namespaces: Arc<crate::placement::namespace_labels::NamespaceLabels>,
}

impl LedgerPicture {
    /// Takes the picture (call with the ledger locked for reading) and brings
    /// `holdings` and `kept_nodes` up to it (`changed`: the members the book
    /// changed since they were last brought up, `None` for all). Returns the
    /// members whose holding changed, `None` when every member was looked at
    /// again.
    pub fn take(
        ledger: &Ledger,
        book: &GangBook,
        (holdings, kept_nodes): (&mut KeptHoldings, &mut KeptNodes),
        changed: Option<&HashSet<String>>,
    ) -> (Self, Option<HashSet<String>>) {
        let names = kept_nodes.names_if_changed(ledger);
        let moved = holdings.refresh(ledger, book, names.clone(), changed);
        let planned_moved = holdings.take_planned_moved();
        let (nodes, index) = kept_nodes.refresh(
            ledger,
            holdings,
            names.as_ref(),
            moved.is_some().then_some(&planned_moved),
        );
        let quotas = ledger
            .quota_report()
            .into_iter()
            .map(|(ns, _, _)| {
                let headroom = ledger.quota_headroom(&ns);
                (ns, headroom)
            })
            .collect();
        let picture = Self {
            nodes,
            index,
            sums: kept_nodes.sums().clone(),
            order: kept_nodes.score_order().clone(),
            quotas,
            allocatable: ledger.load().total_allocatable().clone(),
            measured: ledger.load().measured().clone(),
            namespaces: ledger.load().namespaces().clone(),
        };
        (picture, moved)
    }

    /// The nodes, sorted by name.
    pub fn nodes(&self) -> &[Arc<SessionNode>] {
        &self.nodes
    }

    /// The largest card of any usable node.
    pub fn largest_card(&self) -> u64 {
        self.sums.largest_card()
    }
}

/// The session state over a picture of the ledger, every task and job built anew
/// (`holdings`: brought up to the picture when it was taken).
pub fn build_state(
    input: &SnapshotInput<'_>,
    picture: LedgerPicture,
    holdings: &KeptHoldings,
) -> SessionState {
    build_state_with(
        input,
        picture,
        Kept {
            holdings,
            tasks: &mut TaskCache::default(),
            jobs: &mut JobCache::default(),
            changed: None,
        },
    )
}

/// What a session state is built from besides the book and the picture.
pub struct Kept<'a> {
    /// What the ledger holds for each member, brought up to the picture.
    pub holdings: &'a KeptHoldings,
    /// Members' tasks kept from earlier cycles.
    pub tasks: &'a mut TaskCache,
    /// Jobs kept from earlier cycles (opened for this cycle).
    pub jobs: &'a mut JobCache,
    /// The only gangs whose job may differ from the one kept, with the book's
    /// copy that indexes their members; `None`: any gang's may.
    pub changed: Option<(&'a HashSet<GangKey>, &'a PlannerBook)>,
}

/// The session state over a picture of the ledger, with the tasks of members and
/// the jobs of gangs that did not change since the last cycle taken from the
/// kept ones.
pub fn build_state_with(
    input: &SnapshotInput<'_>,
    picture: LedgerPicture,
    kept: Kept<'_>,
) -> SessionState {
    // The cluster's pod slots count as Volcano's session total counts them:
    // proportion shares them out (see `volcano::plugins::pod_charge`).
    let mut total = Resources::default();
    for dim in ["cpu", "memory", crate::placement::resource_fit::POD_COUNT] {
        if picture.allocatable.contains(dim) {
            total.set(dim, picture.allocatable.get(dim));
        }
    }
    total.add(&picture.sums.vgpu_total(input.dims));
    let largest_card = picture.largest_card();
    let across = picture.sums.across();
    let node_set = NodeSet::shared_knowing(picture.nodes, picture.index, picture.quotas, across)
        .with_measured(picture.measured, input.now)
        .with_namespaces(picture.namespaces)
        .with_score_order(picture.order);
    let topology = Arc::new(resolve_topology(input.book, &node_set));

    let kept_jobs = assemble_jobs(input, (&node_set, largest_card), kept);
    let jobs = kept_jobs.jobs();
    let queues = queue_infos(input.book, kept_jobs.totals());
    SessionState {
        jobs,
        queues,
        nodes: node_set,
        total,
        dims: input.dims.clone(),
        now: input.now,
        only: input.only.cloned(),
        budgets: input.book.budgets.values().cloned().collect(),
        resource_quotas: resource_quotas(input.book),
        topology,
    }
}

/// What every job is built with besides its own members and PodGroup (when it
/// changes, every job is built again).
pub fn shared_job_inputs(book: &GangBook, conf: &SchedulerConf) -> SharedJobInputs {
    SharedJobInputs {
        priority_classes: book.priority_classes.clone(),
        enqueue_on: conf.has_action(Action::Enqueue),
    }
}

/// A job that holds or may already start what its minimum needs, or any job when
/// enqueue does not run, counts as admitted.
fn admit_if_ready(job: &mut JobInfo, enqueue_on: bool) {
    let c = job.counts();
    job.inqueue |= c.ready > 0 || job.reaches_minimum(c.ready, &c.ready_roles) || !enqueue_on;
}

/// Brings the job cache up to date and returns it: the jobs of the gangs
/// `kept.changed` names (of every gang without it) checked against the caches,
/// the others kept as they are.
fn assemble_jobs<'a>(
    input: &SnapshotInput<'_>,
    (nodes, largest_card): (&NodeSet, u64),
    kept: Kept<'a>,
) -> &'a JobCache {
    let Kept {
        holdings,
        tasks,
        jobs,
        changed,
    } = kept;
    let mut gang = GangJob {
        input,
        holdings,
        nodes,
        largest_card,
        tasks,
        jobs: &mut *jobs,
    };
    match changed {
        Some((gangs, copy)) => {
            for key in gangs {
                let members = copy.members_of(key);
                if !members.is_empty() {
                    gang.job(key, &members);
                } else if !gang.memberless(key) {
                    gang.jobs.forget(key);
                }
            }
        }
        None => {
            let mut by_gang: HashMap<&GangKey, Vec<&Member>> = HashMap::new();
            for m in input.book.members().values() {
                by_gang.entry(&m.gang).or_default().push(m);
            }
            for group in input.book.groups().values() {
                let key = GangKey {
                    namespace: shared_namespace(&group.namespace),
                    name: group.name.as_str().into(),
                    single: false,
                };
                if !by_gang.contains_key(&key) {
                    gang.memberless(&key);
                }
            }
            for (key, mut members) in by_gang {
                members.sort_by(|a, b| super::book::member_order(a, b));
                gang.job(key, &members);
            }
            gang.tasks.forget_unasked();
            gang.jobs.forget_unasked();
        }
    }
    jobs
}

/// Builds or takes from the caches one gang's job.
struct GangJob<'a, 'b> {
    input: &'a SnapshotInput<'b>,
    holdings: &'a KeptHoldings,
    nodes: &'a NodeSet,
    largest_card: u64,
    tasks: &'a mut TaskCache,
    jobs: &'a mut JobCache,
}

impl GangJob<'_, '_> {
    /// Builds or takes from the cache the job of a gang without members, when
    /// its PodGroup reaches the session (`gang::memberless_group`); false when
    /// it has none that does.
    fn memberless(&mut self, key: &GangKey) -> bool {
        let book = self.input.book;
        let Some(group) = (!key.single)
            .then(|| book.groups().get(&key.owned_names()))
            .flatten()
            .filter(|g| reaches_session(g))
        else {
            return false;
        };
        let enqueue_on = self.input.conf.has_action(Action::Enqueue);
        let inqueue = self.input.inqueue.contains(key);
        let inputs = JobInputs {
            tasks: Vec::new(),
            group: Some(group),
            inqueue,
        };
        self.jobs.job(key, inputs, |_| {
            let priority = job_priority(book, Some(group), &[]);
            let mut job = memberless_job(book, group, inqueue, priority);
            admit_if_ready(&mut job, enqueue_on);
            job
        });
        true
    }

    fn job(&mut self, key: &GangKey, members: &[&Member]) {
        let (input, nodes, largest_card) = (self.input, self.nodes, self.largest_card);
        let book = input.book;
        let enqueue_on = input.conf.has_action(Action::Enqueue);
        let group = (!key.single)
            .then(|| book.groups().get(&key.owned_names()))
            .flatten();
        let tasks: Vec<Arc<TaskInfo>> = members
            .iter()
            .map(|m| {
                let held = self.holdings.held(&m.uid);
                let is_pipelined = self.holdings.pipelined(&m.uid);
                let inputs = TaskInputs {
                    held,
                    pipelined: is_pipelined,
                    node: held.and_then(|p| nodes.get(&p.node)).map(|n| &n.gpus),
                    largest_card,
                };
                self.tasks.task(m, inputs, || {
                    task_of(input, held, is_pipelined, (nodes, largest_card), m)
                })
            })
            .collect();
        let inputs = JobInputs {
            tasks,
            group,
            inqueue: input.inqueue.contains(key),
        };
        self.jobs.job(key, inputs, |tasks| {
            let mut job = job_of(input, key, members, group, tasks);
            admit_if_ready(&mut job, enqueue_on);
            job
        });
    }
}

/// One gang's members as a job (`tasks`: theirs, in the same order).
fn job_of(
    input: &SnapshotInput<'_>,
    key: &GangKey,
    members: &[&Member],
    group: Option<&PodGroupSpec>,
    tasks: &[Arc<TaskInfo>],
) -> JobInfo {
    let book = input.book;
    let hint = members.iter().find_map(|m| m.queue_hint.as_deref());
    let oldest = members.iter().filter_map(|m| m.created).min();
    let (min_member, min_roles, min_resources, created) = match group {
        Some(g) => (
            g.min_member.max(0) as usize,
            g.min_task_member
                .iter()
                .map(|(k, v)| (k.clone(), (*v).max(0) as usize))
                .collect(),
            g.min_resources.clone(),
            g.creation_timestamp.or(oldest),
        ),
        None => (1, BTreeMap::new(), None, oldest),
    };
    let tasks: Vec<TaskInfo> = members
        .iter()
        .zip(tasks)
        .map(|(m, task)| {
            let mut task = TaskInfo::clone(task);
            // PriorityClasses are not part of the member: read again.
            task.priority = member_priority(book, m);
            task
        })
        .collect();
    let mut allocated = Resources::default();
    for t in &tasks {
        if t.holds_resources() {
            allocated.add(&t.resreq);
        }
    }
    JobInfo {
        key: key.clone(),
        queue: book.queue_of(key, hint),
        card_request: requested_cards(members, min_member),
        min_member,
        min_roles,
        min_resources,
        priority: job_priority(book, group, &tasks),
        service_type: match group {
            Some(g) => crate::gang::victim_facts::service_type(Some(&g.annotations)),
            None => members.iter().find_map(|m| m.service_type.clone()),
        },
        task_topology: group.and_then(|g| TopologyAnnotations::of(&g.annotations)),
        created,
        waiting_time: match group {
            Some(g) => waiting_time(&g.annotations, &key.to_string()),
            None if key.single => members
                .first()
                .and_then(|m| waiting_time(m.pod.metadata.annotations.as_ref()?, &key.to_string())),
            None => None,
        },
        group_missing: !key.single && group.is_none(),
        inqueue: input.inqueue.contains(key),
        network_topology: group.and_then(|g| g.network_topology.clone()),
        disrupted_whole: group
            .and_then(|g| g.native.as_ref())
            .is_some_and(crate::gang::native_group::NativeGroup::disrupted_whole),
        group_preemptable: group
            .is_none_or(|g| crate::gang::victim_facts::group_preemptable(&g.annotations)),
        tasks,
        allocated: allocated.without_zeros(),
    }
}

/// One member as a task: its status, what it asks, what it holds and is charged.
fn task_of(
    input: &SnapshotInput<'_>,
    held: Option<&TaskPlacement>,
    pipelined: bool,
    (nodes, largest_card): (&NodeSet, u64),
    m: &Member,
) -> TaskInfo {
    let status = match m.phase {
        MemberPhase::Succeeded => TaskStatus::Succeeded,
        MemberPhase::Failed => TaskStatus::Failed,
        MemberPhase::Placed if m.terminating => TaskStatus::Releasing,
        MemberPhase::Placed => TaskStatus::Running,
        // As Volcano's `getTaskStatus`: a pod being deleted is Releasing, placed or not.
        MemberPhase::Pending if m.terminating => TaskStatus::Releasing,
        MemberPhase::Pending if pipelined => TaskStatus::Pipelined,
        MemberPhase::Pending if held.is_some() => TaskStatus::Allocated,
        MemberPhase::Pending => TaskStatus::Pending,
    };
    let gpu = match (input.parse)(&m.pod) {
        Ok(Some(ctx)) => GpuAsk::Vgpu(Arc::new(ctx)),
        Ok(None) => GpuAsk::None,
        Err(e) => GpuAsk::Invalid(e),
    };
    let mut resreq = m.requests.clone();
    let mut cards = BTreeMap::new();
    let placement = held.cloned();
    match (&placement, &gpu) {
        (Some(p), gpu) => {
            let node = nodes.get(&p.node).map(|n| &*n.gpus);
            let ask = match gpu {
                GpuAsk::Vgpu(ctx) => Some(&**ctx),
                _ => None,
            };
            let (vgpu, held_cards) =
                placement_charge(input.dims, node, &p.devices, p.init_count, ask);
            resreq.add(&vgpu);
            cards = held_cards;
        }
        (None, GpuAsk::Vgpu(ctx)) => resreq.add(&request_charge(input.dims, ctx, largest_card)),
        (None, _) => {}
    }
    TaskInfo {
        uid: m.uid.clone(),
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        job: m.gang.clone(),
        role: m.role.clone(),
        priority: member_priority(input.book, m),
        created: m.created,
        status,
        gated: m.gated,
        foreign_gates: m.foreign_gates,
        requests: m.requests.clone(),
        resreq,
        cards,
        gpu,
        placement,
        preemptable: m.preemptable,
        never_preempts: m.never_preempts,
        cooldown: m.cooldown,
        scheduled_at: m.scheduled_at,
        owner_kind: m.owner_kind.clone(),
        pod: m.pod.clone(),
    }
}

/// A member's priority: its own, or its PriorityClass's.
fn member_priority(book: &GangBook, m: &Member) -> i32 {
    book.priority_classes
        .resolve(m.priority_class.as_deref(), m.spec_priority)
}

/// The book's HyperNodes resolved against the session's nodes (their labels, for
/// HyperNodes that pick nodes by label).
fn resolve_topology(book: &GangBook, nodes: &NodeSet) -> NetworkTopology {
    if book.hyper_nodes.is_empty() {
        return NetworkTopology::default();
    }
    let unlabelled = BTreeMap::new();
    NetworkTopology::resolve(
        book.hyper_nodes.values(),
        nodes.iter().map(|n| {
            let labels = n
                .resources
                .traits
                .as_ref()
                .map_or(&unlabelled, |t| &t.labels);
            (n.name.as_str(), labels)
        }),
    )
}

/// The book's ResourceQuotas grouped by namespace (each namespace's in name order).
fn resource_quotas(book: &GangBook) -> BTreeMap<String, Vec<NamespaceQuota>> {
    let mut by_namespace: BTreeMap<String, Vec<NamespaceQuota>> = BTreeMap::new();
    for ((namespace, _), quota) in &book.resource_quotas {
        by_namespace
            .entry(namespace.clone())
            .or_default()
            .push(quota.clone());
    }
    by_namespace
}

/// A job's priority: its PodGroup's class; without one (or for a gang of one), its
/// highest member's.
fn job_priority(book: &GangBook, group: Option<&PodGroupSpec>, tasks: &[TaskInfo]) -> i32 {
    let members = || tasks.iter().map(|t| t.priority).max().unwrap_or(0);
    // A native PodGroup's priority was resolved from its class at admission.
    if let Some(priority) = group.and_then(|g| g.native.as_ref()?.priority) {
        return priority;
    }
    match group.and_then(|g| g.priority_class_name.as_deref()) {
        Some(class) => book.priority_classes.resolve(Some(class), None),
        None => members(),
    }
}

/// The cards the first minMember members ask for with `volcano.sh/card.request`
/// (unreadable requests are logged and ignored).
fn requested_cards(members: &[&Member], min_member: usize) -> Resources {
    let mut total = Resources::default();
    for m in members.iter().take(min_member.max(1)) {
        let Some(annotations) = m.pod.metadata.annotations.as_ref() else {
            continue;
        };
        match card_request(annotations) {
            Ok(Some(cards)) => total.add(&card_request_resources(&cards)),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(pod = %format!("{}/{}", m.namespace, m.name), error = %e, "ignoring unreadable card request")
            }
        }
    }
    total
}

/// Every queue that exists (and the default queue, unless its object is
/// unreadable), with what its jobs hold and ask for (`totals`: the kept jobs'
/// figures summed by queue, those without members included).
fn queue_infos(book: &GangBook, totals: &QueueTotals) -> BTreeMap<String, QueueInfo> {
    let mut queues: BTreeMap<String, QueueInfo> = book
        .queues
        .values()
        .map(|spec| (spec.name.clone(), QueueInfo::idle(spec.clone())))
        .collect();
    if !queues.contains_key(DEFAULT_QUEUE) && !book.queue_errors.contains_key(DEFAULT_QUEUE) {
        queues.insert(
            DEFAULT_QUEUE.to_string(),
            QueueInfo::idle(QueueSpec::new(DEFAULT_QUEUE)),
        );
    }
    for q in queues.values_mut() {
        totals.add_to(q);
    }
    for q in queues.values_mut() {
        q.prune_zeros();
    }
    queues
}
