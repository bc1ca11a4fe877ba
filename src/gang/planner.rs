//! One planning cycle: Volcano's enqueue and allocate actions over a snapshot of
//! the gang book and the GPU ledger. Pure: it decides, the caller writes.
//!
//! Every gang is placed inside a statement: members are placed one by one on the
//! cycle's view of the nodes and charged to their queue; the statement commits
//! only when the gang reaches its minimum (minMember, and minTaskMember per role),
//! otherwise every tentative placement is undone. A gang therefore never holds
//! GPUs while waiting for GPUs, which is what makes two gangs that each fit alone
//! but not together impossible to deadlock.

use super::book::{GangBook, GangKey, Member, MemberPhase};
use super::session_nodes::{PlacedUsage, SessionNodes};
use crate::fit::Placement;
use crate::scheduler::PodContext;
use crate::usage::collapse_pod_usage;
use crate::volcano::card_quota::{card_request, card_request_resources, card_type};
use crate::volcano::conf::{Action, SchedulerConf};
use crate::volcano::objects::{QueueSpec, QueueState};
use crate::volcano::resources::Resources;
use crate::volcano::session::{QueueInput, QueueReport, QueueSession};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The queue every cluster has, even when no Queue object says so.
pub const DEFAULT_QUEUE: &str = super::membership::DEFAULT_QUEUE;

/// Resource names the queues count vGPUs under.
#[derive(Debug, Clone)]
pub struct VgpuDims {
    /// vGPU count (`nvidia.com/gpu`).
    pub count: String,
    /// vGPU memory in MiB (`nvidia.com/gpumem`).
    pub memory: String,
    /// vGPU compute in percent (`nvidia.com/gpucores`).
    pub cores: String,
}

/// What a cycle works from.
pub struct PlanRequest<'a> {
    /// Members, PodGroups, Queues, node capacity.
    pub book: &'a GangBook,
    /// Actions and plugins in force.
    pub conf: &'a SchedulerConf,
    /// vGPU resource names.
    pub dims: &'a VgpuDims,
    /// Gangs admitted by enqueue in earlier cycles and not yet placed.
    pub inqueue: &'a BTreeSet<GangKey>,
    /// Plan only this gang, and also its members that are not gated (the
    /// `/filter` fallback for pods that reached kube-scheduler without our gate).
    pub only: Option<&'a GangKey>,
    /// Parses a pod's vGPU request (`None`: the pod asks for no vGPU).
    pub context: &'a dyn Fn(&Pod) -> Result<Option<PodContext>, String>,
}

/// One member of a committed gang.
#[derive(Debug, Clone)]
pub struct PlannedMember {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Whether it carries our gate (to lift on commit).
    pub gated: bool,
    /// Node and GPUs, for pods that ask for vGPUs.
    pub placement: Option<(String, Placement)>,
    /// Init containers in the device list.
    pub init_count: usize,
}

/// A gang the cycle placed.
#[derive(Debug, Clone)]
pub struct GangCommit {
    /// The gang.
    pub gang: GangKey,
    /// Its queue.
    pub queue: String,
    /// The members placed now.
    pub members: Vec<PlannedMember>,
}

/// A gang's phase, named as Volcano names PodGroup phases.
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

/// Where a gang stands after the cycle, and why it waits.
#[derive(Debug, Clone, Serialize)]
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
    /// The waiting message, e.g. `2/8 tasks in gang unschedulable: ...`.
    pub message: Option<String>,
}

/// What a cycle decided.
#[derive(Debug, Default)]
pub struct PlanOutcome {
    /// Gangs to commit, in decision order.
    pub commits: Vec<GangCommit>,
    /// Every gang's standing.
    pub verdicts: BTreeMap<GangKey, GangVerdict>,
    /// Gangs the enqueue action admitted in this cycle.
    pub enqueued: Vec<GangKey>,
    /// The queues after the cycle.
    pub queues: Vec<QueueReport>,
}

/// A gang assembled for one cycle.
struct Job<'b> {
    key: GangKey,
    queue: String,
    min_member: usize,
    min_roles: BTreeMap<String, usize>,
    min_resources: Option<Resources>,
    priority: i32,
    created: Option<DateTime<Utc>>,
    members: Vec<&'b Member>,
    group_missing: bool,
}

