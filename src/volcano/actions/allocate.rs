//! Allocate: places admitted jobs, queue by queue in queue order (skipping
//! overused queues) and job by job in job order. Every job is placed inside a
//! statement: its waiting tasks are placed one by one, in task order, through the
//! one node-choice path `/filter` uses, and charged to the queue; the statement
//! commits only when the plugins find the job ready (the gang reached minMember),
//! otherwise every tentative placement is undone. A gang therefore never holds GPUs
//! while waiting for GPUs, which is what makes two gangs that each fit alone but
//! not together impossible to deadlock.
//!
//! As in Volcano, a job that becomes ready with tasks still waiting commits what it
//! has and goes back to its queue: the next task it gets is weighed against every
//! other queue and job again, so elastic jobs grow by turns rather than one taking
//! everything.

use super::{jobs_by_queue, next_job};
use crate::volcano::framework::{Action, GangKey, Session, Statement};
use std::collections::BTreeMap;

/// The allocate action.
#[derive(Debug, Clone, Copy)]
pub struct Allocate;

impl Action for Allocate {
    fn name(&self) -> &'static str {
        "allocate"
    }

    fn execute(&self, session: &mut Session) {
        let mut waiting = jobs_by_queue(session, |job| job.inqueue);
        while let Some(key) = next_job(session, &mut waiting, true) {
            if allocate_job(session, &key)
                && let Some(queue) = session.state.job(&key).map(|j| j.queue.clone())
            {
                let jobs = waiting.entry(queue).or_default();
                jobs.push(key);
                jobs.sort_by(|a, b| session.job_order(a, b));
            }
        }
        // Jobs of overused queues never reached allocation: say so.
        for (queue, jobs) in waiting {
            for key in jobs {
                let ready = session.state.job(&key).is_some_and(|j| j.is_ready());
                if !session.has_note(&key) && !ready {
                    session.note_job(
                        &key,
                        None,
                        "NotEnoughResources",
                        format!(
                            "queue {queue:?} is overused (allocated reached its deserved share)"
                        ),
                    );
                }
            }
        }
    }
}

/// Places one job's waiting tasks in a statement; commits when the job is ready.
/// True when the job became ready with tasks still waiting: it goes back to its
/// queue for another turn.
fn allocate_job(session: &mut Session, key: &GangKey) -> bool {
    let Some(before) = session
        .state
        .job(key)
        .map(|j| (j.counts(), j.tasks.len(), j.min_member))
    else {
        return false;
    };
    let (counts, members, min_member) = before;
    let mut statement = Statement::new();
    let mut unplaced: BTreeMap<String, usize> = BTreeMap::new();
    let mut waiting_members = 0usize;
    let plannable: Vec<String> = session
        .ordered_tasks(key)
        .into_iter()
        .filter(|uid| {
            session
                .state
                .task(key, uid)
                .is_some_and(|t| session.state.plannable(t))
        })
        .collect();
    let mut more_waiting = false;
    for (n, uid) in plannable.iter().enumerate() {
        let uid = uid.as_str();
        waiting_members += 1;
        let choice = match session.choose_node(key, uid) {
            Ok(choice) => choice,
            Err(reason) => {
                *unplaced.entry(reason).or_default() += 1;
                continue;
            }
        };
        let Some(task) = session.state.task(key, uid) else {
            continue;
        };
        let charge = session.charge_for(task, choice.as_ref());
        if let Err(rejection) = session.allocatable(key, uid, &charge) {
            *unplaced.entry(rejection.to_string()).or_default() += 1;
            continue;
        }
        statement.allocate(session, key, uid, choice.as_ref(), charge);
        if n + 1 < plannable.len() && session.job_ready(key) {
            more_waiting = true;
            break;
        }
    }
    if session.job_ready(key) {
        statement.commit(session);
        session.clear_note(key);
        return more_waiting;
    }
    let ready = counts.ready + statement.len();
    statement.discard(session);
    let missing = min_member.saturating_sub(counts.ready);
    let mut message = format!(
        "{}/{} tasks in gang unschedulable",
        waiting_members.min(members).max(missing.min(members)),
        members
    );
    if unplaced.is_empty() {
        message.push_str(&format!(
            ": {ready} of minMember {min_member} can be placed together"
        ));
    } else {
        let parts: Vec<String> = unplaced
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect();
        message.push_str(": ");
        message.push_str(&parts.join("; "));
    }
    session.note_job(key, None, "NotEnoughResources", message);
    false
}
