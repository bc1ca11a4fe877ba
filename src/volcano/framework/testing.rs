//! Builders for sessions in tests: queues, jobs of plain tasks, and a probe that
//! asks a session's queue plugins directly.

use super::job::{GangKey, GpuAsk, JobInfo, TaskInfo, TaskStatus};
use super::nodes::NodeSet;
use super::queue::QueueInfo;
use super::rejection::Rejection;
use super::report::QueueReport;
use super::session::Session;
use super::state::SessionState;
use super::statement::Statement;
use crate::resources::{Resources, VgpuDims};
use crate::volcano::card_quota::CARD_DIMENSION_PREFIX;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::sync::Arc;

/// GPUs as a resource amount.
pub fn gpus(n: i64) -> Resources {
    Resources::from_units([("nvidia.com/gpu", n)])
}

/// A queue holding `allocated` GPUs and asking for `request`.
pub fn busy(spec: QueueSpec, allocated: i64, request: i64) -> QueueInfo {
    QueueInfo {
        allocated: gpus(allocated),
        request: gpus(request),
        ..QueueInfo::idle(spec)
    }
}

/// A pending, gated task without GPUs that asks for `resreq`.
pub fn task(job: &GangKey, name: &str, resreq: Resources) -> TaskInfo {
    TaskInfo {
        uid: format!("uid-{name}"),
        namespace: job.namespace.to_string(),
        name: name.to_string(),
        job: job.clone(),
        role: None,
        priority: 0,
        created: None,
        status: TaskStatus::Pending,
        gated: true,
        foreign_gates: false,
        requests: resreq.clone(),
        resreq,
        cards: BTreeMap::new(),
        gpu: GpuAsk::None,
        placement: None,
        preemptable: true,
        never_preempts: false,
        cooldown: None,
        scheduled_at: None,
        owner_kind: None,
        pod: Arc::new(Pod::default()),
    }
}

/// The key of the PodGroup job `name` in namespace `ns` (what [`job`] builds).
pub fn gang_key(name: &str) -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: name.into(),
        single: false,
    }
}

/// The verdict of gang `name` (in namespace `ns`) of `queue` in `phase`,
/// waiting with `message` if any.
pub fn verdict(
    name: &str,
    queue: &str,
    phase: super::GangPhase,
    message: Option<String>,
) -> super::GangVerdict {
    super::GangVerdict {
        gang: format!("ns/{name}"),
        single: false,
        queue: queue.into(),
        phase,
        min_member: 1,
        members: 1,
        ready: 0,
        running: 0,
        succeeded: 0,
        failed: 0,
        reason: message.as_ref().map(|_| "Unschedulable"),
        message,
        api: None,
        workload: None,
        disruption_mode: None,
    }
}

/// A PodGroup job in `queue` with these tasks.
/// A session's jobs map holding `list`, each by its key.
pub fn jobs_map(list: &[&Arc<JobInfo>]) -> crate::volcano::framework::map_diff::Jobs {
    list.iter()
        .map(|j| (j.key.clone(), Arc::clone(j)))
        .collect()
}

pub fn job(name: &str, queue: &str, min_member: usize, tasks: Vec<TaskInfo>) -> JobInfo {
    let key = GangKey {
        namespace: "ns".into(),
        name: name.into(),
        single: false,
    };
    let mut allocated = Resources::default();
    let tasks: Vec<TaskInfo> = tasks
        .into_iter()
        .map(|mut t| {
            t.job = key.clone();
            if t.holds_resources() {
                allocated.add(&t.resreq);
            }
            t
        })
        .collect();
    JobInfo {
        key,
        queue: queue.into(),
        min_member,
        min_roles: BTreeMap::new(),
        min_resources: None,
        card_request: Resources::default(),
        priority: 0,
        created: None,
        waiting_time: None,
        group_missing: false,
        service_type: None,
        task_topology: None,
        inqueue: true,
        network_topology: None,
        disrupted_whole: false,
        group_preemptable: true,
        tasks,
        allocated,
    }
}

