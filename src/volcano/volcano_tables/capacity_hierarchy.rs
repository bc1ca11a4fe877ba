//! `pkg/scheduler/plugins/capacity/capacity_test.go`, the hierarchical queues:
//! `Test_capacityPlugin_OnSessionOpenWithHierarchy` (enqueue, reclaim and
//! allocate with capacity under `enableHierarchy: true`, predicates and gang) and
//! `Test_capacityPlugin_AncestorReclaimScenarios` (the same with the argument
//! `ancestorReclaimLevel`, and priority where the case registers it) and
//! `Test_buildHierarchicalQueueAttrs_nilSafety` (a session without the root
//! queue, and one whose job names a deleted queue: nothing placed, no crash).
//!
//! Volcano's tasks also count one `pods` each against a queue; this scheduler
//! counts them where Volcano compares them (see [`super::queue_pod_count`]). No
//! case of these tables turns on it.

use super::support::{GroupRow, PodRow, Table, bound, evicted, group, phase, pipelined, pod};
use super::support::{node_alloc, queue, resources, tiers_conf, with};
use crate::resources::Resources;
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::enqueue::Enqueue;
use crate::volcano::actions::reclaim::Reclaim;
use crate::volcano::framework::{Action, GangPhase, SessionOutcome};
use crate::volcano::objects::{QueueSpec, ROOT_QUEUE};
use std::collections::{BTreeMap, BTreeSet};

/// `api.BuildResourceList(cpu, memory, scalars…)`.
fn rl(cpu: &str, memory: &str, scalars: &[(&str, i64)]) -> Resources {
    scalars
        .iter()
        .fold(resources(cpu, memory), |r, (name, n)| with(r, name, *n))
}

/// `buildQueueWithParents(name, parent, deserved, capability)`: an empty list is
/// no list, and a parent of `root` (or none) is the top level.
fn hq(
    name: &str,
    parent: &str,
    deserved: Option<Resources>,
    capability: Option<Resources>,
) -> QueueSpec {
    QueueSpec {
        deserved: deserved.filter(|d| !d.is_empty()),
        parent: Some(parent)
            .filter(|p| !p.is_empty() && *p != ROOT_QUEUE)
            .map(str::to_string),
        ..queue(name, 1, capability.filter(|c| !c.is_empty()))
    }
}

/// A running pod bound to `node`.
fn running(name: &'static str, node: &'static str, r: Resources, group: &'static str) -> PodRow {
    pod(name, node, true, r, group)
}

/// A pending pod.
fn pending(name: &'static str, r: Resources, group: &'static str) -> PodRow {
    pod(name, "", false, r, group)
}

/// `util.BuildPodWithPriority`.
fn prioritised(mut p: PodRow, priority: i32) -> PodRow {
    p.priority = priority;
    p
}

/// `volcano.sh/preemptable: "false"`.
fn not_preemptable(mut p: PodRow) -> PodRow {
    p.not_preemptable = true;
    p
}

/// `util.BuildPodGroupWithMinResources`.
fn with_min(mut g: GroupRow, min: Resources) -> GroupRow {
    g.min_resources = Some(min);
    g
}

/// The tier of these tests: capacity with hierarchy, the switches `capacity`
/// names and `ancestorReclaimLevel` when given; predicates, gang, and priority
/// when `priority`.
fn hierarchical_conf(
    actions: &str,
    capacity: &[&str],
    level: Option<i64>,
    priority: bool,
) -> String {
    let mut tier: Vec<(&str, &[&str])> = vec![
        ("capacity", capacity),
        ("predicates", &["Predicate"]),
        ("gang", &["JobStarving"]),
    ];
    if priority {
        tier.push(("priority", &["JobOrder", "TaskOrder"]));
    }
    let text = tiers_conf(actions, &[&tier]);
    let mut extra = "  - name: capacity\n    enableHierarchy: true\n".to_string();
    if let Some(level) = level {
        extra.push_str(&format!(
            "    arguments:\n      ancestorReclaimLevel: {level}\n"
        ));
    }
    text.replacen("  - name: capacity\n", &extra, 1)
}

