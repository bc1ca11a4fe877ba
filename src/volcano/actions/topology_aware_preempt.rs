//! Topology-aware preemption (Volcano's `enableTopologyAwarePreemption`): the
//! victims of a waiting task are chosen as kube-scheduler's default preemption
//! chooses them, by dry runs over candidate nodes, instead of node by node.
//!
//! On each node, in turn from an offset that depends on the task (so that
//! different tasks start their search on different nodes), the dry run removes
//! the victims the plugins let go, least important first, until the task fits
//! the node and its queue; then it tries to keep each of them, most important
//! first, and keeps every one the task still fits without. Once the dry runs have
//! found as many candidate nodes as the arguments ask
//! ([`TopologyAwarePreemption::candidate_count`]), the node whose victims cost
//! least is chosen, by kube-scheduler's order: the lowest highest victim
//! priority, then the smallest sum of priorities, then the fewest victims, then
//! the latest start of the most important victims, then the node found first.
//!
//! kube-scheduler first counts the victims whose eviction would violate a
//! PodDisruptionBudget, keeping those first and preferring nodes with fewer such
//! victims. Here no eviction ever violates a budget: such a victim is never one,
//! so every candidate node has none and that step decides nothing.
//!
//! Victims are evicted through the same statement as node-by-node preemption:
//! the plugins' `preemptable`, the eviction guards, gang minimums and budgets
//! decide who may go, and the job's statement commits only when it is pipelined.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::make_room::{
    Room, Scope, VictimUnit, candidates_by_node, eviction_reason, future_choice,
    room_without_evicting, victim_units,
};
use super::preempt::preempt_with;
use super::preempt_arguments::TopologyAwarePreemption;
use crate::placement::Choice;
use crate::volcano::framework::charge::Charge;
use crate::volcano::framework::victims::gang_safe;
use crate::volcano::framework::{Action, GangKey, Session, Statement, TaskInfo};

/// The preempt action with topology-aware victim selection.
#[derive(Debug, Clone, Copy)]
pub struct TopologyAwarePreempt(pub TopologyAwarePreemption);

impl Action for TopologyAwarePreempt {
    fn name(&self) -> &'static str {
        "preempt"
    }

    fn execute(&self, session: &mut Session) {
        let tuning = self.0;
        preempt_with(session, |session, statement, job, uid, scope| {
            make_room_topology_aware(session, statement, job, uid, scope, &tuning)
        });
    }
}

/// A node the dry run found room on, with the victims that make it.
struct Candidate {
    node: String,
    victims: Vec<VictimUnit>,
}

/// Makes room for task `uid` of `job` within `scope`: placed without evictions
/// when it fits as things are, else pipelined onto the best candidate node of
/// the dry runs, its victims evicted inside `statement`.
fn make_room_topology_aware(
    session: &mut Session,
    statement: &mut Statement,
    job: &GangKey,
    uid: &str,
    scope: Scope,
    tuning: &TopologyAwarePreemption,
) -> Result<Room, String> {
    if let Some(room) = room_without_evicting(session, statement, job, uid, scope)? {
        return Ok(room);
    }
    let candidates = dry_run_preemption(session, job, uid, scope, tuning)?;
    let best = select_candidate(session, candidates)
        .ok_or_else(|| "no node where evictions let it fit".to_string())?;
    let (action, reason) = eviction_reason(session, job, uid, scope);
    let mut on_node = Statement::new();
    let mut gone = BTreeSet::new();
    for (victim_job, victim) in best.victims.iter().flatten() {
        on_node.evict(session, victim_job, victim, action, reason.clone());
        gone.insert(victim.clone());
    }
    // The task waits for its victims to leave: their pods count for its
    // inter-pod affinity no longer.
    match fits_once_gone(session, job, uid, &best.node, &gone) {
        Ok((choice, charge)) => {
            on_node.pipeline(session, job, uid, Some(&choice), charge);
            statement.merge(on_node);
            Ok(Room::Pipelined {
                node: best.node,
                victims: gone.len(),
            })
        }
        Err(e) => {
            on_node.discard(session);
            Err(e)
        }
    }
}

