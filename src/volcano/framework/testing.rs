//! Builders for sessions in tests: queues, jobs of plain tasks, and a probe that
//! asks a session's queue plugins directly.

use super::job::{GangKey, GpuAsk, JobInfo, TaskInfo, TaskStatus};
use super::nodes::NodeSet;
use super::queue::QueueInfo;
use super::registry;
use super::rejection::Rejection;
use super::report::QueueReport;
use super::session::Session;
use super::state::SessionState;
use super::statement::Statement;
use crate::resources::{Resources, VgpuDims};
use crate::volcano::card_quota::CARD_DIMENSION_PREFIX;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::objects::QueueSpec;
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
        namespace: job.namespace.clone(),
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

/// A PodGroup job in `queue` with these tasks.
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
            if t.status.holds_resources() {
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
        group_missing: false,
        service_type: None,
        inqueue: true,
        tasks,
        allocated,
    }
}

/// A session state with these queues and jobs and no nodes.
pub fn state(total: Resources, queues: Vec<QueueInfo>, jobs: Vec<JobInfo>) -> SessionState {
    SessionState {
        jobs: jobs.into_iter().map(|j| (j.key.clone(), j)).collect(),
        queues: queues
            .into_iter()
            .map(|q| (q.spec.name.clone(), q))
            .collect(),
        nodes: NodeSet::default(),
        total,
        dims: VgpuDims::default(),
        now: chrono::DateTime::UNIX_EPOCH,
        only: None,
        budgets: Vec::new(),
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
        let Some(job) = self.session.state.jobs.get_mut(&key) else {
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