/// Counts of a job's members by standing.
#[derive(Default)]
struct Counts {
    ready: usize,
    valid: usize,
    running: usize,
    succeeded: usize,
    failed: usize,
    ready_roles: BTreeMap<String, usize>,
    valid_roles: BTreeMap<String, usize>,
}

/// Runs one cycle.
pub fn plan(req: &PlanRequest<'_>, nodes: &mut SessionNodes<'_>) -> PlanOutcome {
    let ledger = nodes.ledger();
    let jobs = assemble_jobs(req);
    let resources_of = |m: &Member| member_resources(req, ledger, m);

    // Queue inputs from what members hold and ask for.
    let mut inputs: BTreeMap<String, QueueInput> = BTreeMap::new();
    let queue_spec = |name: &str| -> Option<QueueSpec> {
        req.book.queues.get(name).cloned().or_else(|| {
            (name == DEFAULT_QUEUE && !req.book.queue_errors.contains_key(name))
                .then(|| QueueSpec::new(DEFAULT_QUEUE))
        })
    };
    for name in req
        .book
        .queues
        .keys()
        .map(String::as_str)
        .chain(std::iter::once(DEFAULT_QUEUE))
    {
        if let Some(spec) = queue_spec(name) {
            inputs
                .entry(name.to_string())
                .or_insert_with(|| QueueInput {
                    spec,
                    allocated: Resources::default(),
                    request: Resources::default(),
                    inqueue: Resources::default(),
                    elastic: Resources::default(),
                    allocated_cards: BTreeMap::new(),
                });
        }
    }
    for job in &jobs {
        let Some(input) = inputs.get_mut(&job.queue) else {
            continue;
        };
        let mut job_allocated = Resources::default();
        let mut held = 0usize;
        for m in &job.members {
            if matches!(m.phase, MemberPhase::Succeeded | MemberPhase::Failed) {
                continue;
            }
            let (r, cards) = resources_of(m);
            input.request.add(&r);
            if holds(ledger, m) {
                held += 1;
                // What a gang holds beyond its minimum is elastic: admission may
                // count it as given back (Volcano's `elastic`).
                if held > job.min_member {
                    input.elastic.add(&r);
                }
                input.allocated.add(&r);
                job_allocated.add(&r);
                for (k, v) in cards {
                    *input.allocated_cards.entry(k).or_default() += v;
                }
            }
        }
        // An admitted gang reserves what its minimum still needs beyond what it
        // already holds (Volcano's `inqueue`: minResources minus allocated).
        if req.inqueue.contains(&job.key)
            && let Some(min) = &job.min_resources
        {
            input.inqueue.add(&min.minus(&job_allocated));
        }
    }
    // Queues count every gang's holdings; only the gang asked for is planned.
    let jobs: Vec<Job<'_>> = jobs
        .into_iter()
        .filter(|j| req.only.is_none_or(|only| only == &j.key))
        .collect();
    let total = cluster_total(req, ledger);
    let mut session = QueueSession::new(req.conf, total, inputs.into_values().collect());

    let mut outcome = PlanOutcome::default();
    let enqueue_on = req.conf.has_action(Action::Enqueue);

    // Enqueue, then allocate queue by queue.
    let mut waiting: BTreeMap<String, Vec<(Job<'_>, Counts)>> = BTreeMap::new();
    for job in jobs {
        let counts = count(ledger, &job);
        let verdict_base = |phase: GangPhase| GangVerdict {
            gang: format!("{}/{}", job.key.namespace, job.key.name),
            single: job.key.single,
            queue: job.queue.clone(),
            phase,
            min_member: job.min_member,
            members: job.members.len(),
            ready: counts.ready,
            running: counts.running,
            succeeded: counts.succeeded,
            failed: counts.failed,
            reason: None,
            message: None,
        };
        if !job.members.is_empty() && counts.succeeded == job.members.len() {
            outcome
                .verdicts
                .insert(job.key.clone(), verdict_base(GangPhase::Completed));
            continue;
        }
        if job.group_missing {
            let mut v = verdict_base(GangPhase::Pending);
            v.reason = Some("NotEnoughTasks");
            v.message = Some(format!(
                "PodGroup {}/{} does not exist yet; its pods wait for it",
                job.key.namespace, job.key.name
            ));
            outcome.verdicts.insert(job.key.clone(), v);
            continue;
        }
        let ready_now = gang_ready(&job, counts.ready, &counts.ready_roles);
        if let Err(message) = gang_valid(&job, &counts) {
            let phase = if ready_now {
                GangPhase::Running
            } else {
                GangPhase::Pending
            };
            let mut v = verdict_base(phase);
            v.reason = Some("NotEnoughTasks");
            v.message = Some(message);
            outcome.verdicts.insert(job.key.clone(), v);
            continue;
        }
        let admitted =
            ready_now || counts.ready > 0 || !enqueue_on || req.inqueue.contains(&job.key);
        // Like Volcano, a PodGroup without minResources is admitted at once (the
        // allocate simulation is the real check); a plain pod is admitted against
        // its own request, as the PodGroup Volcano makes for it would be.
        let mut min = match (&job.min_resources, job.key.single) {
            (Some(min), _) => Some(min.clone()),
            (None, true) => Some(single_min_resources(&job, &resources_of)),
            (None, false) => None,
        };
        // Cards the members state with `volcano.sh/card.request` count toward
        // admission as `card/<type>` dimensions (capacity-card).
        let cards = requested_cards(&job);
        if !cards.is_empty() {
            min.get_or_insert_with(Resources::default).add(&cards);
        }
        if !admitted && let Some(min) = min {
            match session.enqueueable(&job.queue, &min) {
                Ok(()) => {
                    session.mark_inqueue(&job.queue, &min);
                    outcome.enqueued.push(job.key.clone());
                }
                Err(rejection) => {
                    let mut v = verdict_base(GangPhase::Pending);
                    v.reason = Some("NotEnoughResources");
                    v.message = Some(format!("queue admission: {rejection}"));
                    outcome.verdicts.insert(job.key.clone(), v);
                    continue;
                }
            }
        }
        let phase = if ready_now {
            GangPhase::Running
        } else {
            GangPhase::Inqueue
        };
        outcome
            .verdicts
            .insert(job.key.clone(), verdict_base(phase));
        waiting
            .entry(job.queue.clone())
            .or_default()
            .push((job, counts));
    }
    for jobs in waiting.values_mut() {
        jobs.sort_by(|(a, ca), (b, cb)| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| {
                    gang_ready(a, ca.ready, &ca.ready_roles).cmp(&gang_ready(
                        b,
                        cb.ready,
                        &cb.ready_roles,
                    ))
                })
                .then_with(|| a.created.cmp(&b.created))
                .then_with(|| a.key.cmp(&b.key))
        });
        jobs.reverse(); // popped from the back
    }

    loop {
        let next = session
            .ordered_queues()
            .into_iter()
            .find(|q| waiting.get(q).is_some_and(|j| !j.is_empty()) && !session.overused(q));
        let Some(queue) = next else {
            break;
        };
        let Some((job, counts)) = waiting.get_mut(&queue).and_then(Vec::pop) else {
            break;
        };
        let result = allocate_job(req, nodes, &mut session, &job, &counts, &resources_of);
        match result {
            Ok(commit) => {
                if let Some(v) = outcome.verdicts.get_mut(&job.key) {
                    // A commit happens only when the gang reached its minimum.
                    v.ready += commit.members.len();
                    v.phase = GangPhase::Running;
                    v.reason = None;
                    v.message = None;
                }
                if !commit.members.is_empty() {
                    outcome.commits.push(commit);
                }
            }
            Err(message) => {
                if let Some(v) = outcome.verdicts.get_mut(&job.key) {
                    v.reason = Some("NotEnoughResources");
                    v.message = Some(message);
                }
            }
        }
    }
    // Jobs of overused queues never reached allocate: say so.
    for (queue, jobs) in waiting {
        for (job, _) in jobs {
            if let Some(v) = outcome.verdicts.get_mut(&job.key)
                && v.message.is_none()
                && v.phase != GangPhase::Running
            {
                v.reason = Some("NotEnoughResources");
                v.message = Some(format!(
                    "queue {queue:?} is overused (allocated reached its deserved share)"
                ));
            }
        }
    }
    outcome.queues = session.report();
    outcome
}

