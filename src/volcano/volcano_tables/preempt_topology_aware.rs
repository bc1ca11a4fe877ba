//! `pkg/scheduler/actions/preempt/preempt_test.go` (`TestTopologyAwarePreempt`):
//! the preempt action with `enableTopologyAwarePreemption: true` in the
//! configuration's `configurations:` section, read as a user's
//! volcano-scheduler.conf is ([`crate::volcano::actions::configured`]), and the
//! tier of that test: conformance, gang, priority, proportion (with its
//! predicate) and predicates. PodGroups of "low-priority" (10) and
//! "high-priority" (100000). Every case of `TestTopologyAwarePreempt` is here.
//!
//! Volcano's tier lists capacity too, with only its queue order on. Here a
//! configuration listing capacity makes proportion step aside (see
//! [`crate::volcano::plugins::proportion`]), which would take proportion's
//! queue capability check away from the cases that turn on it; capacity's queue
//! order decides nothing in these cases (every preemptor's queue is the only
//! one with a waiting job), so the tier leaves it out.

use super::support::{
    GroupRow, PREEMPTING_PLUGINS, PodRow, Table, evicted, group, node_alloc, pod, queue, resources,
    tiers_conf,
};
use crate::resources::Resources;
use crate::volcano::actions::configured;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::{Action, GangPhase};
use std::collections::BTreeSet;

/// `TestTopologyAwarePreempt`'s tier, and the preempt action's argument.
fn conf() -> String {
    let tiers = tiers_conf(
        "preempt",
        &[&[
            PREEMPTING_PLUGINS,
            &[
                (
                    "proportion",
                    &["Overused", "Allocatable", "QueueOrder", "Predicate"],
                ),
                ("predicates", &["Preemptable", "Predicate"]),
            ],
        ]
        .concat()],
    );
    format!(
        "{tiers}configurations:\n- name: preempt\n  arguments:\n    enableTopologyAwarePreemption: true\n"
    )
}

const LOW: i32 = 10;
const HIGH: i32 = 100_000;

/// Runs the configured actions (preempt alone) on the table; the pods evicted.
fn run(t: &Table) -> BTreeSet<String> {
    let text = conf();
    let actions = match SchedulerConf::parse(&text) {
        Ok(c) => configured(&c),
        Err(e) => panic!("configuration: {e}"),
    };
    let actions: Vec<&dyn Action> = actions.iter().map(AsRef::as_ref).collect();
    evicted(&t.run(&text, &actions))
}

/// `util.BuildPodGroupWithPrio(name, "c1", queue, min, …, phase, priority)`.
fn prio_group(
    name: &'static str,
    queue: &'static str,
    min: usize,
    phase: GangPhase,
    priority: i32,
) -> GroupRow {
    let mut g = group(name, queue, min, phase);
    g.priority = priority;
    g
}

/// pg1 of low priority (minMember `low_min`) and pg2 of high priority
/// (minMember 1), both Inqueue in q1.
fn low_and_high(low_min: usize) -> Vec<GroupRow> {
    vec![
        prio_group("pg1", "q1", low_min, GangPhase::Inqueue, LOW),
        prio_group("pg2", "q1", 1, GangPhase::Inqueue, HIGH),
    ]
}

/// One node `n1` of `cpu` CPUs, `memory` and `pods` pods, queue q1 of
/// capability `cap`.
fn table(
    (cpu, memory, pods_cap): (&str, &str, i64),
    cap: Option<Resources>,
    groups: Vec<GroupRow>,
    pods: Vec<PodRow>,
) -> Table {
    Table {
        nodes: vec![("n1", node_alloc(cpu, memory, pods_cap))],
        queues: vec![queue("q1", 1, cap)],
        groups,
        pods,
        ..Table::default()
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| format!("c1/{n}")).collect()
}

fn one_g(name: &'static str, node: &'static str, running: bool, group: &'static str) -> PodRow {
    pod(name, node, running, resources("1", "1G"), group)
}

/// `util.BuildPod` with `volcano.sh/preemptable: "false"`.
fn kept(mut p: PodRow) -> PodRow {
    p.not_preemptable = true;
    p
}

/// `buildPodWithPodAntiAffinity`: required anti-affinity, on the node's
/// hostname, to pods with the pod's own labels.
fn anti_affine(mut p: PodRow, labels: Vec<(&'static str, &'static str)>) -> PodRow {
    let match_labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), (*v).into()))
        .collect();
    p.affinity = Some(serde_json::json!({
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": match_labels},
                "topologyKey": "kubernetes.io/hostname"
            }]
        }
    }));
    p.labels = labels;
    p
}

#[test]
fn do_not_preempt_if_there_are_enough_idle_resources() {
    let t = table(
        ("10", "10G", 10),
        None,
        vec![group("pg1", "q1", 3, GangPhase::Inqueue)],
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            one_g("preemptor1", "", false, "pg1"),
        ],
    );
    assert_eq!(run(&t), set(&[]));
}

