//! A session: the state of the cluster copied when a planning cycle opens, the
//! plugins in force, and what the actions decided. Actions ask the plugins through
//! the session (tier by tier) and change the state only through statements; the
//! session turns the committed statements into an outcome when it closes.

use super::charge::{Charge, placement_charge};
use super::job::{GangKey, JobInfo, TaskInfo, TaskPlacement, TaskStatus};
use super::nodes::PlacedUsage;
use super::outcome::{
    EvictAction, Eviction, GangPhase, GangVerdict, JobCommit, PlannedTask, SessionOutcome,
};
use super::plugin::{JobInvalid, TaskEvent};
use super::pod_affinity_view::{JobTermHolders, TermHolders};
use super::queue::{QueueInfo, add_cards, sub_cards};
use super::rejection::Rejection;
use super::report::QueueReport;
use super::session_memory::SessionMemory;
use super::state::SessionState;
use super::tiers::Tiers;
use super::unsettled_jobs::UnsettledJobs;
use crate::placement::{
    Choice, NodeJudge, NodeRejections, NodeSource, NodeSubset, TaskFacts, choose_node,
};
use crate::resources::Resources;
use crate::volcano::card_quota::use_by_quota_key;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The condition reason of a job whose queue does not exist.
pub const QUEUE_NOT_FOUND: &str = "QueueNotFound";

/// Why a job waits, as the actions found it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobNote {
    /// The phase to report instead of the one its tasks imply (a job refused
    /// admission stays Pending).
    phase: Option<GangPhase>,
    reason: &'static str,
    message: String,
}

/// A planning session.
#[derive(Debug)]
pub struct Session {
    /// The cluster as the session sees it.
    pub state: SessionState,
    tiers: Tiers,
    commits: Vec<JobCommit>,
    enqueued: Vec<GangKey>,
    notes: BTreeMap<GangKey, JobNote>,
    /// Tasks evicted by this session's statements (committed or not).
    evicted: std::collections::BTreeSet<String>,
    /// Jobs allocate may skip, and those it could not place.
    pub(crate) hints: super::allocate_hints::AllocateHints,
    /// The tasks with inter-pod affinity terms, found when a node is first
    /// chosen.
    term_holders: std::sync::OnceLock<TermHolders>,
    /// What the last session left (verdicts; the plugins' figures were handed
    /// to them as it opened), brought up to date as this one closes.
    memory: SessionMemory,
}

/// What a statement needs to take an operation back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaskBefore {
    status: TaskStatus,
    resreq: Resources,
    cards: BTreeMap<String, i64>,
    placement: Option<TaskPlacement>,
}

impl Session {
    /// Opens a session: the plugins derive what they keep from the state.
    pub fn open(state: SessionState, tiers: Tiers) -> Self {
        Self::open_after(state, tiers, SessionMemory::default())
    }

    /// Opens a session after the one that left `memory` over the same cluster:
    /// the plugins derive again only what changed since (see
    /// [`SessionMemory`]).
    pub fn open_after(state: SessionState, mut tiers: Tiers, mut memory: SessionMemory) -> Self {
        tiers.reuse(memory.take_plugins());
        tiers.open(&state);
        // A session planning one job alone looks at no other.
        if state.only.is_none() {
            memory.unsettled.follow(&state, &tiers);
        }
        // A memory left by a session knows every unchanged job's term holders:
        // finding them costs only the jobs that changed, so they are found now.
        let term_holders = std::sync::OnceLock::new();
        if memory.from_session {
            let holding = &mut memory.holding_terms;
            memory
                .term_holders
                .follow(
                    &state.jobs,
                    [],
                    JobTermHolders::of,
                    |key, (_, after)| match after.filter(|h| !h.is_empty()) {
                        Some(holders) => {
                            holding.insert(key.clone(), holders.clone());
                        }
                        None => {
                            holding.remove(key);
                        }
                    },
                );
            let _ = term_holders.set(TermHolders::of_kept(&memory.holding_terms));
        }
        Self {
            memory,
            state,
            tiers,
            commits: Vec::new(),
            enqueued: Vec::new(),
            notes: BTreeMap::new(),
            evicted: Default::default(),
            hints: Default::default(),
            term_holders,
        }
    }

