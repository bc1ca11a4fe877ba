//! Reclaim: a queue below its share takes resources back from other queues.
//! Queues in queue order (overused ones skipped), starving jobs in job order, their
//! waiting tasks in task order: a task whose queue may reclaim for it (every
//! plugin's `preemptive`) evicts tasks of reclaimable queues that every deciding
//! plugin lets go (`reclaimable`), whole gangs or none, until it fits a node as it
//! will be, and is pipelined there. A job's evictions commit only when the job
//! then has its minimum placed or pipelined (for a gang with a hard network-topology
//! constraint, only inside the tier it allows); otherwise nothing is evicted.

use super::make_room::{Room, Scope, make_room};
use super::{commit_if_pipelined, jobs_by_queue};
use crate::volcano::framework::{Action, GangPhase, Session, Statement};

/// The reclaim action.
#[derive(Debug, Clone, Copy)]
pub struct Reclaim;

impl Action for Reclaim {
    fn name(&self) -> &'static str {
        "reclaim"
    }

    fn execute(&self, session: &mut Session) {
        let waiting = jobs_by_queue(session, |job| job.inqueue);
        for queue in session.ordered_queues() {
            if session.overused(&queue) {
                continue;
            }
            for key in waiting.get(&queue).into_iter().flatten() {
                if !session.job_starving(key) {
                    continue;
                }
                let mut statement = Statement::new();
                let mut refused = None;
                let mut pipelined = Vec::new();
                for uid in session.ordered_tasks(key) {
                    let Some(task) = session.state.task(key, &uid) else {
                        continue;
                    };
                    if !session.state.plannable(task) || task.never_preempts {
                        continue;
                    }
                    let Some(q) = session.state.queue(&queue) else {
                        continue;
                    };
                    if let Err(r) = session.tiers().preemptive(&session.state, q, task) {
                        refused = Some(format!("may not reclaim: {r}"));
                        break;
                    }
                    match make_room(session, &mut statement, key, &uid, Scope::OtherQueues) {
                        Ok(Room::Pipelined { node, victims }) => pipelined.push((node, victims)),
                        Ok(Room::Placed) => {}
                        Err(e) => {
                            refused = Some(format!("nothing to reclaim: {e}"));
                            break;
                        }
                    }
                }
                if !commit_if_pipelined(session, key, statement, &pipelined)
                    && let Some(why) = refused
                    && !session.has_note(key)
                {
                    session.note_job(key, Some(GangPhase::Inqueue), "NotEnoughResources", why);
                }
            }
        }
    }
}
