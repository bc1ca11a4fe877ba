//! gangpreempt and gangreclaim over GPU gangs: whole gangs or none, and what
//! holds whatever the configuration (PodDisruptionBudgets, pods that may not be
//! evicted, which no bundle of their job passes over).

use super::gang_eviction_arguments::GangEvictionArguments;
use super::gang_preempt::GangPreempt;
use super::gang_reclaim::GangReclaim;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::disruption_budget::DisruptionBudget;
use crate::volcano::framework::job::JobInfo;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{
    gang_key, gpu_nodes, gpu_task, job, placed_state, running_task,
};
use crate::volcano::framework::{Action, Session};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use std::collections::BTreeSet;

pub(super) const CONF: &str = "actions: enqueue, allocate, gangpreempt, gangreclaim, backfill
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
";

pub(super) fn queues() -> Vec<QueueInfo> {
    let queue = |name: &str, reclaimable: bool| {
        QueueInfo::idle(QueueSpec {
            reclaimable,
            ..QueueSpec::new(name)
        })
    };
    vec![queue("inference", false), queue("training", true)]
}

/// A running training gang of two (minMember 2) on `node`, one GPU each,
/// labelled `job: <name>`.
pub(super) fn training_gang(name: &str, node: usize, priority: i32) -> JobInfo {
    let k = gang_key(name);
    let tasks = (0..2)
        .map(|i| {
            let mut t = running_task(&k, &format!("{name}-{i}"), node, i);
            let mut pod = (*t.pod).clone();
            pod.metadata.labels = Some([("job".to_string(), name.to_string())].into());
            t.pod = std::sync::Arc::new(pod);
            t
        })
        .collect();
    let mut j = job(name, "training", 2, tasks);
    j.priority = priority;
    j
}

/// A waiting gang of two one-GPU tasks.
pub(super) fn waiting(name: &str, queue: &str, priority: i32) -> JobInfo {
    let k = gang_key(name);
    let tasks = (0..2)
        .map(|i| gpu_task(&k, &format!("{name}-{i}"), 1))
        .collect();
    let mut j = job(name, queue, 2, tasks);
    j.priority = priority;
    j
}

/// Runs `action` over two nodes of two GPUs; the pods evicted.
fn run(
    jobs: Vec<JobInfo>,
    budgets: Vec<DisruptionBudget>,
    action: &dyn Action,
) -> BTreeSet<String> {
    let conf = SchedulerConf::parse(CONF).expect("conf");
    let mut state = placed_state(gpu_nodes(2, 2, 1), queues(), jobs);
    state.budgets = budgets;
    let mut session = Session::open(state, registry::build(&conf).expect("builds"));
    action.execute(&mut session);
    session
        .close()
        .evictions()
        .map(|e| e.name.clone())
        .collect()
}

fn budget(job: &str, allowed: i32) -> DisruptionBudget {
    let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": job, "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"job": job}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
        }))
        .expect("budget");
    DisruptionBudget::of(&pdb).expect("budget")
}

pub(super) fn names(n: &[&str]) -> BTreeSet<String> {
    n.iter().map(|s| s.to_string()).collect()
}

fn reclaim() -> GangReclaim {
    GangReclaim::new(GangEvictionArguments::default())
}

#[test]
fn gang_reclaim_evicts_one_whole_gang_for_a_waiting_gang() {
    let jobs = vec![
        training_gang("a", 0, 0),
        training_gang("b", 1, 0),
        waiting("svc", "inference", 0),
    ];
    assert_eq!(run(jobs, vec![], &reclaim()), names(&["a-0", "a-1"]));
}

#[test]
fn gang_reclaim_keeps_disruption_budgets() {
    let jobs = || {
        vec![
            training_gang("a", 0, 0),
            training_gang("b", 1, 0),
            waiting("svc", "inference", 0),
        ]
    };
    // a's budget lets one pod go, not both: the whole of b goes instead.
    assert_eq!(
        run(jobs(), vec![budget("a", 1)], &reclaim()),
        names(&["b-0", "b-1"])
    );
    assert!(run(jobs(), vec![budget("a", 1), budget("b", 0)], &reclaim()).is_empty());
}

#[test]
fn a_member_that_may_not_go_keeps_its_whole_gang() {
    let mut a = training_gang("a", 0, 0);
    a.tasks[1].preemptable = false;
    let mut b = training_gang("b", 1, 0);
    b.tasks[0].preemptable = false;
    // Evicting a-0 alone would leave a-1 running below minMember: a is passed
    // over, and so is b; nothing is evicted.
    let jobs = vec![a, b, waiting("svc", "inference", 0)];
    assert!(run(jobs, vec![], &reclaim()).is_empty());
}

#[test]
fn gang_preempt_takes_the_lower_priority_gang_of_its_queue_only() {
    let jobs = || {
        vec![
            training_gang("low", 0, 10),
            training_gang("high", 1, 1000),
            waiting("urgent", "training", 100),
        ]
    };
    let preempt = GangPreempt::new(GangEvictionArguments::default());
    assert_eq!(run(jobs(), vec![], &preempt), names(&["low-0", "low-1"]));
    // Whole gangs only: without them, nothing may go.
    let safe_only = GangPreempt::new(GangEvictionArguments {
        allow_whole_bundle: false,
        ..GangEvictionArguments::default()
    });
    assert!(run(jobs(), vec![], &safe_only).is_empty());
}