/// Volcano's `DryRunPreemption`: the nodes in turn from the task's offset until
/// enough of them are candidates. Nothing the dry runs do stays in the session.
fn dry_run_preemption(
    session: &mut Session,
    job: &GangKey,
    uid: &str,
    scope: Scope,
    tuning: &TopologyAwarePreemption,
) -> Result<Vec<Candidate>, String> {
    let nodes: Vec<String> = session.state.nodes.iter().map(|n| n.name.clone()).collect();
    let wanted = tuning.candidate_count(nodes.len());
    let offset = offset_for(uid, nodes.len());
    let mut units_by_node: BTreeMap<String, Vec<VictimUnit>> = BTreeMap::new();
    for (node, on_node) in candidates_by_node(session, job, uid, scope)? {
        let units = victim_units(session, job, uid, scope, on_node)
            .into_iter()
            .map(|unit| {
                unit.iter()
                    .map(|t| (t.job.clone(), t.uid.clone()))
                    .collect()
            })
            .collect();
        units_by_node.insert(node.to_string(), units);
    }
    let mut candidates = Vec::new();
    let mut why = "no running task may make room for it".to_string();
    for i in 0..nodes.len() {
        let node = &nodes[(offset + i) % nodes.len()];
        let Some(units) = units_by_node.get(node) else {
            continue;
        };
        match select_victims_on_node(session, job, uid, node, units) {
            Ok(victims) => {
                candidates.push(Candidate {
                    node: node.clone(),
                    victims,
                });
                if candidates.len() >= wanted {
                    break;
                }
            }
            Err(e) => why = e,
        }
    }
    if candidates.is_empty() {
        return Err(why);
    }
    Ok(candidates)
}

/// Where the dry run starts: a node that depends only on the task (FNV-1a of its
/// uid), so that the same snapshot gives the same victims and different tasks
/// spread their searches over the nodes, as Volcano's random offset does.
fn offset_for(uid: &str, nodes: usize) -> usize {
    let hash = uid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    usize::try_from(hash % u64::try_from(nodes.max(1)).unwrap_or(1)).unwrap_or(0)
}

/// Volcano's `SelectVictimsOnNode`: removes `units` (least important first) until
/// the task fits `node` and its queue; then puts back each removed unit, most
/// important first, that the task still fits without (and whose absence would
/// not leave a gang below its minimum). The units that stay removed are the
/// victims; a node needing none, or where the task does not fit even with every
/// unit removed, is no candidate.
fn select_victims_on_node(
    session: &mut Session,
    job: &GangKey,
    uid: &str,
    node: &str,
    units: &[VictimUnit],
) -> Result<Vec<VictimUnit>, String> {
    let mut removed = 0usize;
    let mut fits = Err("no running task may make room for it on this node".to_string());
    for n in 1..=units.len() {
        removed = n;
        fits = fits_without(session, job, uid, node, &units[..n]);
        if fits.is_ok() {
            break;
        }
    }
    fits?;
    let mut kept_back = vec![false; removed];
    for i in (0..removed).rev() {
        kept_back[i] = true;
        let trial: Vec<VictimUnit> = units[..removed]
            .iter()
            .zip(&kept_back)
            .filter(|(_, kept)| !**kept)
            .map(|(unit, _)| unit.clone())
            .collect();
        let reprieved = gang_safe_without(session, &trial)
            && fits_without(session, job, uid, node, &trial).is_ok();
        kept_back[i] = reprieved;
    }
    let victims: Vec<VictimUnit> = units[..removed]
        .iter()
        .zip(&kept_back)
        .filter(|(_, kept)| !**kept)
        .map(|(unit, _)| unit.clone())
        .collect();
    if victims.is_empty() {
        return Err("the task fits without evicting anyone here".into());
    }
    Ok(victims)
}

/// Whether evicting exactly `victims` leaves every gang either whole or at its
/// minimum.
fn gang_safe_without(session: &Session, victims: &[VictimUnit]) -> bool {
    let uids: Vec<String> = victims.iter().flatten().map(|(_, u)| u.clone()).collect();
    gang_safe(&session.state, &uids).len() == uids.len()
}