/// The tier of the hierarchy and ancestor reclaim tests.
fn conf(level: Option<i64>, priority: bool) -> String {
    hierarchical_conf(
        "enqueue, reclaim, allocate",
        &[
            "Allocatable",
            "Preemptive",
            "Reclaimable",
            "QueueOrder",
            "JobEnqueued",
        ],
        level,
        priority,
    )
}

/// Runs Volcano's actions of these tests (enqueue, reclaim, allocate).
fn run(t: &Table, level: Option<i64>, priority: bool) -> SessionOutcome {
    t.run(
        &conf(level, priority),
        &[&Enqueue as &dyn Action, &Reclaim, &Allocate],
    )
}

/// What a case's session did: binds, pipelined PodGroups, evictions.
#[derive(Debug, PartialEq)]
struct Seen {
    bound: BTreeMap<String, String>,
    pipelined: BTreeMap<String, Vec<String>>,
    evicted: BTreeSet<String>,
}

impl Seen {
    fn of(o: &SessionOutcome) -> Self {
        Self {
            bound: bound(o),
            pipelined: pipelined(o),
            evicted: evicted(o),
        }
    }
}

/// Volcano's `ExpectBindMap`, `ExpectPipeLined` and `ExpectEvicted`.
fn expect(bound: &[(&str, &str)], pipelined: &[(&str, &str)], evicted: &[&str]) -> Seen {
    Seen {
        bound: bound
            .iter()
            .map(|(p, n)| (format!("c1/{p}"), n.to_string()))
            .collect(),
        pipelined: pipelined
            .iter()
            .map(|(g, n)| (format!("c1/{g}"), vec![n.to_string()]))
            .collect(),
        evicted: evicted.iter().map(|p| format!("c1/{p}")).collect(),
    }
}

// ---- Test_capacityPlugin_OnSessionOpenWithHierarchy ----

/// n1: 8 CPUs, 8Gi, 11 pods.
fn n1() -> (&'static str, Resources) {
    ("n1", node_alloc("8", "8Gi", 11))
}

/// root, q1 and q2 (4 CPUs, 4Gi each), q11 (1, 1Gi) and q12 (3, 3Gi) under q1.
fn tree_q1() -> Vec<QueueSpec> {
    vec![
        hq("root", "", None, None),
        hq("q1", "root", None, Some(rl("4", "4Gi", &[]))),
        hq("q2", "root", None, Some(rl("4", "4Gi", &[]))),
        hq("q11", "q1", None, Some(rl("1", "1Gi", &[]))),
        hq("q12", "q1", None, Some(rl("3", "3Gi", &[]))),
    ]
}

fn q3() -> QueueSpec {
    let r = rl("4", "4Gi", &[("pods", 10)]);
    hq("q3", "root", Some(r.clone()), Some(r))
}

fn q4() -> QueueSpec {
    hq(
        "q4",
        "root",
        Some(rl("2", "2Gi", &[("pods", 1)])),
        Some(rl("4", "4Gi", &[("pods", 4)])),
    )
}

/// q31, q32 (deserved 2 CPUs, 2Gi) and q33 (deserved none) under q3.
fn q3x(name: &str) -> QueueSpec {
    let deserved = if name == "q33" { "0" } else { "2" };
    hq(
        name,
        "q3",
        Some(rl(deserved, &format!("{deserved}Gi"), &[("pods", 2)])),
        Some(rl("4", "4Gi", &[("pods", 4)])),
    )
}

fn r(cpu: &str, memory: &str) -> Resources {
    rl(cpu, memory, &[])
}

#[test]
fn case0_pod_allocatable_when_queue_is_leaf_queue() {
    let t = Table {
        nodes: vec![n1()],
        queues: tree_q1(),
        groups: vec![group("pg1", "q11", 1, GangPhase::Inqueue)],
        pods: vec![pending("p1", r("1", "1Gi"), "pg1")],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[("p1", "n1")], &[], &[])
    );
}

