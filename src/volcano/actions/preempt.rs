//! Preempt: inside one queue, a starving job of higher priority takes resources
//! from lower-priority jobs (every deciding plugin's `preemptable`), whole gangs
//! or none; then, inside one job, a waiting task takes them from the job's own
//! lower-priority running tasks. A job's evictions commit only when the job then
//! has its minimum placed or pipelined (for a gang with a hard network-topology
//! constraint, only inside the tier it allows).
//!
//! With `enableTopologyAwarePreemption` on, each task's victims are chosen by
//! kube-scheduler-style dry runs instead ([`super::topology_aware_preempt`]); the
//! jobs, their order and what commits stay as here.

use super::make_room::{Room, Scope, make_room};
use super::preempt_arguments::TopologyAwarePreemption;
use super::topology_aware_preempt::TopologyAwarePreempt;
use super::{commit_if_pipelined, jobs_by_queue};
use crate::volcano::action_configurations::ActionConfigurations;
use crate::volcano::framework::{Action, GangKey, Session, Statement};

/// The preempt action, choosing victims node by node (Volcano's default).
#[derive(Debug, Clone, Copy)]
pub struct Preempt;

impl Preempt {
    /// The preempt action the configuration asks for: topology-aware when
    /// `enableTopologyAwarePreemption` is on, node by node otherwise.
    pub fn configured(configurations: &ActionConfigurations) -> Box<dyn Action> {
        match TopologyAwarePreemption::configured(configurations) {
            Some(tuning) => Box::new(TopologyAwarePreempt(tuning)),
            None => Box::new(Preempt),
        }
    }
}

impl Action for Preempt {
    fn name(&self) -> &'static str {
        "preempt"
    }

    fn execute(&self, session: &mut Session) {
        preempt_with(session, make_room);
    }
}

/// Preempt's jobs and tasks in Volcano's order, with `room` choosing each
/// task's victims; a job's evictions commit only when it is then pipelined.
pub(crate) fn preempt_with(
    session: &mut Session,
    mut room: impl FnMut(&mut Session, &mut Statement, &GangKey, &str, Scope) -> Result<Room, String>,
) {
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
                    match room(session, &mut statement, key, &uid, scope) {
                        Ok(Room::Pipelined { node, victims }) => pipelined.push((node, victims)),
                        Ok(Room::Placed) => {}
                        Err(_) => break,
                    }
                }
                commit_if_pipelined(session, key, statement, &pipelined);
            }
        }
    }
}
