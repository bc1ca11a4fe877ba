//! Backfill: starts best-effort tasks (no vGPU, no CPU or memory request) of
//! admitted jobs that allocate left waiting, for instance because their queue was
//! overused: they take nothing from anyone but a pod slot on the node chosen for
//! them. A job's backfilled tasks commit only when the job is ready with them.
//!
//! As Volcano's backfill, it first takes back the best-effort tasks an earlier
//! action pipelined (onto room that evictions are still freeing) and places them
//! with the waiting ones: asking nothing, they need not wait for anyone to leave,
//! and if no node has a pod slot for them now they simply wait again.

use super::jobs_by_queue;
use crate::volcano::framework::state::plannable_when;
use crate::volcano::framework::{Action, Session, Statement, TaskStatus};

/// The backfill action.
#[derive(Debug, Clone, Copy)]
pub struct Backfill;

impl Action for Backfill {
    fn name(&self) -> &'static str {
        "backfill"
    }

    fn execute(&self, session: &mut Session) {
        // Only jobs with a best-effort task to place: with thousands of gangs
        // waiting for GPUs, putting all of them in job order costs more than
        // backfill itself, and it would pass over each of them.
        let alone = session.state.only.is_some();
        let waiting = jobs_by_queue(session, |job| {
            job.inqueue
                && job.tasks.iter().any(|t| {
                    t.is_best_effort()
                        && (plannable_when(t, alone) || t.status == TaskStatus::Pipelined)
                })
        });
        for key in waiting.values().flatten() {
            let pipelined: Vec<String> = session
                .state
                .job(key)
                .into_iter()
                .flat_map(|j| &j.tasks)
                .filter(|t| t.status == TaskStatus::Pipelined && t.is_best_effort())
                .map(|t| t.uid.clone())
                .collect();
            for uid in pipelined {
                session.unpipeline(key, &uid);
            }
        }
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
                    // Even a pod asking for nothing needs a node with a pod slot
                    // left that its predicates allow: it is pinned there.
                    let Ok(choice) = session.choose_node(key, &uid) else {
                        continue;
                    };
                    let Some(task) = session.state.task(key, &uid) else {
                        continue;
                    };
                    let charge = session.charge_for(task, choice.as_ref());
                    if session.allocatable(key, &uid, &charge).is_ok() {
                        statement.allocate(session, key, &uid, choice.as_ref(), charge);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;
    use crate::volcano::actions::allocate::Allocate;
    use crate::volcano::conf::SchedulerConf;
    use crate::volcano::framework::testing::{busy, job, state, task};
    use crate::volcano::framework::{GangKey, TaskStatus};
    use crate::volcano::objects::QueueSpec;
    use crate::volcano::plugins::registry;

    #[test]
    fn best_effort_members_start_where_allocate_skips_an_overused_queue() {
        let key = GangKey {
            namespace: "ns".into(),
            name: "svc".into(),
            single: false,
        };
        // The job runs (one member holds a GPU); its queue holds all it deserves.
        let mut running = task(&key, "w0", Resources::from_units([("nvidia.com/gpu", 1)]));
        running.status = TaskStatus::Running;
        let sidecar = task(&key, "probe", Resources::new());
        let heavy = task(&key, "w1", Resources::from_units([("nvidia.com/gpu", 1)]));
        let queue = busy(QueueSpec::new("q"), 1, 2);
        let conf = SchedulerConf::parse(
            "actions: allocate, backfill\ntiers:\n- plugins:\n  - name: gang\n  - name: proportion\n",
        )
        .unwrap();
        let mut s = Session::open(
            state(
                Resources::from_units([("nvidia.com/gpu", 1)]),
                vec![queue],
                vec![job("svc", "q", 1, vec![running, sidecar, heavy])],
            ),
            registry::build(&conf).unwrap(),
        );
        assert!(s.overused("q"));
        Allocate.execute(&mut s);
        assert_eq!(
            s.state.task(&key, "uid-probe").unwrap().status,
            TaskStatus::Pending
        );
        Backfill.execute(&mut s);
        assert_eq!(
            s.state.task(&key, "uid-probe").unwrap().status,
            TaskStatus::Allocated
        );
        assert_eq!(
            s.state.task(&key, "uid-w1").unwrap().status,
            TaskStatus::Pending,
            "a member that asks for something is not backfilled"
        );
        let outcome = s.close();
        assert_eq!(outcome.commits.len(), 1);
        assert_eq!(outcome.commits[0].members[0].name, "probe");
    }
}