#[test]
fn case1_pod_not_allocatable_when_queue_is_not_leaf_queue() {
    let t = Table {
        nodes: vec![n1()],
        queues: tree_q1(),
        groups: vec![group("pg2", "q1", 1, GangPhase::Pending)],
        pods: vec![pending("p2", r("1", "1Gi"), "pg2")],
        ..Table::default()
    };
    assert_eq!(Seen::of(&run(&t, None, false)), expect(&[], &[], &[]));
}

#[test]
fn case2_pod_allocatable_when_queue_has_not_exceed_capability() {
    let t = Table {
        nodes: vec![n1()],
        queues: vec![
            hq("root", "", None, None),
            q3(),
            q4(),
            q3x("q31"),
            q3x("q32"),
        ],
        groups: vec![group("pg3", "q31", 2, GangPhase::Inqueue)],
        pods: vec![
            pending("p3", r("2", "2Gi"), "pg3"),
            pending("p4", r("2", "2Gi"), "pg3"),
        ],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[("p3", "n1"), ("p4", "n1")], &[], &[])
    );
}

#[test]
fn case3_can_reclaim_from_other_queues_when_allocated_less_than_deserved() {
    let t = Table {
        nodes: vec![n1()],
        queues: vec![
            hq("root", "", None, None),
            q3(),
            q3x("q31"),
            q3x("q32"),
            q4(),
        ],
        groups: vec![
            group("pg4", "q4", 1, GangPhase::Running),
            group("pg5", "q31", 1, GangPhase::Running),
            group("pg6", "q32", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            running("p5", "n1", r("4", "4Gi"), "pg4"),
            not_preemptable(running("p6", "n1", r("2", "2Gi"), "pg5")),
            running("p7", "n1", r("2", "2Gi"), "pg5"),
            pending("p8", r("2", "2Gi"), "pg6"),
        ],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[], &[("pg6", "n1")], &["p7"])
    );
}

#[test]
fn case4_pod_is_not_allocatable_when_ancestor_queues_real_capability_not_enough() {
    let t = Table {
        nodes: vec![n1()],
        queues: vec![
            hq("root", "", None, None),
            q3(),
            q3x("q31"),
            q3x("q32"),
            q3x("q33"),
        ],
        groups: vec![
            group("pg5", "q31", 1, GangPhase::Running),
            group("pg7", "q32", 1, GangPhase::Running),
            group("pg8", "q33", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            not_preemptable(running("p6", "n1", r("2", "2Gi"), "pg5")),
            running("p9", "n1", r("2", "2Gi"), "pg7"),
            pending("p10", r("3", "3Gi"), "pg8"),
        ],
        ..Table::default()
    };
    assert_eq!(Seen::of(&run(&t, None, false)), expect(&[], &[], &[]));
}

#[test]
fn case5_if_the_capability_cpu_or_memory_is_not_specified_the_value_should_be_inherited_from_parent_queue()
 {
    let t = Table {
        nodes: vec![n1()],
        queues: vec![
            hq("root", "", None, None),
            hq("q5", "root", None, Some(r("", "4Gi"))),
            hq("q51", "q5", None, Some(r("", "2Gi"))),
        ],
        groups: vec![group("pg9", "q51", 1, GangPhase::Running)],
        pods: vec![pending("p11", r("1", ""), "pg9")],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[("p11", "n1")], &[], &[])
    );
}