/// A node without GPUs whose CPU and memory were never reported: it takes any
/// task that asks for no vGPU (such tasks need a node to be planned onto).
pub fn roomy_node() -> NodeSet {
    NodeSet::new(
        vec![super::nodes::SessionNode::new(
            "node-roomy".into(),
            Arc::default(),
            Default::default(),
        )],
        BTreeMap::new(),
    )
}

/// A session state with these queues and jobs and one node without GPUs (see
/// [`roomy_node`]).
pub fn state(total: Resources, queues: Vec<QueueInfo>, jobs: Vec<JobInfo>) -> SessionState {
    SessionState {
        jobs: jobs
            .into_iter()
            .map(|j| (j.key.clone(), Arc::new(j)))
            .collect(),
        queues: queues
            .into_iter()
            .map(|q| (q.spec.name.clone(), q))
            .collect(),
        nodes: roomy_node(),
        total,
        dims: VgpuDims::default(),
        now: chrono::DateTime::UNIX_EPOCH,
        only: None,
        budgets: Vec::new(),
        resource_quotas: BTreeMap::new(),
        topology: Default::default(),
    }
}

/// Tasks each probe job has for tentative placements.
const PROBE_TASKS: usize = 64;

/// Asks a session's queue plugins about amounts, through a job of empty tasks in
/// every queue: what the queue would say to a task or a job asking that much.
#[derive(Debug)]
pub struct QueueProbe {
    /// The session.
    pub session: Session,
    placed: Vec<(String, Statement)>,
}

fn probe_key(queue: &str) -> GangKey {
    GangKey {
        namespace: "probe".into(),
        name: queue.into(),
        single: false,
    }
}

impl QueueProbe {
    /// A session over `queues` with the plugins of `conf`.
    pub fn new(conf: &SchedulerConf, total: Resources, queues: Vec<QueueInfo>) -> Self {
        // As the snapshot builds them: no zero amounts, no empty card counts.
        let queues: Vec<QueueInfo> = queues
            .into_iter()
            .map(|mut q| {
                q.allocated.prune_zeros();
                q.request.prune_zeros();
                q.inqueue.prune_zeros();
                q.elastic.prune_zeros();
                q.cards.retain(|_, n| *n > 0);
                q
            })
            .collect();
        let jobs = queues
            .iter()
            .map(|q| {
                let key = probe_key(&q.spec.name);
                let tasks = (0..PROBE_TASKS)
                    .map(|i| task(&key, &format!("{}-{i}", q.spec.name), Resources::new()))
                    .collect();
                let mut j = job(&q.spec.name, &q.spec.name, 1, tasks);
                j.key = key;
                for t in &mut j.tasks {
                    t.job = j.key.clone();
                }
                j
            })
            .collect();
        let tiers = registry::build(conf).expect("configuration builds");
        Self {
            session: Session::open(state(total, queues, jobs), tiers),
            placed: Vec::new(),
        }
    }

    fn next_task(&self, queue: &str) -> String {
        let key = probe_key(queue);
        self.session
            .state
            .job(&key)
            .and_then(|j| j.tasks.iter().find(|t| t.status == TaskStatus::Pending))
            .map(|t| t.uid.clone())
            .expect("a free probe task")
    }

    /// Whether a task charged `candidate` holding `cards` may be placed in `queue`.
    pub fn allocatable(
        &self,
        queue: &str,
        candidate: &Resources,
        cards: &BTreeMap<String, i64>,
    ) -> Result<(), Rejection> {
        let key = probe_key(queue);
        if self.session.state.job(&key).is_none() {
            return Err(Rejection::unknown_queue(queue));
        }
        let uid = self.next_task(queue);
        self.session
            .allocatable(&key, &uid, &(candidate.clone(), cards.clone()))
    }