/// Whether the ledger holds GPUs (or the API a node) for a member.
fn holds(ledger: &crate::ledger::Ledger, m: &Member) -> bool {
    m.phase == MemberPhase::Placed || ledger.pod(&m.uid).is_some()
}

fn assemble_jobs<'b>(req: &PlanRequest<'b>) -> Vec<Job<'b>> {
    let mut by_gang: BTreeMap<&GangKey, Vec<&'b Member>> = BTreeMap::new();
    for m in req.book.members.values() {
        by_gang.entry(&m.gang).or_default().push(m);
    }
    by_gang
        .into_iter()
        .map(|(key, mut members)| {
            members.sort_by(|a, b| super::book::member_order(a, b));
            let priority = members.iter().map(|m| m.priority).max().unwrap_or(0);
            let hint = members.iter().find_map(|m| m.queue_hint.as_deref());
            let queue = req.book.queue_of(key, hint);
            let group = (!key.single)
                .then(|| {
                    req.book
                        .groups
                        .get(&(key.namespace.clone(), key.name.clone()))
                })
                .flatten();
            let (min_member, min_roles, min_resources, created) = match group {
                Some(g) => (
                    g.min_member.max(0) as usize,
                    g.min_task_member
                        .iter()
                        .map(|(k, v)| (k.clone(), (*v).max(0) as usize))
                        .collect(),
                    g.min_resources.clone(),
                    g.creation_timestamp
                        .or_else(|| members.iter().filter_map(|m| m.created).min()),
                ),
                None => (
                    1,
                    BTreeMap::new(),
                    None,
                    members.iter().filter_map(|m| m.created).min(),
                ),
            };
            Job {
                key: key.clone(),
                queue,
                min_member,
                min_roles,
                min_resources,
                priority,
                created,
                members,
                group_missing: !key.single && group.is_none(),
            }
        })
        .collect()
}

