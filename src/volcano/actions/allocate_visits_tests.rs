//! What allocate looks at: a job it tries is weighed against the jobs whose
//! turn could change something, not against every running job of its queue.
//! On a busy cluster most jobs run with nothing left to place, and comparing
//! each with every job tried made a session cost what runs rather than what
//! waits.

use super::allocate::Allocate;
use crate::volcano::conf::PluginOption;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::testing::{gpu_nodes, gpu_task, job, placed_state, running_task};
use crate::volcano::framework::tiers::{Slot, Tiers};
use crate::volcano::framework::{Action, GangPhase, JobInfo, QueueInfo, Session, SessionState};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::gang::Gang;
use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

/// Orders nothing, and records which jobs it was asked to order.
#[derive(Debug, Default)]
struct OrderWitness {
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

impl Plugin for OrderWitness {
    fn name(&self) -> &'static str {
        "order-witness"
    }

    fn job_order(&self, _: &SessionState, a: &JobInfo, b: &JobInfo) -> Ordering {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push((a.key.name.to_string(), b.key.name.to_string()));
        }
        Ordering::Equal
    }
}

#[test]
fn a_job_tried_is_not_weighed_against_the_running_jobs_of_its_queue() {
    let witness = OrderWitness::default();
    let asked = Arc::clone(&witness.asked);
    let tiers = Tiers::new(vec![vec![
        // First, so that it is asked of every pair the session orders.
        Slot::new(Box::new(witness), PluginOption::named("order-witness")),
        Slot::new(Box::new(Gang), PluginOption::named("gang")),
    ]]);
    // Four jobs run, one GPU each, on node 0; "waits" asks two GPUs and fits
    // node 1.
    let mut jobs: Vec<JobInfo> = (0..4)
        .map(|i| {
            let name = format!("runs-{i}");
            let key = crate::volcano::framework::testing::gang_key(&name);
            job(
                &name,
                "q",
                1,
                vec![running_task(&key, &format!("{name}-0"), 0, i)],
            )
        })
        .collect();
    let waiting = crate::volcano::framework::testing::gang_key("waits");
    jobs.push(job(
        "waits",
        "q",
        2,
        vec![
            gpu_task(&waiting, "waits-0", 1),
            gpu_task(&waiting, "waits-1", 1),
        ],
    ));
    let state = placed_state(
        gpu_nodes(2, 4, 1),
        vec![QueueInfo::idle(QueueSpec::new("q"))],
        jobs,
    );
    let mut session = Session::open(state, tiers);
    Allocate.execute(&mut session);
    let outcome = session.close();

    assert_eq!(outcome.commits.len(), 1, "the waiting gang is placed");
    assert_eq!(outcome.commits[0].gang, waiting);
    for i in 0..4 {
        let verdict =
            &outcome.verdicts[&crate::volcano::framework::testing::gang_key(&format!("runs-{i}"))];
        assert_eq!(verdict.phase, GangPhase::Running);
        assert_eq!(verdict.message, None);
    }
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    let with_running: Vec<&(String, String)> = asked
        .iter()
        .filter(|(a, b)| a.starts_with("runs-") || b.starts_with("runs-"))
        .collect();
    assert!(
        with_running.is_empty(),
        "allocate weighed the job it tried against running jobs: {with_running:?}"
    );
}