#[test]
fn case6_podgroup_cant_be_enqueued_when_any_ancestor_queues_capability_is_not_enough() {
    let t = Table {
        nodes: vec![n1()],
        queues: vec![
            hq("root", "", None, None),
            hq("q6", "root", None, Some(r("2", "4Gi"))),
            hq("q61", "q6", None, None),
            hq("q62", "q6", None, None),
        ],
        groups: vec![
            with_min(group("pg10", "q61", 1, GangPhase::Pending), r("2", "4Gi")),
            with_min(group("pg11", "q62", 1, GangPhase::Pending), r("2", "4Gi")),
        ],
        ..Table::default()
    };
    let o = run(&t, None, false);
    assert_eq!(phase(&o, "pg10"), Some(GangPhase::Inqueue));
    assert_eq!(phase(&o, "pg11"), Some(GangPhase::Pending));
}

#[test]
fn case7_the_sum_of_sub_queue_71_and_72s_guarantee_exceeds_the_capacity_of_queue7_but_should_not_panic()
 {
    let guaranteed = |name: &str| QueueSpec {
        guarantee: Some(r("4", "3Gi")),
        ..hq(name, "q7", None, Some(r("6", "4Gi")))
    };
    let t = Table {
        nodes: vec![n1()],
        queues: vec![
            hq("root", "", None, None),
            hq("q7", "root", None, Some(r("6", "4Gi"))),
            guaranteed("q71"),
            guaranteed("q72"),
        ],
        ..Table::default()
    };
    assert_eq!(Seen::of(&run(&t, None, false)), expect(&[], &[], &[]));
}

/// n-gpu: 8 CPUs, 8Gi, 8 GPUs, 10 pods.
fn gpu_node() -> (&'static str, Resources) {
    (
        "n-gpu",
        with(node_alloc("8", "8Gi", 10), "nvidia.com/gpu", 8),
    )
}

/// n2: 8 CPUs, 8Gi, 8 GPUs, 10 pods and no 1Gi huge pages.
fn n2() -> (&'static str, Resources) {
    let mut alloc = with(node_alloc("8", "8Gi", 10), "nvidia.com/gpu", 8);
    alloc.set("hugepages-1Gi", 0);
    ("n2", alloc)
}

#[test]
fn case8_when_the_queues_deserved_value_has_a_scalar_resource_set_the_check_can_pass() {
    let gpus = |cpu, mem, n| Some(rl(cpu, mem, &[("nvidia.com/gpu", n)]));
    let t = Table {
        nodes: vec![gpu_node()],
        queues: vec![
            hq("root", "", None, None),
            hq("q8", "root", gpus("4", "4Gi", 8), None),
            hq("q81", "q8", gpus("2", "2Gi", 4), None),
            hq("q82", "q8", gpus("2", "2Gi", 4), None),
        ],
        groups: vec![group("pg12", "q81", 1, GangPhase::Inqueue)],
        pods: vec![pending(
            "p12",
            rl("2", "2Gi", &[("nvidia.com/gpu", 1)]),
            "pg12",
        )],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[("p12", "n-gpu")], &[], &[])
    );
}

#[test]
fn case9_when_some_scalar_resources_are_0_in_deserved_the_check_can_still_pass() {
    let deserved = |n| {
        let mut d = rl("2", "2Gi", &[("nvidia.com/gpu", n)]);
        d.set("hugepages-1Gi", 0);
        Some(d)
    };
    let t = Table {
        nodes: vec![n2()],
        queues: vec![
            hq("root", "", None, None),
            hq("q9", "root", deserved(8), None),
            hq("q91", "q9", deserved(4), None),
        ],
        groups: vec![group("pg13", "q91", 1, GangPhase::Inqueue)],
        pods: vec![pending(
            "p13",
            rl("2", "2Gi", &[("nvidia.com/gpu", 1)]),
            "pg13",
        )],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[("p13", "n2")], &[], &[])
    );
}

#[test]
fn case10_root_queues_capability_greater_than_cluster_total_resource_but_should_not_panic() {
    let t = Table {
        nodes: vec![n1()],
        queues: vec![
            hq("root", "", None, Some(r("16", "16Gi"))),
            hq("q10", "root", None, Some(r("10", "4Gi"))),
        ],
        ..Table::default()
    };
    assert_eq!(Seen::of(&run(&t, None, false)), expect(&[], &[], &[]));
}

