//! Which jobs enqueue, allocate and backfill look at: a session that follows
//! another asks nothing of the jobs that run unchanged since (they have
//! nothing to admit, place or start), and still sees every job that changed,
//! before it opened or while it runs.

use super::allocate::Allocate;
use super::backfill::Backfill;
use super::enqueue::Enqueue;
use crate::volcano::conf::PluginOption;
use crate::volcano::framework::plugin::{JobInvalid, Plugin};
use crate::volcano::framework::session_memory::SessionMemory;
use crate::volcano::framework::testing::{
    gang_key, gpu_nodes, gpu_task, job, placed_state, running_task,
};
use crate::volcano::framework::tiers::{Slot, Tiers};
use crate::volcano::framework::{
    Action, GangPhase, JobInfo, QueueInfo, Session, SessionState, TaskStatus,
};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::gang::Gang;
use std::sync::{Arc, Mutex};

/// Finds every job valid, and records which jobs it was asked about.
#[derive(Debug, Default)]
struct ValidityWitness {
    asked: Arc<Mutex<Vec<String>>>,
}

impl Plugin for ValidityWitness {
    fn name(&self) -> &'static str {
        "validity-witness"
    }

    fn job_valid(&self, _: &SessionState, job: &JobInfo) -> Result<(), JobInvalid> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(job.key.name.to_string());
        }
        Ok(())
    }
}

/// The gang plugin after a witness sharing `asked`.
fn witnessed(asked: &Arc<Mutex<Vec<String>>>) -> Tiers {
    let witness = ValidityWitness {
        asked: Arc::clone(asked),
    };
    Tiers::new(vec![vec![
        Slot::new(Box::new(witness), PluginOption::named("validity-witness")),
        Slot::new(Box::new(Gang), PluginOption::named("gang")),
    ]])
}

/// Four jobs running one GPU each on node 0 of two 4-GPU nodes, and `waiting`.
fn cluster(waiting: Vec<JobInfo>) -> SessionState {
    let mut jobs: Vec<JobInfo> = (0..4)
        .map(|i| {
            let name = format!("runs-{i}");
            let key = gang_key(&name);
            job(
                &name,
                "q",
                1,
                vec![running_task(&key, &format!("{name}-0"), 0, i)],
            )
        })
        .collect();
    jobs.extend(waiting);
    placed_state(
        gpu_nodes(2, 4, 1),
        vec![QueueInfo::idle(QueueSpec::new("q"))],
        jobs,
    )
}

fn one_gpu_job(name: &str) -> JobInfo {
    let key = gang_key(name);
    job(name, "q", 1, vec![gpu_task(&key, &format!("{name}-0"), 1)])
}

fn run_all(session: &mut Session) {
    Enqueue.execute(session);
    Allocate.execute(session);
    Backfill.execute(session);
}

#[test]
fn a_session_after_another_asks_nothing_of_the_jobs_that_run_unchanged() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let first = cluster(vec![one_gpu_job("waits")]);
    let mut second = first.clone();
    let mut session = Session::open_after(first, witnessed(&asked), SessionMemory::default());
    run_all(&mut session);
    let (outcome, memory) = session.close_keeping();
    assert_eq!(outcome.commits.len(), 1, "the waiting job is placed");

    // The next cycle: the same jobs (the planner has not yet seen the
    // placement) and one more.
    let arrives = one_gpu_job("arrives");
    second
        .jobs
        .insert(arrives.key.clone(), Arc::new(arrives.clone()));
    if let Ok(mut asked) = asked.lock() {
        asked.clear();
    }
    let mut session = Session::open_after(second, witnessed(&asked), memory);
    run_all(&mut session);
    let outcome = session.close();

    let placed: Vec<&str> = outcome.commits.iter().map(|c| &*c.gang.name).collect();
    assert_eq!(placed, ["arrives", "waits"]);
    for i in 0..4 {
        let verdict = &outcome.verdicts[&gang_key(&format!("runs-{i}"))];
        assert_eq!(verdict.phase, GangPhase::Running);
        assert_eq!(verdict.message, None);
    }
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    let of_running: Vec<&String> = asked.iter().filter(|n| n.starts_with("runs-")).collect();
    assert!(
        of_running.is_empty(),
        "the session asked about jobs that run unchanged: {of_running:?}"
    );
    assert!(asked.iter().any(|n| n == "arrives"), "asked: {asked:?}");
}

#[test]
fn a_running_job_changed_while_the_session_runs_is_seen_by_the_next_action() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut session = Session::open(cluster(Vec::new()), witnessed(&asked));
    // runs-0 grows by a member while the session runs.
    let key = gang_key("runs-0");
    if let Some(job) = session.state.jobs.get_mut(&key).map(Arc::make_mut) {
        let mut member = gpu_task(&key, "runs-0-1", 1);
        member.job = key.clone();
        job.tasks.push(member);
    }
    Allocate.execute(&mut session);
    assert_eq!(
        session.state.task(&key, "uid-runs-0-1").map(|t| t.status),
        Some(TaskStatus::Allocated)
    );
    let outcome = session.close();
    assert_eq!(outcome.commits.len(), 1);
    assert_eq!(outcome.commits[0].members[0].name, "runs-0-1");
}
