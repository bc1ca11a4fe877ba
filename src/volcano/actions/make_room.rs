//! Making room for one waiting task by evicting others (the heart of preempt and
//! reclaim): on each node that holds candidates, ask the plugins which may go, keep
//! only gang-safe victims, evict the least important first until the task fits
//! the node as it will be once they are gone, and pipeline it there. The node that
//! needs the fewest evictions wins.

use crate::fit::{FitRequest, Placement};
use crate::placement::Choice;
use crate::placement::resource_fit::pod_footprint;
use crate::resources::Resources;
use crate::usage::{GpuUsage, collapse_pod_usage};
use crate::volcano::framework::charge::Charge;
use crate::volcano::framework::job::GpuAsk;
use crate::volcano::framework::outcome::EvictAction;
use crate::volcano::framework::victims::{
    Budgets, Importance, evictable, take_with, victim_key, with_whole_gangs,
};
use crate::volcano::framework::{GangKey, Session, Statement, TaskInfo};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Whose tasks may make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Tasks of reclaimable queues other than the preemptor's (reclaim).
    OtherQueues,
    /// Tasks of other jobs in the preemptor's queue (preempt).
    OtherJobsOfQueue,
    /// Lower-priority tasks of the preemptor's own job (preempt).
    OwnJob,
}

/// What was done for the task.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Room {
    /// It fits as things are: placed without evicting anyone.
    Placed,
    /// Victims evicted; the task is pipelined onto this node.
    Pipelined { node: String, victims: usize },
}

/// What the task needs of a node: GPUs (the GPU fit decides), or only what it
/// requests (the resource fit decides).
enum Want<'a> {
    Gpus(FitRequest<'a>),
    Requests(Resources),
}

impl<'a> Want<'a> {
    fn of(session: &'a Session, task: &'a TaskInfo) -> Result<Self, String> {
        match &task.gpu {
            GpuAsk::Vgpu(ctx) => Ok(Want::Gpus(FitRequest {
                request: &ctx.request,
                policies: &ctx.policies,
                selectors: &ctx.selectors,
                quota: crate::placement::NodeSource::quota(&session.state.nodes, &ctx.namespace),
            })),
            GpuAsk::None => Ok(Want::Requests(pod_footprint(&task.pod))),
            GpuAsk::Invalid(e) => Err(format!("invalid request: {e}")),
        }
    }

    /// Whether evicting `victim` frees anything this need counts: a pod holding
    /// no GPU frees nothing for a vGPU task (its CPU and memory are
    /// kube-scheduler's to judge there), so it is never evicted for one.
    fn freed_by(&self, victim: &TaskInfo) -> bool {
        match self {
            Want::Gpus(_) => victim.placement.as_ref().is_some_and(|p| !p.without_gpus()),
            Want::Requests(_) => true,
        }
    }

    /// The placement on `node` once what the session evicts, and `released`
    /// besides, is gone.
    fn fit_future(
        &self,
        session: &Session,
        node: &str,
        released: &Released,
    ) -> Result<Placement, String> {
        let nodes = &session.state.nodes;
        match self {
            Want::Gpus(request) => nodes
                .fit_future(node, &released.gpus, request)
                .map_err(|e| e.to_string()),
            Want::Requests(footprint) => nodes
                .fit_requests(node, Some(&released.requests), footprint)
                .map(|()| Placement {
                    devices: Vec::new(),
                    node_score: 0.0,
                }),
        }
    }
}

/// What the victims chosen so far free on one node.
#[derive(Default)]
struct Released {
    gpus: Vec<(Arc<str>, GpuUsage)>,
    requests: Resources,
}

/// One node's plan: the units to evict, in order, and the units that may still
/// go after them (least important first) should the preemptor's queue need more
/// room than the node does.
struct NodePlan {
    node: String,
    units: Vec<VictimUnit>,
    spare: Vec<VictimUnit>,
    evicted: usize,
}