#[test]
fn case11_if_the_capability_scalar_resources_is_not_specified_the_value_should_be_inherited_from_parent_queue()
 {
    let cap = Some(rl("4", "4Gi", &[("nvidia.com/gpu", 4)]));
    let four_gpus = || rl("1", "1Gi", &[("nvidia.com/gpu", 4)]);
    let t = Table {
        nodes: vec![n2()],
        queues: vec![
            hq("root", "", None, None),
            hq("case11_queue1", "root", None, None),
            hq("case11_queue11", "case11_queue1", None, cap.clone()),
            hq("case11_queue12", "case11_queue1", None, cap),
        ],
        groups: vec![
            group("pg14", "case11_queue11", 1, GangPhase::Inqueue),
            group("pg15", "case11_queue12", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            pending("p14", four_gpus(), "pg14"),
            pending("p15", four_gpus(), "pg15"),
        ],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[("p14", "n2"), ("p15", "n2")], &[], &[])
    );
}

/// root deserving 16 CPUs, 16Gi, 4 A100s and 1000 rdma.
fn rich_root() -> QueueSpec {
    hq(
        "root",
        "",
        Some(rl("16", "16Gi", &[("nvidia.com/a100", 4), ("rdma", 1000)])),
        None,
    )
}

/// 1 CPU, 1Gi, `a100` A100s and one RDMA channel.
fn a100(n: i64) -> Resources {
    rl("1", "1Gi", &[("nvidia.com/a100", n), ("rdma/hca", 1)])
}

/// Only `n` A100s.
fn a100_only(n: i64) -> Option<Resources> {
    Some(rl("", "", &[("nvidia.com/a100", n)]))
}

/// A node of 16 CPUs and 16Gi (8 and 8Gi when `small`) with `a100s` A100s, 1001
/// RDMA channels and 11 pods.
fn rdma_node(name: &'static str, small: bool, a100s: i64) -> (&'static str, Resources) {
    let (cpu, mem) = if small { ("8", "8Gi") } else { ("16", "16Gi") };
    let alloc = rl(cpu, mem, &[("nvidia.com/a100", a100s), ("rdma/hca", 1001)]);
    (name, with(alloc, "pods", 11))
}

#[test]
fn case12_can_reclaim_from_other_queues_when_allocated_less_or_equal_deserved_on_a_single_scalar_dimension()
 {
    let t = Table {
        nodes: vec![rdma_node("n3", false, 5)],
        queues: vec![
            rich_root(),
            hq("case12_queue1", "root", a100_only(2), None),
            hq("case12_queue11", "case12_queue1", a100_only(2), None),
            hq("case12_queue12", "case12_queue1", None, None),
        ],
        groups: vec![
            group("pg16", "case12_queue11", 1, GangPhase::Inqueue),
            group("pg17", "case12_queue12", 1, GangPhase::Running),
            group("pg18", "case12_queue12", 1, GangPhase::Running),
        ],
        pods: vec![
            pending("p16", a100(2), "pg16"),
            running("p17", "n3", a100(2), "pg17"),
            not_preemptable(running("p18", "n3", a100(2), "pg18")),
        ],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, None, false)),
        expect(&[], &[("pg16", "n3")], &["p17"])
    );
}

// ---- Test_capacityPlugin_AncestorReclaimScenarios ----

/// `buildProjectQueueTree`: two projects under a rich root, each with a
/// non-preemptable queue (deserving and capped) and a preemptable one (neither).
fn project_tree() -> Vec<QueueSpec> {
    vec![
        rich_root(),
        hq("project1_root", "root", a100_only(1), a100_only(2)),
        hq(
            "project1_non-preemptable",
            "project1_root",
            a100_only(1),
            a100_only(1),
        ),
        hq("project1_preemptable", "project1_root", None, None),
        hq("project2_root", "root", a100_only(3), a100_only(4)),
        hq(
            "project2_non-preemptable",
            "project2_root",
            a100_only(3),
            a100_only(3),
        ),
        hq("project2_preemptable", "project2_root", None, None),
    ]
}

