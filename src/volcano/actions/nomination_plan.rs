//! The dry run of the gang eviction actions: with a set of victims evicted, can
//! every waiting task of the starving gang be placed inside the domain, and does
//! the gang then have its minimum placed or pipelined? (Volcano's nomination
//! plan built in a domain.) Each task, in task order, goes to the best node of
//! the domain where it fits as things are, else to the first node where it fits
//! once what is being evicted is gone, and its queue must take it (every
//! plugin's `allocatable`). One task that finds no node, or a queue that
//! refuses one, fails the whole plan: nothing of it is kept.

use super::eviction_domains::Domain;
use super::make_room::fits_freed_where;
use crate::volcano::framework::{EvictAction, GangKey, Session, Statement};

/// A plan that worked: its statement (victims evicted, tasks placed or
/// pipelined) and where tasks were pipelined, with the victims they wait for.
pub(crate) struct Plan {
    pub statement: Statement,
    pub pipelined: Vec<(String, usize)>,
}

/// Evicts `victims` and places the waiting tasks `pending` of `job` inside
/// `domain`, in a statement of its own; `Err` (with the session as it was) when
/// the gang does not reach its minimum so.
pub(crate) fn plan_in_domain(
    session: &mut Session,
    job: &GangKey,
    pending: &[String],
    domain: &Domain,
    victims: &[(GangKey, String)],
    action: EvictAction,
    reason: &str,
) -> Result<Plan, String> {
    let mut statement = Statement::new();
    for (victim_job, victim) in victims {
        statement.evict(session, victim_job, victim, action, reason.to_string());
    }
    let positions: Option<Vec<usize>> = domain.nodes.as_ref().map(|nodes| {
        let mut p: Vec<usize> = nodes
            .iter()
            .filter_map(|n| session.state.nodes.position(n))
            .collect();
        p.sort_unstable();
        p
    });
    let mut pipelined = Vec::new();
    for uid in pending {
        match place(
            session,
            &mut statement,
            job,
            uid,
            domain,
            positions.as_deref(),
        ) {
            Ok(Some(node)) => pipelined.push(node),
            Ok(None) => {}
            Err(e) => {
                statement.discard(session);
                return Err(e);
            }
        }
    }
    if !session.job_pipelined(job) {
        statement.discard(session);
        return Err("its minimum does not fit even with the victims gone".into());
    }
    // The victims are waited for by the first pipelined task (notes sum them).
    let mut pipelined: Vec<(String, usize)> = pipelined.into_iter().map(|n| (n, 0)).collect();
    if let Some(first) = pipelined.first_mut() {
        first.1 = victims.len();
    }
    Ok(Plan {
        statement,
        pipelined,
    })
}

/// Places one task inside the domain: `Some(node)` when pipelined there,
/// `None` when placed on room free now.
fn place(
    session: &mut Session,
    statement: &mut Statement,
    job: &GangKey,
    uid: &str,
    domain: &Domain,
    positions: Option<&[usize]>,
) -> Result<Option<String>, String> {
    let (choice, pipelined) = match session.choose_node_among(job, uid, positions) {
        Ok(Some(choice)) => (choice, false),
        _ => match fits_freed_where(session, job, uid, |n| domain.holds(n)) {
            Some(choice) => (choice, true),
            None => {
                return Err(format!(
                    "a waiting task finds no node in {} even with the victims gone",
                    domain.name
                ));
            }
        },
    };
    let Some(task) = session.state.task(job, uid) else {
        return Err("task is gone".into());
    };
    let charge = session.charge_for(task, Some(&choice));
    if let Err(refusal) = session.allocatable(job, uid, &charge) {
        return Err(format!("its queue has no room for it: {refusal}"));
    }
    if pipelined {
        let node = choice.node.clone();
        statement.pipeline(session, job, uid, Some(&choice), charge);
        Ok(Some(node))
    } else {
        statement.allocate(session, job, uid, Some(&choice), charge);
        Ok(None)
    }
}
