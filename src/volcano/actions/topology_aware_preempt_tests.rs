//! Topology-aware preemption as a user configures it (`enableTopologyAwarePreemption`
//! in volcano-scheduler.conf's `configurations:`): which pods are evicted and
//! where the preemptor waits, against what node-by-node preemption does with the
//! same cluster.

use super::configured;
use super::plain_tasks_tests::{cpu_task, labelled_cpu_nodes, planned, run_with, running};
use crate::volcano::conf::SchedulerConf;
use crate::volcano::disruption_budget::DisruptionBudget;
use crate::volcano::framework::job::{JobInfo, TaskInfo};
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::framework::testing::{
    gang_key, gpu_nodes, gpu_task, job, placed_state, running_task,
};
use crate::volcano::framework::{Action, QueueInfo, Session};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Priority and gang, the predicates, and preempt alone.
const TIERS: &str = "actions: preempt
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
";

/// [`TIERS`] with preempt's `arguments`, one per line (`key: value`).
fn conf_with(arguments: &[&str]) -> String {
    let mut text = format!("{TIERS}configurations:\n- name: preempt\n  arguments:\n");
    for a in arguments {
        text.push_str(&format!("    {a}\n"));
    }
    text
}

/// Topology-aware, every node dry-run.
fn topology_aware() -> String {
    conf_with(&[
        "enableTopologyAwarePreemption: true",
        "minCandidateNodesAbsolute: 100",
    ])
}

/// Runs the actions `conf` configures on CPU nodes (`name`, CPUs, pod slots).
fn run(conf: &str, nodes: &[(&str, i64, i64)], jobs: Vec<JobInfo>) -> SessionOutcome {
    let actions = match SchedulerConf::parse(conf) {
        Ok(c) => configured(&c),
        Err(e) => panic!("configuration: {e}"),
    };
    let actions: Vec<&dyn Action> = actions.iter().map(AsRef::as_ref).collect();
    let nodes = labelled_cpu_nodes(nodes, &|_| BTreeMap::new(), &jobs);
    run_with(conf, nodes, jobs, &actions)
}

fn evicted(o: &SessionOutcome) -> BTreeSet<String> {
    o.evictions().map(|e| e.name.clone()).collect()
}

fn names(n: &[&str]) -> BTreeSet<String> {
    n.iter().map(|s| s.to_string()).collect()
}

/// Job `name` of priority `priority` (minMember `min`) running `tasks`
/// (name, CPUs, node).
fn running_job(name: &str, priority: i32, min: usize, tasks: &[(&str, i64, &str)]) -> JobInfo {
    let tasks = tasks
        .iter()
        .map(|(task, cpu, node)| {
            let mut t = running(cpu_task(name, task, *cpu), node);
            t.priority = priority;
            t
        })
        .collect();
    let mut j = job(name, "q", min, tasks);
    j.priority = priority;
    j
}

/// The waiting job `urgent` of one task asking `cpu` CPUs, of high priority.
fn urgent(cpu: i64) -> JobInfo {
    let mut t = cpu_task("urgent", "urgent-0", cpu);
    t.priority = 1000;
    let mut j = job("urgent", "q", 1, vec![t]);
    j.priority = 1000;
    j
}

/// `task` with `status.startTime`.
fn started(mut task: TaskInfo, at: &str) -> TaskInfo {
    let mut pod = (*task.pod).clone();
    pod.status = serde_json::from_value(serde_json::json!({ "startTime": at })).ok();
    task.pod = Arc::new(pod);
    task
}