fn count(ledger: &crate::ledger::Ledger, job: &Job<'_>) -> Counts {
    let mut c = Counts::default();
    for m in &job.members {
        let role = m.role.clone().unwrap_or_default();
        match m.phase {
            MemberPhase::Failed => {
                c.failed += 1;
                continue;
            }
            MemberPhase::Succeeded => c.succeeded += 1,
            MemberPhase::Placed => c.running += 1,
            MemberPhase::Pending => {}
        }
        if m.foreign_gates && m.phase == MemberPhase::Pending {
            // Held back by someone else's gate: it cannot start with the gang.
            continue;
        }
        c.valid += 1;
        *c.valid_roles.entry(role.clone()).or_default() += 1;
        if m.phase != MemberPhase::Pending || ledger.pod(&m.uid).is_some() {
            c.ready += 1;
            *c.ready_roles.entry(role).or_default() += 1;
        }
    }
    c
}

/// Volcano's validJobFn: enough pods exist (per role too) to ever reach minMember.
fn gang_valid(job: &Job<'_>, c: &Counts) -> Result<(), String> {
    if c.valid < job.min_member {
        return Err(format!(
            "{} of minMember {} pods exist; waiting for the rest",
            c.valid, job.min_member
        ));
    }
    let role_sum: usize = job.min_roles.values().sum();
    if job.min_member >= role_sum {
        for (role, min) in &job.min_roles {
            let have = c.valid_roles.get(role).copied().unwrap_or(0);
            if have < *min {
                return Err(format!(
                    "{have} of minTaskMember {min} pods of task {role:?} exist; waiting for the rest"
                ));
            }
        }
    }
    Ok(())
}

/// Volcano's jobReadyFn: minMember placed, and every role's minimum (skipped,
/// as `CheckTaskReady` skips it, when minMember is below the sum of the role
/// minimums).
fn gang_ready(job: &Job<'_>, ready: usize, ready_roles: &BTreeMap<String, usize>) -> bool {
    let role_sum: usize = job.min_roles.values().sum();
    ready >= job.min_member
        && (job.min_member < role_sum
            || job
                .min_roles
                .iter()
                .all(|(role, min)| ready_roles.get(role).copied().unwrap_or(0) >= *min))
}

/// A gang of one without a PodGroup is admitted against its own request.
fn single_min_resources(job: &Job<'_>, resources_of: &ChargeOf<'_>) -> Resources {
    let mut r = Resources::default();
    for m in job.members.iter().take(job.min_member.max(1)) {
        r.add(&resources_of(m).0);
    }
    r
}