#[test]
fn ancestor_case1_can_reclaim_based_on_parent_deserved_when_ancestor_reclaim_level_is_1() {
    let t = Table {
        nodes: vec![rdma_node("n1", false, 4)],
        queues: vec![
            rich_root(),
            hq("case1_queue1", "root", a100_only(1), None),
            hq("case1_queue11", "case1_queue1", None, None),
            hq("case1_queue2", "root", None, None),
        ],
        groups: vec![
            group("pg1", "case1_queue2", 1, GangPhase::Running),
            group("pg2", "case1_queue11", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            running("p1", "n1", a100(4), "pg1"),
            pending("p2", a100(1), "pg2"),
        ],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, Some(1), true)),
        expect(&[], &[("pg2", "n1")], &["p1"])
    );
}

#[test]
fn ancestor_case2_cross_parent_reclaim_pipelines_project1_pending_job_when_project2_child_and_parent_are_both_over_deserved()
 {
    let in_project2 = |g| group(g, "project2_preemptable", 1, GangPhase::Running);
    let t = Table {
        nodes: vec![rdma_node("n1", false, 4)],
        queues: project_tree(),
        groups: vec![
            in_project2("pg1"),
            in_project2("pg2"),
            in_project2("pg3"),
            in_project2("pg4"),
            group("pg5", "project1_preemptable", 1, GangPhase::Pending),
        ],
        pods: vec![
            prioritised(running("p1", "n1", a100(1), "pg1"), 2),
            prioritised(running("p2", "n1", a100(1), "pg2"), 2),
            prioritised(running("p3", "n1", a100(1), "pg3"), 2),
            prioritised(running("p4", "n1", a100(1), "pg4"), 1),
            pending("p5", a100(1), "pg5"),
        ],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, Some(1), true)),
        expect(&[], &[("pg5", "n1")], &["p4"])
    );
}

#[test]
fn ancestor_case3_cross_parent_reclaim_can_evict_sibling_queue_victim_first() {
    let in_project2 = |g| group(g, "project2_preemptable", 1, GangPhase::Running);
    let t = Table {
        nodes: vec![rdma_node("n1", false, 4)],
        queues: project_tree(),
        groups: vec![
            in_project2("pg1"),
            in_project2("pg2"),
            in_project2("pg3"),
            group(
                "pg4_reclaimed",
                "project2_preemptable",
                1,
                GangPhase::Inqueue,
            ),
            group(
                "pg5_pipelined",
                "project1_preemptable",
                1,
                GangPhase::Running,
            ),
            group("pg6", "project2_non-preemptable", 1, GangPhase::Pending),
        ],
        pods: vec![
            prioritised(running("p1", "n1", a100(1), "pg1"), 2),
            prioritised(running("p2", "n1", a100(1), "pg2"), 2),
            prioritised(running("p3", "n1", a100(1), "pg3"), 2),
            pending("p4", a100(1), "pg4_reclaimed"),
            running("p5", "n1", a100(1), "pg5_pipelined"),
            pending("p6", a100(1), "pg6"),
        ],
        ..Table::default()
    };
    assert_eq!(
        Seen::of(&run(&t, Some(1), true)),
        expect(&[], &[("pg6", "n1")], &["p3"])
    );
}