    /// Whether a job with these minimum resources (`card/<name>` dimensions being
    /// its card request) may be admitted to `queue`.
    pub fn enqueueable(&mut self, queue: &str, min: &Resources) -> Result<(), Rejection> {
        let key = probe_key(queue);
        let Some(job) = self.session.state.jobs.get_mut(&key).map(Arc::make_mut) else {
            return Err(Rejection::unknown_queue(queue));
        };
        let (cards, resources) = min.split_prefix(CARD_DIMENSION_PREFIX);
        job.min_resources = (!resources.is_empty()).then_some(resources);
        job.card_request = cards;
        self.session.job_enqueueable(&key)
    }

    /// Places a task charged `r` holding `cards` in `queue`.
    pub fn allocate(&mut self, queue: &str, r: &Resources, cards: &BTreeMap<String, i64>) {
        let uid = self.next_task(queue);
        let mut statement = Statement::new();
        statement.allocate(
            &mut self.session,
            &probe_key(queue),
            &uid,
            None,
            (r.clone(), cards.clone()),
        );
        self.placed.push((queue.to_string(), statement));
    }

    /// Takes the last [`Self::allocate`] back.
    pub fn deallocate_last(&mut self) {
        if let Some((_, statement)) = self.placed.pop() {
            statement.discard(&mut self.session);
        }
    }

    /// Counts `min` as admitted to `queue`.
    pub fn mark_inqueue(&mut self, queue: &str, min: &Resources) {
        if let Some(q) = self.session.state.queues.get_mut(queue) {
            q.inqueue.add(min);
            q.inqueue.prune_zeros();
        }
    }

    /// Every queue's report (probe jobs aside, nothing else is in them).
    pub fn report(&self) -> Vec<QueueReport> {
        self.session.queue_reports()
    }

    /// Queue names in queue order.
    pub fn ordered_queues(&self) -> Vec<String> {
        self.session.ordered_queues()
    }

    /// Whether the queue is overused.
    pub fn overused(&self, queue: &str) -> bool {
        self.session.overused(queue)
    }
}

/// A node's GPU `i` (`count` slots, 80 GB), H100 on even nodes, A100 on odd ones.
pub fn gpu(node: usize, i: u32, count: u32) -> crate::device::model::GpuDevice {
    crate::device::model::GpuDevice {
        id: Arc::from(format!("GPU-{node:04}-{i:04}-aa6e500d-328b-a510")),
        index: i,
        count,
        devmem: 81559,
        devcore: 100,
        model: if node.is_multiple_of(2) {
            "NVIDIA H100 80GB HBM3".into()
        } else {
            "NVIDIA A100-SXM4-80GB".into()
        },
        numa: 0,
        health: true,
        mode: "hami-core".into(),
        pair_scores: Default::default(),
        mig_profiles: Vec::new(),
    }
}

/// `nodes` nodes `node-<n>` of `gpus` GPUs with `count` slots each, nothing used.
pub fn gpu_nodes(nodes: usize, gpus: u32, count: u32) -> NodeSet {
    let mut ledger = crate::ledger::Ledger::default();
    for n in 0..nodes {
        ledger.upsert_node(
            &format!("node-{n}"),
            crate::ledger::NodeEntry {
                devices: (0..gpus).map(|i| gpu(n, i, count)).collect(),
                ..Default::default()
            },
        );
    }
    let nodes = ledger
        .snapshot_nodes()
        .into_iter()
        .map(|(name, gpus)| super::nodes::SessionNode::new(name, gpus, Default::default()))
        .collect();
    NodeSet::new(nodes, BTreeMap::new())
}

/// `memory` MiB and `cores` percent of GPU `index` (of [`gpu`]) of node `node`.
pub fn gpu_share(
    node: usize,
    index: u32,
    memory: u64,
    cores: u32,
) -> crate::device::model::ContainerDevice {
    crate::device::model::ContainerDevice {
        uuid: gpu(node, index, 4).id,
        vendor: "NVIDIA".into(),
        usedmem: memory,
        usedcores: cores,
        mig: None,
    }
}