/// The small, least important pod is not enough; once the big one is gone the
/// preemptor fits with the small one kept, so only the big one goes. Preempting
/// node by node evicts both.
#[test]
fn a_victim_the_preemptor_fits_without_is_kept() {
    let jobs = || {
        vec![
            running_job("small", 10, 1, &[("small-0", 2, "n1")]),
            running_job("big", 20, 1, &[("big-0", 6, "n1")]),
            urgent(5),
        ]
    };
    let o = run(&topology_aware(), &[("n1", 8, 110)], jobs());
    assert_eq!(evicted(&o), names(&["big-0"]));
    assert_eq!(planned(&o).get("urgent-0"), Some(&Some("n1".to_string())));
    let node_by_node = run(TIERS, &[("n1", 8, 110)], jobs());
    assert_eq!(evicted(&node_by_node), names(&["small-0", "big-0"]));
}

/// One victim of priority 50 on n1, two of priority 10 on n2: kube-scheduler's
/// order prefers the node whose most important victim matters least, even with
/// more victims; node by node, the fewest evictions win.
#[test]
fn the_node_whose_most_important_victim_matters_least_is_chosen() {
    let jobs = || {
        vec![
            running_job("mid", 50, 1, &[("mid-0", 4, "n1")]),
            running_job("low-a", 10, 1, &[("low-a-0", 2, "n2")]),
            running_job("low-b", 10, 1, &[("low-b-0", 2, "n2")]),
            urgent(4),
        ]
    };
    let nodes = [("n1", 4, 110), ("n2", 4, 110)];
    let o = run(&topology_aware(), &nodes, jobs());
    assert_eq!(evicted(&o), names(&["low-a-0", "low-b-0"]));
    assert_eq!(planned(&o).get("urgent-0"), Some(&Some("n2".to_string())));
    let node_by_node = run(TIERS, &nodes, jobs());
    assert_eq!(evicted(&node_by_node), names(&["mid-0"]));
}

/// Victims equal in priority and number: the node whose victims started last
/// (`status.startTime`) loses the least work.
#[test]
fn among_equal_victims_those_started_last_go() {
    let mut early = running_job("early", 10, 1, &[("early-0", 4, "n1")]);
    early.tasks[0] = started(early.tasks[0].clone(), "2026-01-01T10:00:00Z");
    let mut late = running_job("late", 10, 1, &[("late-0", 4, "n2")]);
    late.tasks[0] = started(late.tasks[0].clone(), "2026-01-01T11:00:00Z");
    let o = run(
        &topology_aware(),
        &[("n1", 4, 110), ("n2", 4, 110)],
        vec![early, late, urgent(4)],
    );
    assert_eq!(evicted(&o), names(&["late-0"]));
}

/// `minCandidateNodesAbsolute` and the percentage say how many nodes the dry run
/// must find before choosing: with both nodes, the one whose victims matter
/// least; with one, the first node found with room, whichever it is, the same
/// on every run.
#[test]
fn the_candidate_node_count_comes_from_the_arguments() {
    let jobs = || {
        vec![
            running_job("mid", 50, 1, &[("mid-0", 4, "n1")]),
            running_job("low-a", 10, 1, &[("low-a-0", 2, "n2")]),
            running_job("low-b", 10, 1, &[("low-b-0", 2, "n2")]),
            urgent(4),
        ]
    };
    let nodes = [("n1", 4, 110), ("n2", 4, 110)];
    let both = conf_with(&[
        "enableTopologyAwarePreemption: true",
        "minCandidateNodesPercentage: 100",
    ]);
    assert_eq!(
        evicted(&run(&both, &nodes, jobs())),
        names(&["low-a-0", "low-b-0"])
    );
    // Volcano's defaults: 10% of 2 nodes, at least 1.
    let one = conf_with(&["enableTopologyAwarePreemption: true"]);
    let first = evicted(&run(&one, &nodes, jobs()));
    assert!(
        first == names(&["mid-0"]) || first == names(&["low-a-0", "low-b-0"]),
        "{first:?}"
    );
    assert_eq!(evicted(&run(&one, &nodes, jobs())), first);
    let capped = conf_with(&[
        "enableTopologyAwarePreemption: true",
        "minCandidateNodesPercentage: 100",
        "maxCandidateNodesAbsolute: 1",
    ]);
    assert_eq!(evicted(&run(&capped, &nodes, jobs())), first);
}