#[test]
fn ancestor_case4_cross_parent_reclaim_is_blocked_when_victim_child_is_not_over_deserved() {
    let t = Table {
        nodes: vec![rdma_node("n1", true, 1)],
        queues: vec![
            rich_root(),
            hq("case4_parent1", "root", a100_only(1), None),
            hq("case4_child1", "case4_parent1", a100_only(1), None),
            hq("case4_child1_sibling", "case4_parent1", None, None),
            hq("case4_parent2", "root", a100_only(1), None),
            hq("case4_child2", "case4_parent2", a100_only(1), None),
        ],
        groups: vec![
            group("pg1", "case4_child1", 1, GangPhase::Running),
            group("pg2", "case4_child2", 1, GangPhase::Pending),
            group("pg3", "case4_child1_sibling", 1, GangPhase::Running),
        ],
        pods: vec![
            running("p1", "n1", a100(1), "pg1"),
            pending("p2", a100(1), "pg2"),
            not_preemptable(running("p3", "n1", a100(1), "pg3")),
        ],
        ..Table::default()
    };
    assert_eq!(Seen::of(&run(&t, Some(1), true)), expect(&[], &[], &[]));
}

/// n1 of the level cases: 2 CPUs, 2Gi, 10 pods.
fn small_node() -> (&'static str, Resources) {
    ("n1", node_alloc("2", "2Gi", 10))
}

/// A victim (2 CPUs, 2Gi) running in `victim_queue` and a reclaimer asking as
/// much in `reclaimer_queue`, on [`small_node`].
fn contest(
    queues: Vec<QueueSpec>,
    victim_queue: &'static str,
    reclaimer_queue: &'static str,
) -> Table {
    Table {
        nodes: vec![small_node()],
        queues,
        groups: vec![
            group("pg-victim", victim_queue, 1, GangPhase::Running),
            group("pg-reclaimer", reclaimer_queue, 1, GangPhase::Inqueue),
        ],
        pods: vec![
            running("p-victim", "n1", r("2", "2Gi"), "pg-victim"),
            pending("p-reclaimer", r("2", "2Gi"), "pg-reclaimer"),
        ],
        ..Table::default()
    }
}

/// `buildLevelSemanticsTree`: queue-a under parent-a under grand-a, all
/// deserving 2 CPUs and 2Gi; queue-b under parent-b (1 CPU, 1Gi each) under
/// grand-b (3 CPUs, 3Gi).
fn level_tree() -> Vec<QueueSpec> {
    let q = |name, parent, d: &str, c: &str| {
        hq(
            name,
            parent,
            Some(r(d, &format!("{d}Gi"))),
            Some(r(c, &format!("{c}Gi"))),
        )
    };
    vec![
        hq("root", "", None, None),
        q("grand-a", "root", "2", "4"),
        q("parent-a", "grand-a", "2", "2"),
        q("queue-a", "parent-a", "2", "2"),
        q("grand-b", "root", "3", "4"),
        q("parent-b", "grand-b", "1", "2"),
        q("queue-b", "parent-b", "1", "2"),
    ]
}

#[test]
fn ancestor_case5_level_0_allows_reclaim_based_on_leaf_level_deserved_checks() {
    let t = contest(level_tree(), "queue-b", "queue-a");
    assert_eq!(
        Seen::of(&run(&t, Some(0), false)),
        expect(&[], &[("pg-reclaimer", "n1")], &["p-victim"])
    );
}

#[test]
fn ancestor_case6_level_1_allows_reclaim_when_parent_level_check_passes() {
    let t = contest(level_tree(), "queue-b", "queue-a");
    assert_eq!(
        Seen::of(&run(&t, Some(1), false)),
        expect(&[], &[("pg-reclaimer", "n1")], &["p-victim"])
    );
}

#[test]
fn ancestor_case7_level_2_blocks_reclaim_when_grandparent_level_check_fails() {
    let t = contest(level_tree(), "queue-b", "queue-a");
    assert_eq!(Seen::of(&run(&t, Some(2), false)), expect(&[], &[], &[]));
}

#[test]
fn ancestor_case8_level_1_blocks_sibling_reclaim_when_leaf_deserved_is_unset_and_no_ancestor_gate_applies()
 {
    let t = contest(
        vec![
            hq("root", "", None, None),
            hq("parent", "root", Some(r("4", "4Gi")), Some(r("4", "4Gi"))),
            hq("queue-a", "parent", None, None),
            hq("queue-b", "parent", None, None),
        ],
        "queue-b",
        "queue-a",
    );
    assert_eq!(Seen::of(&run(&t, Some(1), false)), expect(&[], &[], &[]));
}

