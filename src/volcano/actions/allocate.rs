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

use super::alike_failures::AlikeFailures;
use super::note_only_jobs::{NoteOnly, sort_admitted};
use super::{in_job_order, next_job};
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
        // Jobs still blocked for the reason they waited with are not tried
        // (trying them again would fail the same way, see `AllocateHints`), nor
        // are jobs with nothing to place: their turns only note them.
        let (waiting, mut note_only) = sort_admitted(session);
        let mut waiting = in_job_order(session, waiting);
        while let Some(key) = next_job(session, &mut waiting, true) {
            let Some(queue) = session.state.job(&key).map(|j| j.queue.clone()) else {
                continue;
            };
            note_only.turn_of(session, &queue, &key, note_only_turn);
            if allocate_job(session, &key) {
                let jobs = waiting.entry(queue).or_default();
                jobs.push(key);
                jobs.sort_by(|a, b| session.job_order(a, b));
            }
        }
        note_only.finish(session, &mut waiting, note_only_turn);
        note_never_reached(session, waiting);
    }
}

/// Jobs of overused queues never reached allocation: say so.
pub(super) fn note_never_reached(session: &mut Session, waiting: BTreeMap<String, Vec<GangKey>>) {
    for (queue, jobs) in waiting {
        for key in jobs {
            let ready = session.state.job(&key).is_some_and(|j| j.is_ready());
            if !session.has_note(&key) && !ready {
                session.note_job(
                    &key,
                    None,
                    "NotEnoughResources",
                    format!("queue {queue:?} is overused (allocated reached its deserved share)"),
                );
            }
        }
    }
}

/// The turn of a job whose turn only notes it: a skipped job is noted with the
/// message it waited with; one with nothing to place is noted as its try would
/// note it (ready, or short of its minimum).
fn note_only_turn(session: &mut Session, job: NoteOnly) {
    match job.skipped {
        Some(message) => session.note_job(&job.key, None, "NotEnoughResources", message),
        None => {
            allocate_job(session, &job.key);
        }
    }
}

/// Places one job's waiting tasks in a statement; commits when the job is ready.
/// True when the job became ready with tasks still waiting: it goes back to its
/// queue for another turn. A job with a network-topology constraint is placed
/// inside one HyperNode (see [`super::allocate_in_topology`]).
pub(super) fn allocate_job(session: &mut Session, key: &GangKey) -> bool {
    let Some(job) = session.state.job(key) else {
        return false;
    };
    if let Some(constraint) = job.network_topology.clone()
        && let Some(placed) = super::allocate_in_topology::allocate_job(session, key, &constraint)
    {
        return placed;
    }
    let attempt = Attempt::run(session, key, None);
    if session.job_ready(key) {
        return attempt.commit(session, key);
    }
    let message = attempt.shortfall(session, key);
    attempt.statement.discard(session);
    session.hints.unplaced.insert(key.clone(), message.clone());
    session.note_job(key, None, "NotEnoughResources", message);
    false
}

/// One try at placing a job's waiting tasks, held in a statement until the caller
/// commits or discards it.
pub(super) struct Attempt {
    /// The tentative placements.
    pub statement: Statement,
    /// Why tasks could not be placed, with how many.
    unplaced: BTreeMap<String, usize>,
    /// Members that were waiting to be placed.
    waiting_members: usize,
    /// The job became ready with tasks still waiting.
    more_waiting: bool,
    /// The ranks of the nodes chosen, summed (how the node order liked them).
    pub rank: f64,
}

impl Attempt {
    /// Places the job's waiting tasks one by one, in task order, on the nodes at
    /// `within` (positions in the session's node set) or anywhere; stops early once
    /// the job is ready, as Volcano does, so that elastic jobs grow by turns.
    pub fn run(session: &mut Session, key: &GangKey, within: Option<&[usize]>) -> Self {
        let mut attempt = Self {
            statement: Statement::new(),
            unplaced: BTreeMap::new(),
            waiting_members: 0,
            more_waiting: false,
            rank: 0.0,
        };
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
        // A member alike to one that could not be placed since the last
        // placement fails as it did, without judging every node again.
        let mut alike = AlikeFailures::default();
        for (n, uid) in plannable.iter().enumerate() {
            let uid = uid.as_str();
            attempt.waiting_members += 1;
            if let Some(reason) = alike.earlier(session, key, uid) {
                *attempt.unplaced.entry(reason).or_default() += 1;
                continue;
            }
            let choice = match session.choose_node_among(key, uid, within) {
                Ok(choice) => choice,
                Err(reason) => {
                    alike.failed(uid, &reason);
                    *attempt.unplaced.entry(reason).or_default() += 1;
                    continue;
                }
            };
            let Some(task) = session.state.task(key, uid) else {
                continue;
            };
            let charge = session.charge_for(task, choice.as_ref());
            if let Err(rejection) = session.allocatable(key, uid, &charge) {
                let reason = rejection.to_string();
                alike.failed(uid, &reason);
                *attempt.unplaced.entry(reason).or_default() += 1;
                continue;
            }
            attempt.rank += choice.as_ref().map_or(0.0, |c| c.rank);
            attempt
                .statement
                .allocate(session, key, uid, choice.as_ref(), charge);
            alike.placed();
            if n + 1 < plannable.len() && session.job_ready(key) {
                attempt.more_waiting = true;
                break;
            }
        }
        attempt
    }

    /// Commits the placements of a job that is ready; true when tasks still wait.
    pub fn commit(self, session: &mut Session, key: &GangKey) -> bool {
        self.statement.commit(session);
        session.clear_note(key);
        self.more_waiting
    }

    /// Why the job is not ready after this attempt (before it is discarded).
    pub fn shortfall(&self, session: &Session, key: &GangKey) -> String {
        let Some(job) = session.state.job(key) else {
            return String::new();
        };
        let (members, min_member) = (job.tasks.len(), job.min_member);
        let ready = job.counts().ready;
        let ready_before = ready.saturating_sub(self.statement.len());
        let missing = min_member.saturating_sub(ready_before);
        let mut message = format!(
            "{}/{} tasks in gang unschedulable",
            self.waiting_members.min(members).max(missing.min(members)),
            members
        );
        if self.unplaced.is_empty() {
            message.push_str(&format!(
                ": {ready} of minMember {min_member} can be placed together"
            ));
        } else {
            let parts: Vec<String> = self
                .unplaced
                .iter()
                .map(|(reason, n)| format!("{n} {reason}"))
                .collect();
            message.push_str(": ");
            message.push_str(&parts.join("; "));
        }
        message
    }

    /// How many of the job's tasks are ready with this attempt's placements.
    pub fn ready(session: &Session, key: &GangKey) -> usize {
        session.state.job(key).map_or(0, |j| j.counts().ready)
    }
}