    /// Tasks this session evicts (PodDisruptionBudgets count them).
    pub fn evicted(&self) -> &std::collections::BTreeSet<String> {
        &self.evicted
    }

    /// The plugins.
    pub fn tiers(&self) -> &Tiers {
        &self.tiers
    }

    /// Queue names in queue order: the plugins' order, then higher priority, then
    /// name. Unknown names sort last.
    pub fn ordered_queues(&self) -> Vec<String> {
        let mut names: Vec<String> = self.state.queues.keys().cloned().collect();
        names.sort_by(|a, b| self.queue_order(a, b));
        names
    }

    /// The first queue in queue order among those `wanted` says yes to: one
    /// comparison per wanted queue, where sorting every queue costs several
    /// (and each comparison asks the plugins for two shares). Taking a job
    /// asks this once per job.
    pub fn first_queue(&self, mut wanted: impl FnMut(&str) -> bool) -> Option<String> {
        self.state
            .queues
            .keys()
            .filter(|q| wanted(q))
            .min_by(|a, b| self.queue_order(a, b))
            .cloned()
    }

    /// Queue order (see [`Self::ordered_queues`]).
    pub fn queue_order(&self, a: &str, b: &str) -> Ordering {
        match (self.state.queue(a), self.state.queue(b)) {
            (Some(qa), Some(qb)) => self
                .tiers
                .queue_order(&self.state, qa, qb)
                .then_with(|| qb.spec.priority.cmp(&qa.spec.priority))
                .then_with(|| a.cmp(b)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => a.cmp(b),
        }
    }

    /// Job order: the plugins' order, then age, then key.
    pub fn job_order(&self, a: &GangKey, b: &GangKey) -> Ordering {
        match (self.state.job(a), self.state.job(b)) {
            (Some(ja), Some(jb)) => self.job_info_order(ja, jb),
            _ => a.cmp(b),
        }
    }

    /// [`Self::job_order`] of two jobs at hand, without looking them up.
    pub fn job_info_order(&self, a: &JobInfo, b: &JobInfo) -> Ordering {
        self.tiers
            .job_order(&self.state, a, b)
            .then_with(|| a.created.cmp(&b.created))
            .then_with(|| a.key.cmp(&b.key))
    }

    /// A job's task UIDs in task order: the plugins' order, then age, then name.
    pub fn ordered_tasks(&self, job: &GangKey) -> Vec<String> {
        let Some(j) = self.state.job(job) else {
            return Vec::new();
        };
        let mut tasks: Vec<&TaskInfo> = j.tasks.iter().collect();
        tasks.sort_by(|a, b| {
            self.tiers
                .task_order(a, b)
                .then_with(|| a.created.cmp(&b.created))
                .then_with(|| a.name.cmp(&b.name))
        });
        tasks.into_iter().map(|t| t.uid.clone()).collect()
    }

    /// Whether the job can be scheduled at all: its PodGroup and its queue exist
    /// and no plugin finds it invalid.
    pub fn job_valid(&self, job: &JobInfo) -> Result<(), JobInvalid> {
        super::unsettled_jobs::job_valid(&self.state, &self.tiers, job)
    }

    /// Whether the plugins find the job ready.
    pub fn job_ready(&self, job: &GangKey) -> bool {
        self.state.job(job).is_some_and(|j| self.tiers.job_ready(j))
    }

    /// Whether the plugins find the job pipelined.
    pub fn job_pipelined(&self, job: &GangKey) -> bool {
        self.state
            .job(job)
            .is_some_and(|j| self.tiers.job_pipelined(j))
    }

    /// Whether the plugins find the job starving.
    pub fn job_starving(&self, job: &GangKey) -> bool {
        self.state
            .job(job)
            .is_some_and(|j| self.tiers.job_starving(j))
    }

    /// Whether the queue is overused.
    pub fn overused(&self, queue: &str) -> bool {
        self.state
            .queue(queue)
            .is_some_and(|q| self.tiers.overused(&self.state, q))
    }

    /// Whether the job may be admitted to its queue.
    pub fn job_enqueueable(&self, job: &GangKey) -> Result<(), Rejection> {
        let Some(j) = self.state.job(job) else {
            return Ok(());
        };
        self.queue_open(&j.queue, "enqueue")?;
        self.tiers.job_enqueueable(&self.state, j)
    }

    /// Admits the job: what it reserves counts against its queue from now on.
    pub fn enqueue(&mut self, job: &GangKey) {
        let Some(j) = self.state.jobs.get_mut(job).map(Arc::make_mut) else {
            return;
        };
        if j.inqueue {
            return;
        }
        j.inqueue = true;
        let mut reserve = j.min_request().unwrap_or_default();
        reserve.add(&j.card_request);
        let reserve = reserve.minus(&j.allocated);
        let queue = j.queue.clone();
        if let Some(q) = self.state.queues.get_mut(&queue) {
            q.inqueue.add(&reserve);
            q.inqueue.prune_zeros();
        }
        self.enqueued.push(job.clone());
        if let Some(j) = self.state.jobs.get(job) {
            self.tiers.job_enqueued(&self.state, j);
        }
    }

    /// A queue that exists and is Open, or why not. `action` names the refusal when
    /// no quota plugin runs.
    pub fn queue_open(&self, queue: &str, action: &'static str) -> Result<(), Rejection> {
        let q = self
            .state
            .queue(queue)
            .ok_or_else(|| Rejection::unknown_queue(queue))?;
        if q.spec.state != crate::volcano::objects::QueueState::Open {
            let plugin = self
                .tiers
                .names()
                .into_iter()
                .find(|n| matches!(*n, "capacity" | "proportion"))
                .unwrap_or(action);
            return Err(Rejection {
                plugin,
                queue: queue.to_owned(),
                dimension: "state".to_owned(),
                message: format!("state is {}, not Open", q.spec.state.as_str()),
            });
        }
        Ok(())
    }

    /// The best node for a task: through the one node-choice path `/filter` uses
    /// for a task that asks for vGPUs, by its requests and the plugins' predicates
    /// and scores for one that does not (see [`super::plain_choice`]). `Ok(None)`
    /// is never returned today; callers keep handling it for tasks placed without
    /// a node.
    pub fn choose_node(&self, job: &GangKey, uid: &str) -> Result<Option<Choice>, String> {
        self.choose_node_among(job, uid, None)
    }

    /// [`Self::choose_node`] among the nodes at `within` (positions in the
    /// session's node set, ascending), or among all.
    pub fn choose_node_among(
        &self,
        job: &GangKey,
        uid: &str,
        within: Option<&[usize]>,
    ) -> Result<Option<Choice>, String> {
        let task = self
            .state
            .task(job, uid)
            .ok_or_else(|| format!("task {uid} is not in job {job}"))?;
        match &task.gpu {
            super::job::GpuAsk::None => {
                let affinity = self.pod_affinity(task);
                let preferred = self.preferred_pod_affinity(task);
                let mut facts = self.task_facts(job, task, None);
                facts.pod_affinity = affinity.as_ref();
                facts.preferred_pod_affinity = preferred.as_ref();
                super::plain_choice::choose_plain_node(
                    &self.state.nodes,
                    within,
                    &facts,
                    &crate::placement::resource_fit::pod_footprint(&task.pod),
                    &self.tiers,
                )
                .map(Some)
                .map_err(|failed| {
                    if failed.is_empty() {
                        "no node is known yet".to_string()
                    } else {
                        summarise_node_reasons(&failed)
                    }
                })
            }
            super::job::GpuAsk::Invalid(e) => Err(format!("invalid request: {e}")),
            super::job::GpuAsk::Vgpu(ctx) => {
                let affinity = self.pod_affinity(task);
                let preferred = self.preferred_pod_affinity(task);
                let mut facts = self.task_facts(job, task, Some(&**ctx));
                facts.pod_affinity = affinity.as_ref();
                facts.preferred_pod_affinity = preferred.as_ref();
                let chosen = match within {
                    None => choose_node(&self.state.nodes, ctx, &facts, &self.tiers),
                    Some(positions) => choose_node(
                        &NodeSubset::new(&self.state.nodes, positions),
                        ctx,
                        &facts,
                        &self.tiers,
                    ),
                };
                chosen
                    .map(Some)
                    .map_err(|failed| summarise_node_reasons(&failed))
            }
        }
    }

    /// Whether the plugins' predicates let the task onto `node` (preemption and
    /// reclaim pick their node themselves, but only among the nodes the task may
    /// use at all).
    pub fn node_allowed(&self, job: &GangKey, uid: &str, node: &str) -> Result<(), String> {
        self.node_allowed_once_gone(job, uid, node, &std::collections::BTreeSet::new())
    }

    /// [`Self::node_allowed`] once the tasks in `gone` have left: their pods no
    /// longer count for inter-pod affinity (a dry run of preemption asks whether
    /// evicting them lets the task in).
    pub fn node_allowed_once_gone(
        &self,
        job: &GangKey,
        uid: &str,
        node: &str,
        gone: &std::collections::BTreeSet<String>,
    ) -> Result<(), String> {
        if !self.tiers.filters() {
            return Ok(());
        }
        let task = self
            .state
            .task(job, uid)
            .ok_or_else(|| format!("task {uid} is not in job {job}"))?;
        let ctx = match &task.gpu {
            super::job::GpuAsk::Vgpu(ctx) => Some(&**ctx),
            _ => None,
        };
        let affinity = super::pod_affinity_view::inter_pod_affinity_once_gone(
            &self.state,
            self.term_holders(),
            task,
            gone,
        );
        let mut facts = self.task_facts(job, task, ctx);
        facts.pod_affinity = affinity.as_ref();
        let nodes = &self.state.nodes;
        // Room is being made: what the node's pods request now is not what it will
        // hold once the victims are gone, so CPU and memory are not judged here
        // (kube-scheduler judges them when the pod is released).
        let freed = crate::resources::Resources::new();
        match nodes.position(node).and_then(|i| nodes.facts(i)) {
            Some(mut node) => {
                node.requested = &freed;
                self.tiers.predicate(&facts, &node)
            }
            // Nothing to judge: the fit refuses a node the session does not have.
            None => Ok(()),
        }
    }

    /// The task's inter-pod affinity check, when a predicate may read it.
    fn pod_affinity(
        &self,
        task: &TaskInfo,
    ) -> Option<crate::placement::pod_affinity::InterPodAffinity> {
        if !self.tiers.filters() {
            return None;
        }
        super::pod_affinity_view::inter_pod_affinity(&self.state, self.term_holders(), task)
    }

    /// The task's preferred inter-pod affinity scores, when a plugin weighs them.
    fn preferred_pod_affinity(
        &self,
        task: &TaskInfo,
    ) -> Option<crate::placement::preferred_pod_affinity::PreferredPodAffinity> {
        use crate::placement::NodeJudge;
        if self.tiers.pod_affinity_weight() <= 0.0 {
            return None;
        }
        super::pod_affinity_view::preferred_pod_affinity(&self.state, self.term_holders(), task)
    }

    /// The tasks whose pods carry inter-pod affinity terms, found once per
    /// session (from the kept ones when a session left them).
    pub(crate) fn term_holders(&self) -> &TermHolders {
        self.term_holders
            .get_or_init(|| TermHolders::of(&self.state))
    }

    /// What the plugins see of a task when they judge nodes for it.
    fn task_facts<'a>(
        &'a self,
        job: &GangKey,
        task: &'a TaskInfo,
        gpu: Option<&'a crate::fit::PodContext>,
    ) -> TaskFacts<'a> {
        TaskFacts {
            namespace: &task.namespace,
            name: &task.name,
            gpu,
            resreq: &task.resreq,
            pod: Some(&task.pod),
            queue: self.state.job(job).map(|j| j.queue.as_str()),
            dims: &self.state.dims,
            pod_affinity: None,
            preferred_pod_affinity: None,
        }
    }

    /// What the task would be charged placed by `choice` (its request without one).
    pub fn charge_for(&self, task: &TaskInfo, choice: Option<&Choice>) -> Charge {
        match (choice, &task.gpu) {
            (Some(c), super::job::GpuAsk::Vgpu(ctx)) => {
                let node = self.state.nodes.get(&c.node).map(|n| &*n.gpus);
                let (vgpu, cards) = placement_charge(
                    &self.state.dims,
                    node,
                    &c.placement.devices,
                    ctx.request.init_count,
                    Some(ctx),
                );
                let mut r = task.requests.clone();
                r.add(&vgpu);
                (r, cards)
            }
            _ => (task.resreq.clone(), task.cards.clone()),
        }
    }

    /// Whether the task, charged `charge`, may be placed in its queue: the queue is
    /// Open and every plugin agrees.
    pub fn allocatable(&self, job: &GangKey, uid: &str, charge: &Charge) -> Result<(), Rejection> {
        let Some(j) = self.state.job(job) else {
            return Ok(());
        };
        let Some(task) = j.tasks.iter().find(|t| t.uid == uid) else {
            return Ok(());
        };
        self.queue_open(&j.queue, "allocate")?;
        let queue = self
            .state
            .queue(&j.queue)
            .ok_or_else(|| Rejection::unknown_queue(&j.queue))?;
        let mut charged = task.clone();
        charged.resreq = charge.0.clone();
        charged.cards = charge.1.clone();
        self.tiers.allocatable(&self.state, queue, &charged)
    }

    /// Records why a job waits (the last note wins).
    pub fn note_job(
        &mut self,
        job: &GangKey,
        phase: Option<GangPhase>,
        reason: &'static str,
        message: String,
    ) {
        self.notes.insert(
            job.clone(),
            JobNote {
                phase,
                reason,
                message,
            },
        );
    }

    /// Whether a job has a note already.
    pub fn has_note(&self, job: &GangKey) -> bool {
        self.notes.contains_key(job)
    }

    /// The jobs noted so far, in key order.
    pub(crate) fn noted_jobs(&self) -> impl Iterator<Item = &GangKey> {
        self.notes.keys()
    }

    /// The jobs not settled as the session opened (see [`UnsettledJobs`]).
    pub(crate) fn unsettled_jobs(&self) -> &UnsettledJobs {
        &self.memory.unsettled
    }

    /// Forgets why a job waited (it was placed).
    pub fn clear_note(&mut self, job: &GangKey) {
        self.notes.remove(job);
    }

    /// Places (or pipelines) a task and charges its queue; returns what a statement
    /// needs to take it back.
    pub(crate) fn apply_allocate(
        &mut self,
        job: &GangKey,
        uid: &str,
        choice: Option<&Choice>,
        charge: Charge,
        status: TaskStatus,
    ) -> Option<(TaskBefore, Option<PlacedUsage>)> {
        let j = self.state.jobs.get_mut(job).map(Arc::make_mut)?;
        let queue = j.queue.clone();
        let i = j.task_index(uid)?;
        let task = &mut j.tasks[i];
        let before = TaskBefore {
            status: task.status,
            resreq: task.resreq.clone(),
            cards: task.cards.clone(),
            placement: task.placement.clone(),
        };
        let init_count = match &task.gpu {
            super::job::GpuAsk::Vgpu(ctx) => ctx.request.init_count,
            _ => 0,
        };
        task.status = status;
        task.resreq = charge.0;
        task.cards = charge.1;
        task.placement = choice.map(|c| TaskPlacement {
            node: c.node.clone(),
            devices: c.placement.devices.clone(),
            init_count,
        });
        let (resreq, cards, namespace, footprint) = (
            task.resreq.clone(),
            task.cards.clone(),
            task.namespace.clone(),
            crate::placement::resource_fit::pod_footprint(&task.pod),
        );
        j.allocated.add(&resreq);
        j.allocated.prune_zeros();
        if let Some(q) = self.state.queues.get_mut(&queue) {
            q.allocated.add(&resreq);
            q.allocated.prune_zeros();
            add_cards(&mut q.cards, &cards);
        }
        let placed = choice.and_then(|c| {
            self.state.nodes.place(
                &namespace,
                &c.node,
                &c.placement.devices,
                init_count,
                &footprint,
            )
        });
        self.fire(job, uid, &queue, true);
        Some((before, placed))
    }

    /// Takes back an [`Self::apply_allocate`]. Plugins hear of it once the task is
    /// back as it was, with the charge that is taken back.
    pub(crate) fn undo_allocate(
        &mut self,
        job: &GangKey,
        uid: &str,
        before: TaskBefore,
        placed: Option<&PlacedUsage>,
    ) {
        if let Some(p) = placed {
            self.state.nodes.unplace(p);
        }
        let Some(j) = self.state.jobs.get_mut(job).map(Arc::make_mut) else {
            return;
        };
        let queue = j.queue.clone();
        let Some(i) = j.task_index(uid) else {
            return;
        };
        let charged = j.tasks[i].clone();
        let task = &mut j.tasks[i];
        task.status = before.status;
        task.resreq = before.resreq;
        task.cards = before.cards;
        task.placement = before.placement;
        j.allocated.saturating_sub(&charged.resreq);
        j.allocated.prune_zeros();
        if let Some(q) = self.state.queues.get_mut(&queue) {
            q.allocated.saturating_sub(&charged.resreq);
            q.allocated.prune_zeros();
            sub_cards(&mut q.cards, &charged.cards);
        }
        let event = TaskEvent {
            task: &charged,
            queue: &queue,
        };
        self.tiers.on_deallocate(&self.state, &event);
    }

    /// Takes a task pipelined earlier in this session back to waiting (Volcano's
    /// unpipeline): it gives up its node and its queue's charge, and its placement
    /// leaves the committed decisions (the evictions made for it stay). Backfill
    /// does this with best-effort tasks, which need not wait for anyone to leave.
    /// Only for tasks charged their own request (no vGPU): false otherwise, or
    /// when the task is not pipelined.
    pub(crate) fn unpipeline(&mut self, job: &GangKey, uid: &str) -> bool {
        let Some(task) = self.state.task(job, uid) else {
            return false;
        };
        if task.status != TaskStatus::Pipelined || !matches!(task.gpu, super::job::GpuAsk::None) {
            return false;
        }
        let before = TaskBefore {
            status: TaskStatus::Pending,
            resreq: task.resreq.clone(),
            cards: task.cards.clone(),
            placement: None,
        };
        let placed = task.placement.as_ref().and_then(|p| {
            self.state.nodes.placed_usage(
                &task.namespace,
                &p.node,
                &p.devices,
                p.init_count,
                &crate::placement::resource_fit::pod_footprint(&task.pod),
            )
        });
        self.undo_allocate(job, uid, before, placed.as_ref());
        for commit in self.commits.iter_mut().filter(|c| &c.gang == job) {
            commit.members.retain(|m| m.uid != uid);
        }
        self.commits
            .retain(|c| !c.members.is_empty() || !c.evictions.is_empty());
        true
    }

    /// Marks a running task as being evicted: its queue is no longer charged for it
    /// and its GPUs count as free for pipelining.
    pub(crate) fn apply_evict(
        &mut self,
        job: &GangKey,
        uid: &str,
    ) -> Option<(TaskBefore, Option<PlacedUsage>)> {
        let queue = self.state.job(job)?.queue.clone();
        let before = {
            let task = self.state.task(job, uid)?;
            TaskBefore {
                status: task.status,
                resreq: task.resreq.clone(),
                cards: task.cards.clone(),
                placement: task.placement.clone(),
            }
        };
        self.fire(job, uid, &queue, false);
        let released = before.placement.as_ref().and_then(|p| {
            let task = self.state.task(job, uid)?;
            let namespace = task.namespace.clone();
            let footprint = crate::placement::resource_fit::pod_footprint(&task.pod);
            self.state
                .nodes
                .release(&namespace, &p.node, &p.devices, p.init_count, &footprint)
        });
        self.evicted.insert(uid.to_string());
        let j = self.state.jobs.get_mut(job).map(Arc::make_mut)?;
        let i = j.task_index(uid)?;
        j.tasks[i].status = TaskStatus::Releasing;
        j.allocated.saturating_sub(&before.resreq);
        j.allocated.prune_zeros();
        if let Some(q) = self.state.queues.get_mut(&queue) {
            q.allocated.saturating_sub(&before.resreq);
            q.allocated.prune_zeros();
            sub_cards(&mut q.cards, &before.cards);
        }
        Some((before, released))
    }

    /// Takes back an [`Self::apply_evict`].
    pub(crate) fn undo_evict(
        &mut self,
        job: &GangKey,
        uid: &str,
        before: TaskBefore,
        released: Option<&PlacedUsage>,
    ) {
        if let Some(r) = released {
            self.state.nodes.unrelease(r);
        }
        self.evicted.remove(uid);
        let Some(j) = self.state.jobs.get_mut(job).map(Arc::make_mut) else {
            return;
        };
        let queue = j.queue.clone();
        let Some(i) = j.task_index(uid) else {
            return;
        };
        j.tasks[i].status = before.status;
        j.allocated.add(&before.resreq);
        j.allocated.prune_zeros();
        if let Some(q) = self.state.queues.get_mut(&queue) {
            q.allocated.add(&before.resreq);
            q.allocated.prune_zeros();
            add_cards(&mut q.cards, &before.cards);
        }
        self.fire(job, uid, &queue, true);
    }

    fn fire(&mut self, job: &GangKey, uid: &str, queue: &str, allocate: bool) {
        let Some(task) = self.state.task(job, uid) else {
            return;
        };
        let event = TaskEvent { task, queue };
        if allocate {
            self.tiers.on_allocate(&self.state, &event);
        } else {
            self.tiers.on_deallocate(&self.state, &event);
        }
    }

    /// Records the placements of a committed statement.
    pub(crate) fn record_commit(&mut self, job: &GangKey, uid: &str, pipelined: bool) {
        let Some(j) = self.state.job(job) else {
            return;
        };
        let Some(t) = j.tasks.iter().find(|t| t.uid == uid) else {
            return;
        };
        let planned = PlannedTask {
            uid: t.uid.clone(),
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            gated: t.gated,
            placement: t.placement.clone(),
            pipelined,
        };
        match self.commits.last_mut() {
            Some(c) if &c.gang == job => c.members.push(planned),
            _ => self.commits.push(JobCommit {
                gang: job.clone(),
                queue: j.queue.clone(),
                members: vec![planned],
                evictions: Vec::new(),
            }),
        }
    }

    /// Records an eviction of a committed statement, with the placements of the
    /// same statement (the last commit recorded).
    pub(crate) fn record_eviction(
        &mut self,
        job: &GangKey,
        uid: &str,
        action: EvictAction,
        reason: String,
    ) {
        let Some(j) = self.state.job(job) else {
            return;
        };
        let Some(t) = j.tasks.iter().find(|t| t.uid == uid) else {
            return;
        };
        let eviction = Eviction {
            uid: t.uid.clone(),
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            job: job.clone(),
            queue: j.queue.clone(),
            node: t.placement.as_ref().map(|p| p.node.clone()),
            service_type: j.service_type.clone(),
            action,
            reason,
        };
        if let Some(commit) = self.commits.last_mut() {
            commit.evictions.push(eviction);
        }
    }

    /// Closes the session: every job's standing and every queue's report.
    pub fn close(self) -> SessionOutcome {
        self.close_keeping().0
    }

    /// Closes the session, and keeps what the next session over the same
    /// cluster may use: the plugins' figures as they opened, and every job's
    /// verdict (built again only for the jobs that changed since the last
    /// session closed, or whose note did; the others are the last session's,
    /// shared with it and with the outcome rather than copied).
    pub fn close_keeping(mut self) -> (SessionOutcome, SessionMemory) {
        let mut memory = std::mem::take(&mut self.memory);
        memory.from_session = true;
        memory.keep_plugins(self.tiers.keep());
        let noted_otherwise = notes_changed(&memory.notes, &self.notes);
        memory.verdicts.follow(
            &self.state.jobs,
            noted_otherwise,
            |job| std::sync::Arc::new(self.verdict(job)),
            |_, _| {},
        );
        memory.notes = std::mem::take(&mut self.notes);
        let verdicts = memory.verdicts.figures().clone();
        let queues = self.state.queues.values().map(|q| self.report(q)).collect();
        let node_generations = self
            .commits
            .iter()
            .flat_map(|c| &c.members)
            .filter_map(|m| m.placement.as_ref())
            .filter_map(|p| {
                let node = self.state.nodes.get(&p.node)?;
                Some((p.node.clone(), node.gpus.generation))
            })
            .collect();
        let outcome = SessionOutcome {
            commits: self.commits,
            verdicts,
            enqueued: self.enqueued,
            queues,
            node_generations,
        };
        (outcome, memory)
    }

    /// Every queue's report now, in name order.
    pub fn queue_reports(&self) -> Vec<QueueReport> {
        self.state.queues.values().map(|q| self.report(q)).collect()
    }

    fn verdict(&self, job: &JobInfo) -> GangVerdict {
        let c = job.counts();
        let releasing =
            !job.reaches_minimum(c.ready, &c.ready_roles) && job.holds_minimum_while_releasing();
        let phase = if job.is_completed() {
            GangPhase::Completed
        } else if releasing {
            GangPhase::Running
        } else if let Some(phase) = self.notes.get(&job.key).and_then(|n| n.phase) {
            phase
        } else if job.reaches_minimum(c.ready, &c.ready_roles) {
            GangPhase::Running
        } else if job.inqueue {
            GangPhase::Inqueue
        } else {
            GangPhase::Pending
        };
        let note = (phase != GangPhase::Completed && !releasing)
            .then(|| self.notes.get(&job.key))
            .flatten();
        GangVerdict {
            gang: format!("{}/{}", job.key.namespace, job.key.name),
            single: job.key.single,
            queue: job.queue.clone(),
            phase,
            min_member: job.min_member,
            members: job.tasks.len(),
            ready: c.ready,
            running: c.running,
            succeeded: c.succeeded,
            failed: c.failed,
            reason: note.map(|n| n.reason),
            message: note.map(|n| n.message.clone()),
            api: None,
            workload: None,
            disruption_mode: None,
        }
    }

    fn report(&self, q: &QueueInfo) -> QueueReport {
        let mut report = QueueReport {
            name: q.spec.name.clone(),
            state: q.spec.state,
            state_reason: None,
            weight: q.spec.weight,
            priority: q.spec.priority,
            parent: q.spec.parent.clone(),
            reclaimable: q.spec.reclaimable,
            leaf: true,
            guarantee: q.spec.guarantee.clone(),
            capability: q.spec.capability.clone(),
            real_capability: None,
            deserved: None,
            allocated: q.allocated.clone(),
            request: q.request.clone(),
            inqueue: q.inqueue.clone(),
            elastic: q.elastic.clone(),
            share: 0.0,
            overused: self.tiers.overused(&self.state, q),
            card_quota: q.spec.card_quota.clone(),
            card_used: BTreeMap::new(),
            cards_allocated: q.cards.clone(),
        };
        self.tiers.describe_queue(&self.state, q, &mut report);
        report.card_used = use_by_quota_key(&report.card_quota, &report.cards_allocated);
        report
    }
}