#[test]
fn ancestor_case9_level_2_blocks_reclaim_when_leaf_deserved_is_unset_and_queues_share_grandparent()
{
    let t = contest(
        vec![
            hq("root", "", None, None),
            hq("grand", "root", Some(r("2", "2Gi")), Some(r("2", "2Gi"))),
            hq("parent-a", "grand", None, None),
            hq("queue-a", "parent-a", None, None),
            hq("parent-b", "grand", None, None),
            hq("queue-b", "parent-b", None, None),
        ],
        "queue-b",
        "queue-a",
    );
    assert_eq!(Seen::of(&run(&t, Some(2), false)), expect(&[], &[], &[]));
}

#[test]
fn ancestor_case10_level_2_blocks_reclaim_in_unbalanced_shared_grandparent_tree_when_leaf_deserved_is_unset()
 {
    let t = contest(
        vec![
            hq("root", "", None, None),
            hq("grand", "root", Some(r("1", "1Gi")), Some(r("2", "2Gi"))),
            hq(
                "parent-deep",
                "grand",
                Some(r("1", "1Gi")),
                Some(r("2", "2Gi")),
            ),
            hq("queue-deep", "parent-deep", None, None),
            hq("queue-shallow", "grand", None, None),
        ],
        "queue-deep",
        "queue-shallow",
    );
    assert_eq!(Seen::of(&run(&t, Some(2), false)), expect(&[], &[], &[]));
}

#[test]
fn ancestor_case11_unbalanced_level2_blocks_reclaim_when_depth_2_ancestor_is_not_over_deserved() {
    let gpus = |n| rl("1", "1Gi", &[("nvidia.com/a100", n)]);
    let t = Table {
        nodes: vec![("n1", with(node_alloc("4", "4Gi", 10), "nvidia.com/a100", 2))],
        queues: vec![
            hq("root", "", None, None),
            hq("shallow-parent", "root", a100_only(1), None),
            hq("queue-shallow", "shallow-parent", a100_only(1), None),
            hq("deep-grand", "root", a100_only(2), None),
            hq("deep-parent", "deep-grand", a100_only(1), None),
            hq("queue-deep", "deep-parent", a100_only(1), None),
        ],
        groups: vec![
            group("pg-victim", "queue-deep", 1, GangPhase::Running),
            group("pg-reclaimer", "queue-shallow", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            running("p-victim", "n1", gpus(2), "pg-victim"),
            pending("p-reclaimer", gpus(1), "pg-reclaimer"),
        ],
        ..Table::default()
    };
    assert_eq!(Seen::of(&run(&t, Some(2), false)), expect(&[], &[], &[]));
}

// ---- Test_buildHierarchicalQueueAttrs_nilSafety ----

/// Allocate alone with the tier of that test (capacity without its preemptive
/// switch).
fn allocate_only(t: &Table) -> Seen {
    let conf = hierarchical_conf(
        "allocate",
        &["Allocatable", "Reclaimable", "QueueOrder", "JobEnqueued"],
        None,
        false,
    );
    Seen::of(&t.run(&conf, &[&Allocate as &dyn Action]))
}

#[test]
fn nil_safety_no_panic_when_root_queue_is_absent() {
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4Gi", 10))],
        ..Table::default()
    };
    assert_eq!(allocate_only(&t), expect(&[], &[], &[]));
}

#[test]
fn nil_safety_no_panic_when_job_references_a_deleted_queue() {
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4Gi", 10))],
        queues: vec![hq("root", "", None, None)],
        groups: vec![group("pg-orphan", "deleted-queue", 1, GangPhase::Inqueue)],
        pods: vec![pending("orphan", r("1", "1Gi"), "pg-orphan")],
        ..Table::default()
    };
    assert_eq!(allocate_only(&t), expect(&[], &[], &[]));
}