/// gang (minMember 2) runs c (1 CPU), b and a (2 CPUs each); c goes first, and
/// then b only with a. Evicting a and b would make room, but would leave c
/// running alone below the minimum: the whole gang goes.
#[test]
fn keeping_a_victim_never_leaves_a_gang_below_its_minimum() {
    let gang = running_job(
        "gang",
        10,
        2,
        &[("a", 2, "n1"), ("b", 2, "n1"), ("c", 1, "n1")],
    );
    let o = run(&topology_aware(), &[("n1", 5, 110)], vec![gang, urgent(4)]);
    assert_eq!(evicted(&o), names(&["a", "b", "c"]));
}

/// A job of one pod of `priority` holding GPU `gpu` of `node-<node>` whole,
/// labelled `app: <name>`.
fn gpu_job(name: &str, priority: i32, node: usize, gpu: u32) -> JobInfo {
    let mut t = running_task(&gang_key(name), &format!("{name}-0"), node, gpu);
    t.priority = priority;
    let mut pod = (*t.pod).clone();
    pod.metadata.labels = Some(BTreeMap::from([("app".to_string(), name.to_string())]));
    t.pod = Arc::new(pod);
    let mut j = job(name, "q", 1, vec![t]);
    j.priority = priority;
    j
}

/// Two nodes of two GPUs: node-0 holds low-a and low-b (priority 10), node-1
/// holds mid (priority 50) beside a free GPU; urgent asks for two GPUs. Runs the
/// actions `conf` configures under `budgets`; the pods evicted and where urgent
/// waits.
fn run_gpus(conf: &str, budgets: Vec<DisruptionBudget>) -> (BTreeSet<String>, Option<String>) {
    let mut t = gpu_task(&gang_key("urgent"), "urgent-0", 2);
    t.priority = 1000;
    let mut waiting = job("urgent", "q", 1, vec![t]);
    waiting.priority = 1000;
    let jobs = vec![
        gpu_job("low-a", 10, 0, 0),
        gpu_job("low-b", 10, 0, 1),
        gpu_job("mid", 50, 1, 0),
        waiting,
    ];
    let conf = SchedulerConf::parse(conf).expect("configuration");
    let mut st = placed_state(
        gpu_nodes(2, 2, 1),
        vec![QueueInfo::idle(QueueSpec::new("q"))],
        jobs,
    );
    st.budgets = budgets;
    let mut session = Session::open(st, registry::build(&conf).expect("builds"));
    for action in configured(&conf) {
        action.execute(&mut session);
    }
    let o = session.close();
    (evicted(&o), planned(&o).get("urgent-0").cloned().flatten())
}

/// Node by node, one eviction on node-1 wins; topology-aware, the two
/// low-priority pods on node-0 go.
#[test]
fn vgpu_victims_are_chosen_by_the_same_order() {
    assert_eq!(
        run_gpus(&topology_aware(), Vec::new()),
        (names(&["low-a-0", "low-b-0"]), Some("node-0".to_string()))
    );
    assert_eq!(
        run_gpus(TIERS, Vec::new()),
        (names(&["mid-0"]), Some("node-1".to_string()))
    );
}

/// A PodDisruptionBudget lets only one of low-a and low-b go: node-0 is no
/// candidate, and mid on node-1 is evicted instead.
#[test]
fn a_disruption_budget_is_never_broken_for_a_cheaper_node() {
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "low", "namespace": "ns"},
        "spec": {"selector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["low-a", "low-b"]}
        ]}},
        "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1,
                   "expectedPods": 2}
    }))
    .expect("pdb");
    let budget = DisruptionBudget::of(&pdb).expect("budget");
    assert_eq!(
        run_gpus(&topology_aware(), vec![budget]),
        (names(&["mid-0"]), Some("node-1".to_string()))
    );
}