/// The jobs whose note is not the one they had before: one walk over both
/// notes side by side, both in key order.
fn notes_changed<'n>(
    before: &'n BTreeMap<GangKey, JobNote>,
    now: &'n BTreeMap<GangKey, JobNote>,
) -> Vec<&'n GangKey> {
    let mut changed = Vec::new();
    let mut before = before.iter().peekable();
    for (key, note) in now {
        while let Some((gone, _)) = before.next_if(|(k, _)| *k < key) {
            changed.push(gone);
        }
        match before.next_if(|(k, _)| *k == key) {
            Some((_, last)) if last == note => {}
            _ => changed.push(key),
        }
    }
    changed.extend(before.map(|(k, _)| k));
    changed
}

/// `did not fit any node (5 nodes CardInsufficientMemory, 1 node NodeUnfitPod)`,
/// most frequent reason first (low cardinality: no node names).
pub fn summarise_node_reasons(failed: &NodeRejections) -> String {
    if failed.is_empty() {
        return "no node has registered GPUs".into();
    }
    let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
    for reason in failed.values() {
        *by_reason.entry(reason.to_string()).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = by_reason.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let parts: Vec<String> = v
        .iter()
        .map(|(r, n)| format!("{n} node{} {r}", if *n == 1 { "" } else { "s" }))
        .collect();
    format!("did not fit any node ({})", parts.join(", "))
}
