//! Builds the state a planning session works on from the gang book (members,
//! PodGroups, Queues) and a moment's look at the ledger (GPU usage, who holds what,
//! node CPU and memory, namespace quotas). The ledger is read only while the
//! picture is taken (node entries are shared, not copied); everything else (pod
//! parses, charges, queue figures) is built after, and the session then plans
//! without holding anything.

use super::book::{GangBook, Member, MemberPhase};
use super::memberless_group::memberless_jobs;
use super::membership::DEFAULT_QUEUE;
use super::task_cache::{TaskCache, TaskInputs};
use crate::fit::{PodContext, QuotaHeadroom};
use crate::ledger::Ledger;
use crate::node_metrics::NodeMetricsBook;
use crate::resources::{Resources, VgpuDims};
use crate::volcano::card_quota::{card_request, card_request_resources};
use crate::volcano::conf::{Action, SchedulerConf};
use crate::volcano::framework::charge::{
    largest_card_mib, placement_charge, request_charge, vgpu_total,
};
use crate::volcano::framework::job::{GpuAsk, TaskPlacement};
use crate::volcano::framework::nodes::{NodeSet, SessionNode};
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::{GangKey, JobInfo, SessionState, TaskInfo, TaskStatus};
use crate::volcano::objects::{PodGroupSpec, QueueSpec};
use crate::volcano::resource_quota::NamespaceQuota;
use crate::volcano::task_topology::TopologyAnnotations;
use crate::volcano::topology::NetworkTopology;
use crate::volcano::waiting_time::waiting_time;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
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
pub struct LedgerPicture {
    nodes: Vec<SessionNode>,
    quotas: BTreeMap<String, QuotaHeadroom>,
    /// What the ledger holds (or has promised) for each member: node, GPUs, init
    /// containers.
    holdings: HashMap<String, TaskPlacement>,
    /// Members whose holding is a pipelined plan still waiting for its victims.
    pipelined: HashSet<String>,
    allocatable: Resources,
    /// Every node's measured usage (shared with the ledger, not copied).
    measured: Arc<NodeMetricsBook>,
    /// Every namespace's labels (shared with the ledger, not copied).
    namespaces: Arc<crate::placement::namespace_labels::NamespaceLabels>,
}

impl LedgerPicture {
    /// Takes the picture (call with the ledger locked for reading).
    pub fn take(ledger: &Ledger, book: &GangBook) -> Self {
        let mut nodes: Vec<SessionNode> = ledger
            .snapshot_nodes()
            .into_iter()
            .map(|(name, gpus)| SessionNode {
                resources: ledger.load().get(&name).cloned().unwrap_or_default(),
                name,
                gpus,
            })
            .collect();
        let quotas = ledger
            .quota_report()
            .into_iter()
            .map(|(ns, _, _)| {
                let headroom = ledger.quota_headroom(&ns);
                (ns, headroom)
            })
            .collect();
        let mut pipelined = HashSet::new();
        let holdings = book
            .members
            .keys()
            .filter_map(|uid| {
                let p = match ledger.pod(uid) {
                    Some(p) => p,
                    None => {
                        let pledge = ledger.pledge_of(uid)?;
                        pipelined.insert(uid.clone());
                        &pledge.entry
                    }
                };
                Some((
                    uid.clone(),
                    TaskPlacement {
                        node: p.node.clone(),
                        devices: p.devices.clone(),
                        init_count: p.init_count,
                    },
                ))
            })
            .collect();
        let mut holdings: HashMap<String, TaskPlacement> = holdings;
        for m in book.members.values() {
            if holdings.contains_key(&m.uid) {
                continue;
            }
            if let Some(node) = node_without_gpus(m) {
                // A plan interrupted before the gate was lifted, onto a node that is
                // gone since: the member is still gated, so it is planned again.
                if m.gated && !nodes.iter().any(|n| n.name == node) {
                    continue;
                }
                holdings.insert(
                    m.uid.clone(),
                    TaskPlacement {
                        node,
                        devices: Vec::new(),
                        init_count: 0,
                    },
                );
            }
        }
        count_planned_on_nodes(&mut nodes, book, &holdings);
        Self {
            nodes,
            quotas,
            holdings,
            pipelined,
            allocatable: ledger.load().total_allocatable(),
            measured: ledger.load().measured().clone(),
            namespaces: ledger.load().namespaces().clone(),
        }
    }
}

/// The node of a member the ledger holds nothing for: the one it is bound to,
/// or the one planned for it (a pod that asks for no vGPU).
fn node_without_gpus(m: &Member) -> Option<String> {
    match m.phase {
        MemberPhase::Placed => m
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        MemberPhase::Pending => m.planned_node.clone(),
        MemberPhase::Succeeded | MemberPhase::Failed => None,
    }
}

/// Counts what members planned onto a node but not yet bound there will take of
/// it (bound pods are counted already, from the pod watch): otherwise the next
/// cycle would plan the same room again before they arrive.
fn count_planned_on_nodes(
    nodes: &mut [SessionNode],
    book: &GangBook,
    holdings: &HashMap<String, TaskPlacement>,
) {
    let index: HashMap<String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for m in book.members.values() {
        if m.phase != MemberPhase::Pending {
            continue;
        }
        let Some(held) = holdings.get(&m.uid) else {
            continue;
        };
        if let Some(node) = index.get(&held.node).map(|&i| &mut nodes[i]) {
            node.resources
                .requested
                .add(&crate::placement::resource_fit::pod_footprint(&m.pod));
        }
    }
}