#[test]
fn do_not_preempt_if_job_is_pipelined() {
    let t = table(
        ("3", "3G", 10),
        None,
        vec![
            group("pg1", "q1", 1, GangPhase::Inqueue),
            group("pg2", "q1", 1, GangPhase::Inqueue),
        ],
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            one_g("preemptee3", "n1", true, "pg2"),
            one_g("preemptor2", "", false, "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&[]));
}

#[test]
fn preempt_one_task_of_different_job_to_fit_both_jobs_on_one_node() {
    let t = table(
        ("2", "2G", 10),
        None,
        low_and_high(1),
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            kept(one_g("preemptee2", "n1", true, "pg1")),
            one_g("preemptor1", "", false, "pg2"),
            one_g("preemptor2", "", false, "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&["preemptee1"]));
}

#[test]
fn preempt_enough_tasks_to_fit_large_task_of_different_job() {
    let t = table(
        ("6", "6G", 10),
        None,
        low_and_high(1),
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            kept(one_g("preemptee3", "n1", true, "pg1")),
            pod("preemptor1", "", false, resources("5", "5G"), "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&["preemptee2", "preemptee1"]));
}

/// The node has room; the queue (capability 4 CPUs) does not: Volcano evicts.
#[test]
fn preempt_low_priority_job_in_same_queue() {
    let t = table(
        ("12", "12G", 10),
        Some(resources("4", "4G")),
        low_and_high(0),
        vec![
            pod("preemptee1", "n1", true, resources("3", "3G"), "pg1"),
            pod("preemptor1", "", false, resources("3", "3G"), "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&["preemptee1"]));
}

#[test]
fn preempt_low_priority_job_in_same_queue_allocatable_and_has_enough_resource_dont_preempt() {
    let t = table(
        ("12", "12G", 10),
        Some(resources("6", "6G")),
        low_and_high(1),
        vec![
            pod("preemptee1", "n1", true, resources("3", "3G"), "pg1"),
            pod("preemptor1", "", false, resources("3", "3G"), "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&[]));
}

#[test]
fn preempt_low_priority_job_in_same_queue_but_not_pod_with_preemptable_false_or_higher_priority() {
    let mut preemptee3 = one_g("preemptee3", "n1", true, "pg1");
    preemptee3.priority = HIGH;
    let t = table(
        ("12", "12G", 10),
        Some(resources("3", "3G")),
        low_and_high(1),
        vec![
            kept(one_g("preemptee1", "n1", true, "pg1")),
            one_g("preemptee2", "n1", true, "pg1"),
            preemptee3,
            one_g("preemptor1", "", false, "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&["preemptee2"]));
}

/// The node takes one pod: a best-effort pod holds its only slot.
#[test]
fn un_best_effort_high_priority_pod_preempt_best_effort_low_priority_pod_in_same_queue() {
    let t = table(
        ("12", "12G", 1),
        Some(resources("6", "6G")),
        low_and_high(0),
        vec![
            pod("preemptee1", "n1", true, Resources::default(), "pg1"),
            pod("preemptor1", "", false, resources("3", "3G"), "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&["preemptee1"]));
}

#[test]
fn best_effort_high_priority_pod_preempt_best_effort_low_priority_pod_in_same_queue() {
    let t = table(
        ("12", "12G", 1),
        Some(resources("6", "6G")),
        low_and_high(0),
        vec![
            pod("preemptee1", "n1", true, Resources::default(), "pg1"),
            pod("preemptor1", "", false, Resources::default(), "pg2"),
        ],
    );
    assert_eq!(run(&t), set(&["preemptee1"]));
}

#[test]
fn can_not_preempt_resources_when_task_preemption_policy_is_never() {
    let mut preemptor = one_g("preemptor1", "", false, "pg2");
    preemptor.never_preempts = true;
    let t = table(
        ("1", "1Gi", 1),
        None,
        low_and_high(0),
        vec![one_g("preemptee1", "n1", true, "pg1"), preemptor],
    );
    assert_eq!(run(&t), set(&[]));
}

/// preemptor1 repels, on the node's hostname, pods labelled `test: test`:
/// preemptee2 (which repels them too) must go, preemptee1 may stay.
#[test]
fn preempt_low_priority_pod_when_high_priority_pod_has_pod_anti_affinity_conflict() {
    let mut t = table(
        ("2", "2Gi", 2),
        Some(resources("2", "2G")),
        vec![
            prio_group("pg1", "q1", 0, GangPhase::Inqueue, LOW),
            prio_group("pg2", "q1", 0, GangPhase::Inqueue, LOW),
            prio_group("pg3", "q1", 1, GangPhase::Inqueue, HIGH),
        ],
        vec![
            one_g("preemptee1", "n1", true, "pg2"),
            anti_affine(
                one_g("preemptee2", "n1", true, "pg1"),
                vec![("volcano.sh/preemptable", "true"), ("test", "test")],
            ),
            anti_affine(
                one_g("preemptor1", "", false, "pg3"),
                vec![("test", "test")],
            ),
        ],
    );
    t.node_labels = vec![("n1", "kubernetes.io/hostname", "n1")];
    assert_eq!(run(&t), set(&["preemptee2"]));
}

/// Within q1 only preemptee1 may make room: preemptee2 runs in q2.
#[test]
fn preemption_with_priority_queues() {
    let mut q1 = queue("q1", 1, Some(resources("1", "1G")));
    q1.priority = 1;
    q1.deserved = Some(resources("1", "1G"));
    let mut q2 = queue("q2", 1, Some(resources("1", "1G")));
    q2.priority = 10;
    q2.deserved = Some(resources("1", "1G"));
    let t = Table {
        nodes: vec![("n1", node_alloc("2", "2Gi", 2))],
        queues: vec![q1, q2],
        groups: vec![
            prio_group("pg3", "q2", 1, GangPhase::Running, HIGH),
            prio_group("pg1", "q1", 0, GangPhase::Running, LOW),
            prio_group("pg2", "q1", 1, GangPhase::Inqueue, HIGH),
        ],
        pods: vec![
            one_g("preemptee2", "n1", true, "pg3"),
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptor1", "", false, "pg2"),
        ],
        ..Table::default()
    };
    assert_eq!(run(&t), set(&["preemptee1"]));
}
