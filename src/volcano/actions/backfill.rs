//! Backfill: starts best-effort tasks (no vGPU, no CPU or memory request) of
//! admitted jobs that allocate left waiting, for instance because their queue was
//! overused: they take nothing from anyone. A job's backfilled tasks commit only
//! when the job is ready with them.

use super::jobs_by_queue;
use crate::volcano::framework::{Action, Session, Statement};

/// The backfill action.
#[derive(Debug, Clone, Copy)]
pub struct Backfill;

impl Action for Backfill {
    fn name(&self) -> &'static str {
        "backfill"
    }

    fn execute(&self, session: &mut Session) {
        let waiting = jobs_by_queue(session, |job| job.inqueue);
        for queue in session.ordered_queues() {
            for key in waiting.get(&queue).into_iter().flatten() {
                let mut statement = Statement::new();
                for uid in session.ordered_tasks(key) {
                    let Some(task) = session.state.task(key, &uid) else {
                        continue;
                    };
                    if !session.state.plannable(task) || !task.is_best_effort() {
                        continue;
                    }
                    let charge = session.charge_for(task, None);
                    if session.allocatable(key, &uid, &charge).is_ok() {
                        statement.allocate(session, key, &uid, None, charge);
                    }
                }
                if statement.is_empty() {
                    continue;
                }
                if session.job_ready(key) {
                    statement.commit(session);
                    session.clear_note(key);
                } else {
                    statement.discard(session);
                }
            }
        }
    }
}
