//! Making room for one waiting task by evicting others (the heart of preempt and
//! reclaim): on each node that holds candidates, ask the plugins which may go, keep
//! only gang-safe victims, evict the least important first until the task fits
//! the node as it will be once they are gone, and pipeline it there. The node that
//! needs the fewest evictions wins.

use crate::fit::FitRequest;
use crate::placement::Choice;
use crate::usage::{GpuUsage, collapse_pod_usage};
use crate::volcano::framework::job::GpuAsk;
use crate::volcano::framework::victims::{
    evictable, gang_units, victim_order, with_whole_gangs, within_budgets,
};
use crate::volcano::framework::{GangKey, Session, Statement, TaskInfo};
use std::collections::BTreeMap;
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

/// One node's plan: the units to evict, in order.
struct NodePlan {
    node: String,
    units: Vec<Vec<(GangKey, String)>>,
    evicted: usize,
}

/// Makes room for task `uid` of `job` within `scope`, inside `statement`.
pub(crate) fn make_room(
    session: &mut Session,
    statement: &mut Statement,
    job: &GangKey,
    uid: &str,
    scope: Scope,
) -> Result<Room, String> {
    // A task that fits as things are needs nobody to leave.
    if let Ok(choice) = session.choose_node(job, uid) {
        let Some(task) = session.state.task(job, uid) else {
            return Err("task is gone".into());
        };
        let charge = session.charge_for(task, choice.as_ref());
        statement.allocate(session, job, uid, choice.as_ref(), charge);
        return Ok(Room::Placed);
    }
    let plan = best_node(session, job, uid, scope)?;
    let reason = {
        let task = session.state.task(job, uid);
        let queue = session
            .state
            .job(job)
            .map(|j| j.queue.clone())
            .unwrap_or_default();
        format!(
            "{} for pod {}/{} of queue {queue:?}",
            match scope {
                Scope::OtherQueues => "reclaimed",
                _ => "preempted",
            },
            task.map_or("", |t| t.namespace.as_str()),
            task.map_or(uid, |t| t.name.as_str()),
        )
    };
    for unit in &plan.units {
        for (victim_job, victim) in unit {
            statement.evict(session, victim_job, victim, reason.clone());
        }
    }
    let placement = {
        let task = session
            .state
            .task(job, uid)
            .ok_or_else(|| "task is gone".to_string())?;
        let GpuAsk::Vgpu(ctx) = &task.gpu else {
            return Err("asks for no vGPU".into());
        };
        let quota = crate::placement::NodeSource::quota(&session.state.nodes, &ctx.namespace);
        session
            .state
            .nodes
            .fit_future(
                &plan.node,
                &[],
                &FitRequest {
                    request: &ctx.request,
                    policies: &ctx.policies,
                    selectors: &ctx.selectors,
                    quota,
                },
            )
            .map_err(|e| e.to_string())?
    };
    let choice = Choice {
        node: plan.node.clone(),
        placement,
    };
    let Some(task) = session.state.task(job, uid) else {
        return Err("task is gone".into());
    };
    let charge = session.charge_for(task, Some(&choice));
    statement.pipeline(session, job, uid, Some(&choice), charge);
    Ok(Room::Pipelined {
        node: plan.node,
        victims: plan.evicted,
    })
}

/// The node where the fewest evictions let the task fit (ties: the less important
/// victims, then the node's name).
fn best_node(
    session: &Session,
    job: &GangKey,
    uid: &str,
    scope: Scope,
) -> Result<NodePlan, String> {
    let state = &session.state;
    let task = state.task(job, uid).ok_or("task is gone")?;
    let GpuAsk::Vgpu(ctx) = &task.gpu else {
        return Err("asks for no vGPU".into());
    };
    let Some(preemptor_job) = state.job(job) else {
        return Err("job is gone".into());
    };
    let quota = crate::placement::NodeSource::quota(&state.nodes, &ctx.namespace);
    let request = FitRequest {
        request: &ctx.request,
        policies: &ctx.policies,
        selectors: &ctx.selectors,
        quota,
    };
    // Candidates per node, by scope.
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
        for t in other.tasks.iter().filter(|t| evictable(t, state.now)) {
            if scope == Scope::OwnJob && t.priority >= task.priority {
                continue;
            }
            if let Some(p) = &t.placement {
                by_node.entry(p.node.as_str()).or_default().push(t);
            }
        }
    }
    let mut best: Option<(usize, NodePlan)> = None;
    let mut why = "no running task may make room for it".to_string();
    for (node, candidates) in by_node {
        let candidates = with_whole_gangs(state, candidates);
        let allowed = match scope {
            Scope::OtherQueues => session.tiers().reclaimable(state, task, &candidates),
            _ => session.tiers().preemptable(state, task, &candidates),
        };
        if allowed.is_empty() {
            continue;
        }
        let mut units = gang_units(state, &allowed);
        units.sort_by(|a, b| victim_order(state, a, b));
        let units = within_budgets(state, session.evicted(), units);
        let mut released: Vec<(Arc<str>, GpuUsage)> = Vec::new();
        let mut taken: Vec<Vec<(GangKey, String)>> = Vec::new();
        let mut evicted = 0usize;
        let mut fits = false;
        for unit in units {
            for t in &unit {
                if let Some(p) = t.placement.as_ref().filter(|p| p.node == node) {
                    released.extend(collapse_pod_usage(&p.devices, p.init_count));
                }
            }
            evicted += unit.len();
            taken.push(
                unit.iter()
                    .map(|t| (t.job.clone(), t.uid.clone()))
                    .collect(),
            );
            match state.nodes.fit_future(node, &released, &request) {
                Ok(_) => {
                    fits = true;
                    break;
                }
                Err(e) => why = format!("evicting every allowed task still leaves: {e}"),
            }
        }
        if !fits {
            continue;
        }
        let better = best.as_ref().is_none_or(|(n, _)| evicted < *n);
        if better {
            best = Some((
                evicted,
                NodePlan {
                    node: node.to_string(),
                    units: taken,
                    evicted,
                },
            ));
        }
    }
    best.map(|(_, plan)| plan).ok_or(why)
}
