//! A statement: tentative operations on a session that are committed or discarded
//! as a whole (Volcano's statement). Allocate places a task, pipeline places it on
//! resources still being freed, evict marks a running task for eviction. Discard
//! undoes the operations in reverse order and leaves the session exactly as it was;
//! commit turns them into the session's outcome.

use super::charge::Charge;
use super::job::{GangKey, TaskStatus};
use super::nodes::PlacedUsage;
use super::outcome::EvictAction;
use super::session::{Session, TaskBefore};
use crate::placement::Choice;

#[derive(Debug, Clone, PartialEq)]
enum Operation {
    Allocate {
        job: GangKey,
        uid: String,
        before: TaskBefore,
        placed: Option<PlacedUsage>,
        pipelined: bool,
    },
    Evict {
        job: GangKey,
        uid: String,
        before: TaskBefore,
        released: Option<PlacedUsage>,
        action: EvictAction,
        reason: String,
    },
}

/// Operations to commit or discard together.
#[derive(Debug, Default)]
pub struct Statement {
    operations: Vec<Operation>,
}

impl Statement {
    /// An empty statement.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing was done.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Places a pending task on `choice` (or, with no choice, lets it start without
    /// GPUs), charging its queue `charge`. False when the task is unknown.
    pub fn allocate(
        &mut self,
        session: &mut Session,
        job: &GangKey,
        uid: &str,
        choice: Option<&Choice>,
        charge: Charge,
    ) -> bool {
        self.place(session, job, uid, choice, charge, false)
    }

    /// Places a pending task on resources still held by tasks being evicted: it
    /// holds them from now on and starts once they are free.
    pub fn pipeline(
        &mut self,
        session: &mut Session,
        job: &GangKey,
        uid: &str,
        choice: Option<&Choice>,
        charge: Charge,
    ) -> bool {
        self.place(session, job, uid, choice, charge, true)
    }

    fn place(
        &mut self,
        session: &mut Session,
        job: &GangKey,
        uid: &str,
        choice: Option<&Choice>,
        charge: Charge,
        pipelined: bool,
    ) -> bool {
        let status = if pipelined {
            TaskStatus::Pipelined
        } else {
            TaskStatus::Allocated
        };
        match session.apply_allocate(job, uid, choice, charge, status) {
            Some((before, placed)) => {
                self.operations.push(Operation::Allocate {
                    job: job.clone(),
                    uid: uid.to_string(),
                    before,
                    placed,
                    pipelined,
                });
                true
            }
            None => false,
        }
    }

    /// Marks a running task for eviction; its queue stops being charged for it.
    /// False when the task is unknown.
    pub fn evict(
        &mut self,
        session: &mut Session,
        job: &GangKey,
        uid: &str,
        action: EvictAction,
        reason: String,
    ) -> bool {
        match session.apply_evict(job, uid) {
            Some((before, released)) => {
                self.operations.push(Operation::Evict {
                    job: job.clone(),
                    uid: uid.to_string(),
                    before,
                    released,
                    action,
                    reason,
                });
                true
            }
            None => false,
        }
    }

    /// Appends `other`'s operations, as if they had been made through this
    /// statement: a node's tentative evictions join the job's statement once they
    /// made room.
    pub fn merge(&mut self, other: Statement) {
        self.operations.extend(other.operations);
    }

    /// Takes every operation back, last first.
    pub fn discard(self, session: &mut Session) {
        for op in self.operations.into_iter().rev() {
            match op {
                Operation::Allocate {
                    job,
                    uid,
                    before,
                    placed,
                    ..
                } => session.undo_allocate(&job, &uid, before, placed.as_ref()),
                Operation::Evict {
                    job,
                    uid,
                    before,
                    released,
                    ..
                } => session.undo_evict(&job, &uid, before, released.as_ref()),
            }
        }
    }

    /// Keeps every operation: they become the session's decisions, the evictions
    /// going with the placements they make room for.
    pub fn commit(self, session: &mut Session) {
        let (placements, evictions): (Vec<Operation>, Vec<Operation>) = self
            .operations
            .into_iter()
            .partition(|op| matches!(op, Operation::Allocate { .. }));
        for op in placements.into_iter().chain(evictions) {
            match op {
                Operation::Allocate {
                    job,
                    uid,
                    pipelined,
                    ..
                } => session.record_commit(&job, &uid, pipelined),
                Operation::Evict {
                    job,
                    uid,
                    action,
                    reason,
                    ..
                } => session.record_eviction(&job, &uid, action, reason),
            }
        }
    }
}