/// Whether the task fits `node` and its queue once `victims` are gone: tried by
/// evicting them in a statement that is then discarded.
fn fits_without(
    session: &mut Session,
    job: &GangKey,
    uid: &str,
    node: &str,
    victims: &[VictimUnit],
) -> Result<(), String> {
    let mut trial = Statement::new();
    let mut gone = BTreeSet::new();
    for (victim_job, victim) in victims.iter().flatten() {
        trial.evict(
            session,
            victim_job,
            victim,
            crate::volcano::framework::outcome::EvictAction::Preempt,
            String::new(),
        );
        gone.insert(victim.clone());
    }
    let fits = fits_once_gone(session, job, uid, node, &gone).map(|_| ());
    trial.discard(session);
    fits
}

/// Where the task goes on `node` and what its queue is charged, once what the
/// session evicts is gone and the pods of `gone` no longer count for inter-pod
/// affinity; an error when the node, its predicates or the queue refuse it.
fn fits_once_gone(
    session: &Session,
    job: &GangKey,
    uid: &str,
    node: &str,
    gone: &BTreeSet<String>,
) -> Result<(Choice, Charge), String> {
    let choice = future_choice(session, job, uid, node)?;
    let task = session
        .state
        .task(job, uid)
        .ok_or_else(|| "task is gone".to_string())?;
    let charge = session.charge_for(task, Some(&choice));
    session
        .allocatable(job, uid, &charge)
        .map_err(|refusal| format!("its queue has no room for it: {refusal}"))?;
    session.node_allowed_once_gone(job, uid, node, gone)?;
    Ok((choice, charge))
}

/// kube-scheduler's `SelectCandidate` / `pickOneNodeForPreemption`: the
/// candidate whose victims cost least (see the module documentation); among
/// equals, the one found first.
fn select_candidate(session: &Session, candidates: Vec<Candidate>) -> Option<Candidate> {
    let now = session.state.now;
    let cost = |c: &Candidate| {
        let victims: Vec<&TaskInfo> = c
            .victims
            .iter()
            .flatten()
            .filter_map(|(job, uid)| session.state.task(job, uid))
            .collect();
        VictimCost::of(&victims, now)
    };
    let mut best: Option<(VictimCost, Candidate)> = None;
    for candidate in candidates {
        let c = cost(&candidate);
        if best.as_ref().is_none_or(|(b, _)| c < *b) {
            best = Some((c, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// What evicting a candidate's victims costs, compared field by field (smaller
/// is cheaper), as kube-scheduler ranks preemption candidates.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct VictimCost {
    /// The highest victim priority.
    highest_priority: i32,
    /// The sum of the victims' priorities, each raised by 2^31 so that more
    /// victims never cost less.
    priority_sum: i64,
    /// How many victims.
    count: usize,
    /// The earliest start among the victims of the highest priority, latest
    /// first (the least work lost).
    earliest_start: std::cmp::Reverse<DateTime<Utc>>,
}

impl VictimCost {
    fn of(victims: &[&TaskInfo], now: DateTime<Utc>) -> Self {
        let highest_priority = victims.iter().map(|t| t.priority).max().unwrap_or(0);
        let priority_sum = victims
            .iter()
            .map(|t| i64::from(t.priority) + (1i64 << 31))
            .sum();
        let earliest_start = victims
            .iter()
            .filter(|t| t.priority == highest_priority)
            .map(|t| started_at(t).unwrap_or(now))
            .min()
            .unwrap_or(now);
        Self {
            highest_priority,
            priority_sum,
            count: victims.len(),
            earliest_start: std::cmp::Reverse(earliest_start),
        }
    }
}

/// The pod's `status.startTime`; `None` for one not started yet (counted as
/// starting now, as kube-scheduler does).
fn started_at(task: &TaskInfo) -> Option<DateTime<Utc>> {
    let t = task.pod.status.as_ref()?.start_time.as_ref()?;
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
}