/// What plugins would read of a pod `ns/p` asking for `ctx`'s vGPUs and
/// `resreq`, with no pod object nor queue behind it.
pub fn vgpu_task_facts<'a>(
    ctx: &'a crate::fit::PodContext,
    resreq: &'a Resources,
    dims: &'a VgpuDims,
) -> crate::placement::TaskFacts<'a> {
    crate::placement::TaskFacts {
        namespace: "ns",
        name: "p",
        gpu: Some(ctx),
        resreq,
        pod: None,
        queue: None,
        dims,
        pod_affinity: None,
        preferred_pod_affinity: None,
    }
}

/// A parsed vGPU request of `gpus` GPUs with `mem` MiB each.
pub fn vgpu(uid: &str, gpus: u32, mem: u64) -> crate::fit::PodContext {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string()}}}]}
    }))
    .expect("pod");
    crate::fit::PodContext::parse(
        &pod,
        &crate::device::device_config::NvidiaConfig::default(),
        crate::policy::NodePolicy::Binpack,
        &crate::policy::GpuPolicy::default(),
    )
    .expect("parses")
    .expect("asks for vGPUs")
}

/// A pending, gated task asking for `gpus` whole 80 GB GPUs.
pub fn gpu_task(job: &GangKey, name: &str, gpus: u32) -> TaskInfo {
    let mut t = task(
        job,
        name,
        Resources::from_units([("nvidia.com/gpu", i64::from(gpus))]),
    );
    t.gpu = GpuAsk::Vgpu(std::sync::Arc::new(vgpu(
        &format!("uid-{name}"),
        gpus,
        80000,
    )));
    // As the snapshot keeps them: `requests` are what the pod asks besides its
    // vGPUs, which are charged from its placement.
    t.requests = Resources::new();
    t
}

/// A task running on `node`, holding GPU `gpu` of it whole.
pub fn running_task(job: &GangKey, name: &str, node: usize, gpu_index: u32) -> TaskInfo {
    let mut t = gpu_task(job, name, 1);
    t.status = TaskStatus::Running;
    t.gated = false;
    t.placement = Some(super::job::TaskPlacement {
        node: format!("node-{node}"),
        devices: vec![vec![crate::device::model::ContainerDevice {
            uuid: gpu(node, gpu_index, 1).id,
            vendor: Arc::from("NVIDIA"),
            usedmem: 81559,
            usedcores: 100,
            mig: None,
        }]],
        init_count: 0,
    });
    t.resreq = Resources::from_units([("nvidia.com/gpu", 1)]);
    t.resreq.set("nvidia.com/gpumem", 81_559_000);
    t.resreq.set("nvidia.com/gpucores", 100_000);
    t.cards = BTreeMap::from([(
        crate::volcano::card_quota::card_type(&gpu(node, gpu_index, 1).model),
        1,
    )]);
    t
}

/// A state whose nodes carry the placements of its running tasks, and whose queues
/// are charged for them.
pub fn placed_state(nodes: NodeSet, queues: Vec<QueueInfo>, jobs: Vec<JobInfo>) -> SessionState {
    let mut st = state(Resources::new(), queues, jobs);
    let mut nodes = nodes;
    for j in st.jobs.values() {
        for t in j.tasks.iter().filter(|t| t.holds_resources()) {
            if let Some(p) = &t.placement {
                nodes.place(
                    &t.namespace,
                    &p.node,
                    &p.devices,
                    p.init_count,
                    &Resources::new(),
                );
            }
            if let Some(q) = st.queues.get_mut(&j.queue) {
                q.allocated.add(&t.resreq);
                super::queue::add_cards(&mut q.cards, &t.cards);
            }
        }
    }
    st.total = Resources::from_units([("nvidia.com/gpu", 64)]);
    st.nodes = nodes;
    st
}