/// The cards the first minMember members ask for with `volcano.sh/card.request`
/// (unreadable requests are logged and ignored).
fn requested_cards(job: &Job<'_>) -> Resources {
    let mut total = Resources::default();
    for m in job.members.iter().take(job.min_member.max(1)) {
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

/// A member's queue charge and the cards it holds.
type Charge = (Resources, BTreeMap<String, i64>);
/// How the cycle computes a member's charge.
type ChargeOf<'f> = dyn Fn(&Member) -> Charge + 'f;

/// One tentative placement, kept to undo it.
struct Tentative {
    member: PlannedMember,
    usage: Option<PlacedUsage>,
    charged: Resources,
    cards: BTreeMap<String, i64>,
}

/// Places a job's waiting members in a statement; commits when the gang is ready.
fn allocate_job(
    req: &PlanRequest<'_>,
    nodes: &mut SessionNodes<'_>,
    session: &mut QueueSession,
    job: &Job<'_>,
    counts: &Counts,
    resources_of: &ChargeOf<'_>,
) -> Result<GangCommit, String> {
    let ledger = nodes.ledger();
    let mut statement: Vec<Tentative> = Vec::new();
    let mut ready = counts.ready;
    let mut ready_roles = counts.ready_roles.clone();
    let mut unplaced: BTreeMap<String, usize> = BTreeMap::new();
    let mut waiting_members = 0usize;
    for m in &job.members {
        let plannable = m.phase == MemberPhase::Pending
            && !m.foreign_gates
            && ledger.pod(&m.uid).is_none()
            && (m.gated || req.only.is_some());
        if !plannable {
            continue;
        }
        waiting_members += 1;
        let (mut charged, _) = resources_of(m);
        let mut cards = BTreeMap::new();
        let (placement, init_count) = match (req.context)(&m.pod) {
            Err(e) => {
                *unplaced.entry(format!("invalid request: {e}")).or_default() += 1;
                continue;
            }
            Ok(None) => (None, 0),
            Ok(Some(ctx)) => match nodes.choose(&ctx) {
                Ok((node, placement)) => {
                    // Charge what the GPUs really take, not the estimate.
                    charged = m.requests.clone();
                    let (vgpu, c) =
                        placement_resources(req, ledger, &node, &placement, ctx.request.init_count);
                    charged.add(&vgpu);
                    cards = c;
                    (Some((node, placement)), ctx.request.init_count)
                }
                Err(failed) => {
                    *unplaced.entry(summarise_node_reasons(&failed)).or_default() += 1;
                    continue;
                }
            },
        };
        if let Err(rejection) = session.allocatable(&job.queue, &charged, &cards) {
            *unplaced.entry(rejection.to_string()).or_default() += 1;
            continue;
        }
        session.allocate(&job.queue, &charged, &cards);
        let usage = placement
            .as_ref()
            .map(|(node, p)| nodes.place(&m.namespace, node, &p.devices, init_count));
        ready += 1;
        *ready_roles
            .entry(m.role.clone().unwrap_or_default())
            .or_default() += 1;
        statement.push(Tentative {
            member: PlannedMember {
                uid: m.uid.clone(),
                namespace: m.namespace.clone(),
                name: m.name.clone(),
                gated: m.gated,
                placement,
                init_count,
            },
            usage,
            charged,
            cards,
        });
    }
    let already_ready = gang_ready(job, counts.ready, &counts.ready_roles);
    if already_ready || gang_ready(job, ready, &ready_roles) {
        return Ok(GangCommit {
            gang: job.key.clone(),
            queue: job.queue.clone(),
            members: statement.into_iter().map(|t| t.member).collect(),
        });
    }
    // Discard, in reverse order.
    for t in statement.into_iter().rev() {
        if let Some(u) = &t.usage {
            nodes.unplace(u);
        }
        session.deallocate(&job.queue, &t.charged, &t.cards);
    }
    let missing = job.min_member.saturating_sub(counts.ready);
    let mut message = format!(
        "{}/{} tasks in gang unschedulable",
        waiting_members
            .min(job.members.len())
            .max(missing.min(job.members.len())),
        job.members.len()
    );
    if unplaced.is_empty() {
        message.push_str(&format!(
            ": {} of minMember {} can be placed together",
            ready, job.min_member
        ));
    } else {
        let parts: Vec<String> = unplaced
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect();
        message.push_str(": ");
        message.push_str(&parts.join("; "));
    }
    Err(message)
}

/// `5 nodes CardInsufficientMemory, 1 node NodeUnfitPod` style summary, most
/// frequent first (low cardinality: no node names).
fn summarise_node_reasons(failed: &BTreeMap<String, String>) -> String {
    if failed.is_empty() {
        return "no node has registered GPUs".into();
    }
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in failed.values() {
        *by_reason.entry(reason).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = by_reason.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let parts: Vec<String> = v
        .iter()
        .map(|(r, n)| format!("{n} node{} {r}", if *n == 1 { "" } else { "s" }))
        .collect();
    format!("did not fit any node ({})", parts.join(", "))
}

/// The vGPU resources and cards a placement takes.
fn placement_resources(
    req: &PlanRequest<'_>,
    ledger: &crate::ledger::Ledger,
    node: &str,
    placement: &Placement,
    init_count: usize,
) -> (Resources, BTreeMap<String, i64>) {
    devices_resources(req, ledger, node, &placement.devices, init_count)
}

fn devices_resources(
    req: &PlanRequest<'_>,
    ledger: &crate::ledger::Ledger,
    node: &str,
    devices: &crate::device::model::PodDevices,
    init_count: usize,
) -> (Resources, BTreeMap<String, i64>) {
    let usage = collapse_pod_usage(devices, init_count);
    let mut r = Resources::default();
    let mut cards: BTreeMap<String, i64> = BTreeMap::new();
    let (mut count, mut mem, mut cores) = (0i64, 0i64, 0i64);
    let entry = ledger.node(node);
    for (uuid, u) in &usage {
        count += i64::from(u.used);
        mem += u.usedmem as i64;
        cores += i64::from(u.usedcores);
        if let Some(d) = entry.and_then(|e| e.devices.iter().find(|d| &d.id == uuid)) {
            *cards.entry(card_type(&d.model)).or_default() += 1;
        }
    }
    r.set(&req.dims.count, count * 1000);
    r.set(&req.dims.memory, mem * 1000);
    r.set(&req.dims.cores, cores * 1000);
    (r, cards)
}

/// A member's queue charge: CPU/memory requests plus its vGPUs (what it holds when
/// placed, its request otherwise), and the cards it holds.
fn member_resources(
    req: &PlanRequest<'_>,
    ledger: &crate::ledger::Ledger,
    m: &Member,
) -> (Resources, BTreeMap<String, i64>) {
    let mut r = m.requests.clone();
    if let Some(entry) = ledger.pod(&m.uid) {
        let (vgpu, cards) =
            devices_resources(req, ledger, &entry.node, &entry.devices, entry.init_count);
        r.add(&vgpu);
        return (r, cards);
    }
    if let Ok(Some(ctx)) = (req.context)(&m.pod) {
        let (mut count, mut mem, mut cores) = (0i64, 0i64, 0i64);
        for c in ctx.request.app().iter().flatten() {
            let n = i64::from(c.nums);
            count += n;
            mem += c.memreq as i64 * n;
            cores += i64::from(c.cores()) * n;
        }
        r.set(&req.dims.count, count * 1000);
        if mem > 0 {
            r.set(&req.dims.memory, mem * 1000);
        }
        if cores > 0 {
            r.set(&req.dims.cores, cores * 1000);
        }
    }
    (r, BTreeMap::new())
}

/// Everything the cluster offers: node CPU/memory plus registered vGPUs.
fn cluster_total(req: &PlanRequest<'_>, ledger: &crate::ledger::Ledger) -> Resources {
    let mut total = Resources::default();
    for r in req.book.node_allocatable.values() {
        total.add(r);
    }
    let (mut count, mut mem, mut cores) = (0i64, 0i64, 0i64);
    for entry in ledger.node_names().filter_map(|n| ledger.node(n)) {
        if entry.unusable_reason.is_some() {
            continue;
        }
        for d in &entry.devices {
            count += i64::from(d.count);
            mem += d.devmem as i64;
            cores += i64::from(d.devcore);
        }
    }
    let mut vgpu = Resources::default();
    vgpu.set(&req.dims.count, count * 1000);
    vgpu.set(&req.dims.memory, mem * 1000);
    vgpu.set(&req.dims.cores, cores * 1000);
    total.add(&vgpu);
    total
}

/// Whether a queue admits nothing at all (closed, broken), for debug output.
pub fn queue_is_open(spec: &QueueSpec) -> bool {
    spec.state == QueueState::Open
}