/// The session state over a picture of the ledger, every task built anew.
pub fn build_state(input: &SnapshotInput<'_>, picture: LedgerPicture) -> SessionState {
    build_state_with(input, picture, &mut TaskCache::default())
}

/// The session state over a picture of the ledger, with the tasks of members that
/// did not change since the last cycle taken from `tasks`.
pub fn build_state_with(
    input: &SnapshotInput<'_>,
    picture: LedgerPicture,
    tasks: &mut TaskCache,
) -> SessionState {
    let mut total = Resources::default();
    for dim in ["cpu", "memory"] {
        if picture.allocatable.contains(dim) {
            total.set(dim, picture.allocatable.get(dim));
        }
    }
    total.add(&vgpu_total(
        input.dims,
        picture.nodes.iter().map(|n| &*n.gpus),
    ));
    let node_set = NodeSet::new(picture.nodes, picture.quotas)
        .with_measured(picture.measured, input.now)
        .with_namespaces(picture.namespaces);
    let topology = Arc::new(resolve_topology(input.book, &node_set));

    let mut jobs = assemble_jobs(
        input,
        (&picture.holdings, &picture.pipelined),
        &node_set,
        tasks,
    );
    let memberless = memberless_jobs(input.book, &jobs, input.inqueue, |g| {
        job_priority(input.book, Some(g), &[])
    });
    jobs.extend(memberless.into_iter().map(|j| (j.key.clone(), j)));
    let enqueue_on = input.conf.has_action(Action::Enqueue);
    for job in jobs.values_mut() {
        let c = job.counts();
        job.inqueue |= c.ready > 0 || job.reaches_minimum(c.ready, &c.ready_roles) || !enqueue_on;
    }
    let queues = queue_infos(input, &jobs);
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

fn assemble_jobs(
    input: &SnapshotInput<'_>,
    (holdings, pipelined): (&HashMap<String, TaskPlacement>, &HashSet<String>),
    nodes: &NodeSet,
    cache: &mut TaskCache,
) -> BTreeMap<GangKey, JobInfo> {
    let book = input.book;
    let largest_card = largest_card_mib(nodes.iter().map(|n| &*n.gpus));
    let mut by_gang: BTreeMap<&GangKey, Vec<&Member>> = BTreeMap::new();
    for m in book.members.values() {
        by_gang.entry(&m.gang).or_default().push(m);
    }
    by_gang
        .into_iter()
        .map(|(key, mut members)| {
            members.sort_by(|a, b| super::book::member_order(a, b));
            let hint = members.iter().find_map(|m| m.queue_hint.as_deref());
            let group = (!key.single)
                .then(|| book.groups.get(&(key.namespace.clone(), key.name.clone())))
                .flatten();
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
                .map(|m| {
                    let held = holdings.get(&m.uid);
                    let is_pipelined = pipelined.contains(&m.uid);
                    let inputs = TaskInputs {
                        held,
                        pipelined: is_pipelined,
                        node: held.and_then(|p| nodes.get(&p.node)).map(|n| &n.gpus),
                        largest_card,
                    };
                    let mut task = cache.task(m, inputs, || {
                        task_of(input, held, is_pipelined, (nodes, largest_card), m)
                    });
                    // PriorityClasses are not part of the member: read again.
                    task.priority = member_priority(input.book, m);
                    task
                })
                .collect();
            let mut allocated = Resources::default();
            for t in &tasks {
                if t.status.holds_resources() {
                    allocated.add(&t.resreq);
                }
            }
            let job = JobInfo {
                key: key.clone(),
                queue: book.queue_of(key, hint),
                card_request: requested_cards(&members, min_member),
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
                    None if key.single => members.first().and_then(|m| {
                        waiting_time(m.pod.metadata.annotations.as_ref()?, &key.to_string())
                    }),
                    None => None,
                },
                group_missing: !key.single && group.is_none(),
                inqueue: input.inqueue.contains(key),
                network_topology: group.and_then(|g| g.network_topology.clone()),
                disrupted_whole: group
                    .and_then(|g| g.native.as_ref())
                    .is_some_and(crate::gang::native_group::NativeGroup::disrupted_whole),
                tasks,
                allocated: allocated.without_zeros(),
            };
            (key.clone(), job)
        })
        .collect()
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
/// unreadable), with what its jobs hold and ask for.
fn queue_infos(
    input: &SnapshotInput<'_>,
    jobs: &BTreeMap<GangKey, JobInfo>,
) -> BTreeMap<String, QueueInfo> {
    let book = input.book;
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
    for job in jobs.values() {
        let Some(q) = queues.get_mut(&job.queue) else {
            continue;
        };
        // A PodGroup without pods whose status reads Inqueue counts as admitted.
        q.charge_job(
            job,
            input.inqueue.contains(&job.key) || (job.inqueue && job.tasks.is_empty()),
        );
    }
    for q in queues.values_mut() {
        q.prune_zeros();
    }
    queues
}
