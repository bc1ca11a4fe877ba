//! Preempt: inside one queue, a starving job of higher priority takes resources
//! from lower-priority jobs (every deciding plugin's `preemptable`), whole gangs
//! or none; then, inside one job, a waiting task takes them from the job's own
//! lower-priority running tasks. A job's evictions commit only when the job then
//! has its minimum placed or pipelined (for a gang with a hard network-topology
//! constraint, only inside the tier it allows).

use super::allocate_in_topology::keeps_constraint;
use super::make_room::{Room, Scope, make_room};
use super::{jobs_by_queue, note_pipelined};
use crate::volcano::framework::{Action, Session, Statement};

/// The preempt action.
#[derive(Debug, Clone, Copy)]
pub struct Preempt;

impl Action for Preempt {
    fn name(&self) -> &'static str {
        "preempt"
    }

    fn execute(&self, session: &mut Session) {
        let waiting = jobs_by_queue(session, |job| job.inqueue);
        for scope in [Scope::OtherJobsOfQueue, Scope::OwnJob] {
            for queue in session.ordered_queues() {
                for key in waiting.get(&queue).into_iter().flatten() {
                    if !session.job_starving(key) {
                        continue;
                    }
                    let mut statement = Statement::new();
                    let mut pipelined = Vec::new();
                    for uid in session.ordered_tasks(key) {
                        let Some(task) = session.state.task(key, &uid) else {
                            continue;
                        };
                        if !session.state.plannable(task) || task.never_preempts {
                            continue;
                        }
                        match make_room(session, &mut statement, key, &uid, scope) {
                            Ok(Room::Pipelined { node, victims }) => {
                                pipelined.push((node, victims))
                            }
                            Ok(Room::Placed) => {}
                            Err(_) => break,
                        }
                    }
                    if !statement.is_empty()
                        && session.job_pipelined(key)
                        && keeps_constraint(session, key)
                    {
                        statement.commit(session);
                        note_pipelined(session, key, &pipelined);
                    } else {
                        statement.discard(session);
                    }
                }
            }
        }
    }
}