/// Makes room for task `uid` of `job` within `scope`, inside `statement`.
///
/// Preempting within a queue (`OtherJobsOfQueue`, `OwnJob`) asks the queue too, as
/// Volcano's preemptor-fits check does: a task that fits a node as it stands but
/// would take its queue past what its plugins allow (proportion's deserved share,
/// capacity's real capability) is not placed; its queue's own tasks are evicted
/// until both the node and the queue have room. Reclaim asked the queue's
/// `preemptive` before calling.
pub(crate) fn make_room(
    session: &mut Session,
    statement: &mut Statement,
    job: &GangKey,
    uid: &str,
    scope: Scope,
) -> Result<Room, String> {
    if let Some(room) = room_without_evicting(session, statement, job, uid, scope)? {
        return Ok(room);
    }
    let asks_queue = scope != Scope::OtherQueues;
    let plans = node_plans(session, job, uid, scope)?;
    let (action, reason) = eviction_reason(session, job, uid, scope);
    // Nodes in order of cost, as Volcano tries its nodes one after another: a node
    // whose evictions still leave the queue without room is given up for the next.
    let mut why = String::new();
    for plan in plans {
        match room_on(session, job, uid, &plan, asks_queue, action, &reason) {
            Ok(on_node) => {
                statement.merge(on_node.statement);
                return Ok(Room::Pipelined {
                    node: plan.node,
                    victims: on_node.victims,
                });
            }
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// Places the task without evicting anyone when it can be: it fits a node as
/// things are, or what this session's evictions already free. Preempting within
/// a queue asks the queue too (see [`make_room`]). `None`: somebody must leave.
pub(crate) fn room_without_evicting(
    session: &mut Session,
    statement: &mut Statement,
    job: &GangKey,
    uid: &str,
    scope: Scope,
) -> Result<Option<Room>, String> {
    let asks_queue = scope != Scope::OtherQueues;
    let queue_takes = |session: &Session, charge: &Charge| {
        !asks_queue || session.allocatable(job, uid, charge).is_ok()
    };
    // A task that fits as things are needs nobody to leave.
    if let Ok(choice) = session.choose_node(job, uid) {
        let Some(task) = session.state.task(job, uid) else {
            return Err("task is gone".into());
        };
        let charge = session.charge_for(task, choice.as_ref());
        if queue_takes(session, &charge) {
            statement.allocate(session, job, uid, choice.as_ref(), charge);
            return Ok(Some(Room::Placed));
        }
    }
    // Nor does one that fits what this session's evictions already free.
    if let Some(choice) = fits_what_is_freed(session, job, uid) {
        let Some(task) = session.state.task(job, uid) else {
            return Err("task is gone".into());
        };
        let charge = session.charge_for(task, Some(&choice));
        if queue_takes(session, &charge) {
            let node = choice.node.clone();
            statement.pipeline(session, job, uid, Some(&choice), charge);
            return Ok(Some(Room::Pipelined { node, victims: 0 }));
        }
    }
    Ok(None)
}

/// How evictions for the task are recorded: as preemption or reclaim, and the
/// reason its victims are given (which pod of which queue they make room for).
pub(crate) fn eviction_reason(
    session: &Session,
    job: &GangKey,
    uid: &str,
    scope: Scope,
) -> (EvictAction, String) {
    let action = match scope {
        Scope::OtherQueues => EvictAction::Reclaim,
        _ => EvictAction::Preempt,
    };
    let task = session.state.task(job, uid);
    let queue = session
        .state
        .job(job)
        .map(|j| j.queue.clone())
        .unwrap_or_default();
    let reason = format!(
        "{} for pod {}/{} of queue {queue:?}",
        action.verb(),
        task.map_or("", |t| t.namespace.as_str()),
        task.map_or(uid, |t| t.name.as_str()),
    );
    (action, reason)
}

/// The evictions that made room on one node, with the task pipelined there.
struct OnNode {
    statement: Statement,
    victims: usize,
}

/// Evicts `plan`'s victims (and spare ones while the queue still has no room) and
/// pipelines the task on its node, in a statement of its own; nothing is left
/// evicted when the node does not work out.
fn room_on(
    session: &mut Session,
    job: &GangKey,
    uid: &str,
    plan: &NodePlan,
    asks_queue: bool,
    action: EvictAction,
    reason: &str,
) -> Result<OnNode, String> {
    let mut on_node = Statement::new();
    let evict = |session: &mut Session, on_node: &mut Statement, unit: &[(GangKey, String)]| {
        for (victim_job, victim) in unit {
            on_node.evict(session, victim_job, victim, action, reason.to_string());
        }
    };
    for unit in &plan.units {
        evict(session, &mut on_node, unit);
    }
    let choice = match future_choice(session, job, uid, &plan.node) {
        Ok(choice) => choice,
        Err(e) => {
            on_node.discard(session);
            return Err(e);
        }
    };
    let Some(task) = session.state.task(job, uid) else {
        on_node.discard(session);
        return Err("task is gone".into());
    };
    let charge = session.charge_for(task, Some(&choice));
    let mut victims = plan.evicted;
    let mut spare = plan.spare.iter();
    while asks_queue && let Err(refusal) = session.allocatable(job, uid, &charge) {
        let Some(unit) = spare.next() else {
            on_node.discard(session);
            return Err(format!("its queue has no room for it: {refusal}"));
        };
        evict(session, &mut on_node, unit);
        victims += unit.len();
    }
    on_node.pipeline(session, job, uid, Some(&choice), charge);
    Ok(OnNode {
        statement: on_node,
        victims,
    })
}

/// Where the task goes on `node` once what is being evicted there is gone.
pub(crate) fn future_choice(
    session: &Session,
    job: &GangKey,
    uid: &str,
    node: &str,
) -> Result<Choice, String> {
    let task = session
        .state
        .task(job, uid)
        .ok_or_else(|| "task is gone".to_string())?;
    let placement = Want::of(session, task)?.fit_future(session, node, &Released::default())?;
    Ok(Choice {
        node: node.to_string(),
        placement,
        rank: 0.0,
    })
}

/// The first node (by name) on which the task fits once what this session evicts
/// is gone.
fn fits_what_is_freed(session: &Session, job: &GangKey, uid: &str) -> Option<Choice> {
    fits_freed_where(session, job, uid, |_| true)
}

/// The first node (by name) that `keep` accepts and on which the task fits once
/// what this session evicts is gone (the gang eviction actions look only inside
/// one HyperNode).
pub(crate) fn fits_freed_where(
    session: &Session,
    job: &GangKey,
    uid: &str,
    keep: impl Fn(&str) -> bool,
) -> Option<Choice> {
    let task = session.state.task(job, uid)?;
    let want = Want::of(session, task).ok()?;
    session
        .state
        .nodes
        .releasing_nodes()
        .filter(|n| keep(n))
        .find_map(|node| {
            session.node_allowed(job, uid, node).ok()?;
            let placement = want.fit_future(session, node, &Released::default()).ok()?;
            Some(Choice {
                node: node.to_string(),
                placement,
                rank: 0.0,
            })
        })
}

/// A unit of victims: tasks that leave together (a victim alone, or the rest of
/// a gang it would take below its minimum), as (job, task uid).
pub(crate) type VictimUnit = Vec<(GangKey, String)>;

/// Every node where evictions let the task fit, the fewest evictions first (ties:
/// the less important victims, then the node's name).
fn node_plans(
    session: &Session,
    job: &GangKey,
    uid: &str,
    scope: Scope,
) -> Result<Vec<NodePlan>, String> {
    let state = &session.state;
    let task = state.task(job, uid).ok_or("task is gone")?;
    let want = Want::of(session, task)?;
    let mut plans: Vec<((usize, Importance), NodePlan)> = Vec::new();
    let mut why = "no running task may make room for it".to_string();
    for (node, candidates) in candidates_by_node(session, job, uid, scope)? {
        // Evicting anyone from a node the task may not use frees nothing for it.
        if let Err(e) = session.node_allowed(job, uid, node) {
            why = e;
            continue;
        }
        // Victims unit by unit, least important first, until the task fits; the
        // rest may still go should its queue need more room than the node does.
        let mut released = Released::default();
        let mut units: Vec<VictimUnit> = Vec::new();
        let mut spare: Vec<VictimUnit> = Vec::new();
        let mut evicted = 0usize;
        let mut fits = false;
        let mut weightiest: Option<Importance> = None;
        for unit in victim_units(session, job, uid, scope, candidates) {
            let keys = unit
                .iter()
                .map(|t| (t.job.clone(), t.uid.clone()))
                .collect();
            if fits {
                spare.push(keys);
                continue;
            }
            let (key, _) = victim_key(state, &unit);
            weightiest = Some(weightiest.map_or(key, |w| w.max(key)));
            for t in &unit {
                if let Some(p) = t.placement.as_ref().filter(|p| p.node == node) {
                    released
                        .gpus
                        .extend(collapse_pod_usage(&p.devices, p.init_count));
                    released.requests.add(&pod_footprint(&t.pod));
                }
            }
            evicted += unit.len();
            units.push(keys);
            match want.fit_future(session, node, &released) {
                Ok(_) => fits = true,
                Err(e) => why = format!("evicting every allowed task still leaves: {e}"),
            }
        }
        if !fits {
            continue;
        }
        let cost = (evicted, weightiest.unwrap_or_default());
        plans.push((
            cost,
            NodePlan {
                node: node.to_string(),
                units,
                spare,
                evicted,
            },
        ));
    }
    if plans.is_empty() {
        return Err(why);
    }
    // Nodes come by name; a stable sort keeps the name as the last tie-break.
    plans.sort_by_key(|(a, _)| *a);
    Ok(plans.into_iter().map(|(_, plan)| plan).collect())
}

/// The tasks that may be considered for making room for task `uid`, by node:
/// within `scope`, evictable, freeing something the task needs, and (within its
/// own job) of lower priority than it.
pub(crate) fn candidates_by_node<'s>(
    session: &'s Session,
    job: &GangKey,
    uid: &str,
    scope: Scope,
) -> Result<BTreeMap<&'s str, Vec<&'s TaskInfo>>, String> {
    let state = &session.state;
    let task = state.task(job, uid).ok_or("task is gone")?;
    let want = Want::of(session, task)?;
    let Some(preemptor_job) = state.job(job) else {
        return Err("job is gone".into());
    };
    let mut by_node: BTreeMap<&str, Vec<&TaskInfo>> = BTreeMap::new();
    for other in state.jobs.values() {
        let in_scope = match scope {
            Scope::OtherQueues => {
                other.queue != preemptor_job.queue
                    && state
                        .queue(&other.queue)
                        .is_some_and(|q| q.spec.reclaimable)
            }
            Scope::OtherJobsOfQueue => other.queue == preemptor_job.queue && other.key != *job,
            Scope::OwnJob => other.key == *job,
        };
        if !in_scope {
            continue;
        }
        for t in other
            .tasks
            .iter()
            .filter(|t| evictable(session.tiers(), t, state.now) && want.freed_by(t))
        {
            if scope == Scope::OwnJob && t.priority >= task.priority {
                continue;
            }
            if let Some(p) = &t.placement {
                by_node.entry(p.node.as_str()).or_default().push(t);
            }
        }
    }
    Ok(by_node)
}

/// What may leave one node for the task, as units that go together, least
/// important first: the candidates the plugins let go (`preemptable`, or
/// `reclaimable` for reclaim), a victim whose job would drop below its minimum
/// together with the rest of its job (or not at all), within what
/// PodDisruptionBudgets allow.
pub(crate) fn victim_units<'s>(
    session: &'s Session,
    job: &GangKey,
    uid: &str,
    scope: Scope,
    candidates: Vec<&'s TaskInfo>,
) -> Vec<Vec<&'s TaskInfo>> {
    let state = &session.state;
    let (Some(task), Some(preemptor_job)) = (state.task(job, uid), state.job(job)) else {
        return Vec::new();
    };
    // Victims of the queues the plugins name first go first (capacity under
    // hierarchy: the nearest queues); then the least important.
    let queue_of = |t: &TaskInfo| state.job(&t.job).map_or("", |j| j.queue.as_str());
    let victim_first = |a: &&TaskInfo, b: &&TaskInfo| {
        session
            .tiers()
            .victim_queue_order(state, queue_of(a), queue_of(b), &preemptor_job.queue)
            .then_with(|| victim_key(state, &[a]).cmp(&victim_key(state, &[b])))
    };
    // Plugins judge the candidates in the order they would go (capacity counts
    // each victim as gone before judging the next, as Volcano does).
    let mut candidates = with_whole_gangs(session.tiers(), state, candidates);
    candidates.sort_by(|a, b| victim_first(a, b));
    let allowed = match scope {
        Scope::OtherQueues => session.tiers().reclaimable(state, task, &candidates),
        _ => session.tiers().preemptable(state, task, &candidates),
    };
    let allowed_set: BTreeSet<&str> = allowed.iter().map(String::as_str).collect();
    let mut order: Vec<&TaskInfo> = allowed
        .iter()
        .filter_map(|uid| candidates.iter().find(|t| &t.uid == uid).copied())
        .collect();
    order.sort_by(|a, b| victim_first(a, b));
    let mut budgets = Budgets::new(state, session.evicted());
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut units = Vec::new();
    for victim in order {
        if taken.contains(&victim.uid) {
            continue;
        }
        let Some(unit) = take_with(state, &allowed_set, &taken, victim) else {
            continue;
        };
        if !budgets.take(&unit) {
            continue;
        }
        taken.extend(unit.iter().map(|t| t.uid.clone()));
        units.push(unit);
    }
    units
}
