//! `pkg/scheduler/plugins/capacity/capacity_test.go`, flat queues:
//! `TestEnqueueAndAllocatable` (enqueue then allocate with capacity alone: queues
//! with an explicit deserved amount and capability, pods that ask only CPU or
//! only memory), `Test_capacityPlugin_OnSessionOpenWithoutHierarchy` (allocate
//! then reclaim with capacity, predicates and gang),
//! `TestJobEnqueuedOnOtherPluginsReject` and
//! `TestNoDoubleCountingForInqueueJobWithBindingTasks` (the scenarios of
//! [`super::inqueue_accounting`], with capacity). The hierarchical tests of
//! the same file are in [`super::capacity_hierarchy`].
//!
//! Left out:
//! - `Test_updateQueueAttrShare` calls a Go internal of the plugin on
//!   hand-built queue attributes, with no session around it.
//! - The DRA tests (`TestCapacityPluginDRA`,
//!   `TestParseDRAResourceListCombinesCountAndCapacity`,
//!   `TestSharedResourceClaimIsChargedOnce`,
//!   `TestJobEnqueueableChecksDRAWithoutMinResources`,
//!   `TestJobEnqueueableAccountsDRAInqueue`, `TestDRAAllocatableIgnoresInqueue`,
//!   `TestJobEnqueuedUpdatesDRAInqueueForDRAOnlyJob`,
//!   `TestCheckDRAAllocatable_overflowRejected`) charge queues for
//!   ResourceClaims through DeviceClasses (Dynamic Resource Allocation), which
//!   this scheduler does not read: its GPUs are vGPUs from the device plugin's
//!   node registration.

use super::inqueue_accounting::{binding_tasks_then_a_newcomer, enqueue_after_a_co_tier_refusal};
use super::support::{
    Table, bound, closed, evicted, group, node_alloc, pipelined, pod, queue, resources, tiers_conf,
    with,
};
use crate::resources::Resources;
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::enqueue::Enqueue;
use crate::volcano::actions::reclaim::Reclaim;
use crate::volcano::framework::{Action, GangPhase};
use crate::volcano::objects::QueueSpec;
use std::collections::BTreeMap;

/// `util.BuildQueueWithResourcesQuantity(name, deserved, capability)`.
fn deserving(name: &str, deserved: Resources, capability: Resources) -> QueueSpec {
    QueueSpec {
        deserved: Some(deserved),
        ..queue(name, 1, Some(capability))
    }
}

/// pod1 (1 CPU, 3G) of pg1 in q1 on n1 and pod2 (3 CPUs, 1G) of pg2 in q2 on n2,
/// both Running; then `waiting`, a pending pod of its own Pending PodGroup
/// (minResources its request) in `queue`; enqueue and allocate with capacity.
fn run(
    waiting: (&'static str, &'static str, &'static str, (&str, &str)),
    running: bool,
) -> BTreeMap<String, String> {
    let (pod_name, pg, q, r) = waiting;
    let single = |name, queue, phase, (cpu, mem): (&str, &str)| {
        let mut g = group(name, queue, 1, phase);
        g.min_resources = Some(resources(cpu, mem));
        g
    };
    let mut groups = vec![single(pg, q, GangPhase::Pending, r)];
    let mut pods = vec![pod(pod_name, "", false, resources(r.0, r.1), pg)];
    let mut queues = vec![
        deserving("q1", resources("2", "2G"), resources("2", "2G")),
        deserving("q2", resources("2", "2G"), resources("3", "3G")),
    ];
    if running {
        groups.push(single("pg1", "q1", GangPhase::Running, ("1", "3G")));
        groups.push(single("pg2", "q2", GangPhase::Running, ("3", "1G")));
        pods.push(pod("pod1", "n1", true, resources("1", "3G"), "pg1"));
        pods.push(pod("pod2", "n2", true, resources("3", "1G"), "pg2"));
    } else {
        queues = vec![closed(queue("q3", 1, Some(resources("3", "3G"))))];
    }
    let t = Table {
        nodes: vec![
            ("n1", node_alloc("3", "3G", 10)),
            ("n2", node_alloc("3", "3G", 10)),
        ],
        queues,
        groups,
        pods,
        ..Table::default()
    };
    let conf = tiers_conf(
        "enqueue, allocate",
        &[&[(
            "capacity",
            &["Allocatable", "Preemptive", "Overused", "JobEnqueued"],
        )]],
    );
    bound(&t.run(&conf, &[&Enqueue as &dyn Action, &Allocate]))
}

fn binds(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(p, n)| (format!("c1/{p}"), n.to_string()))
        .collect()
}

#[test]
fn case0_memory_exceed_derserved_job_only_request_cpu_can_be_enqueued_and_allocated() {
    assert_eq!(
        run(("pod3", "pg3", "q1", ("1", "0G")), true),
        binds(&[("pod3", "n1")])
    );
}

#[test]
fn case1_cpu_exceed_derserved_job_only_request_memory_can_be_enqueued_and_allocated() {
    assert_eq!(
        run(("pod4", "pg4", "q2", ("0", "1G")), true),
        binds(&[("pod4", "n2")])
    );
}

#[test]
fn case2_exceed_capacity_can_not_enqueue() {
    assert_eq!(run(("pod5", "pg5", "q1", ("1", "1G")), true), binds(&[]));
}

#[test]
fn case4_queue_with_non_open_state_can_not_enqueue() {
    assert_eq!(run(("pod6", "pg6", "q3", ("1", "1G")), false), binds(&[]));
}

/// A case of `Test_capacityPlugin_OnSessionOpenWithoutHierarchy`: every PodGroup
/// has minMember 1, Running when its pod is, Inqueue otherwise.
struct Case {
    nodes: Vec<(&'static str, Resources)>,
    selector_nodes: &'static [&'static str],
    /// name, deserved, capability, priority.
    queues: Vec<(&'static str, Option<Resources>, Option<Resources>, i32)>,
    /// pod, node, request, group, queue.
    pods: Vec<(
        &'static str,
        &'static str,
        Resources,
        &'static str,
        &'static str,
    )>,
    not_preemptable: &'static [&'static str],
    selects_worker: &'static [&'static str],
}

/// What a case's session did: binds, pipelined PodGroups, evictions.
type Seen = (
    BTreeMap<String, String>,
    BTreeMap<String, Vec<String>>,
    std::collections::BTreeSet<String>,
);

impl Case {
    fn run(self) -> Seen {
        let groups = self
            .pods
            .iter()
            .map(|(_, node, _, g, q)| {
                let phase = if node.is_empty() {
                    GangPhase::Inqueue
                } else {
                    GangPhase::Running
                };
                group(g, q, 1, phase)
            })
            .collect();
        let pods = self
            .pods
            .iter()
            .map(|(name, node, r, g, _)| {
                let mut p = pod(name, node, !node.is_empty(), r.clone(), g);
                p.not_preemptable = self.not_preemptable.contains(name);
                if self.selects_worker.contains(name) {
                    p.node_selector = vec![("selector", "worker")];
                }
                p
            })
            .collect();
        let queues = self
            .queues
            .into_iter()
            .map(|(name, deserved, capability, priority)| QueueSpec {
                deserved,
                priority,
                ..queue(name, 1, capability)
            })
            .collect();
        let t = Table {
            nodes: self.nodes,
            node_labels: self
                .selector_nodes
                .iter()
                .map(|n| (*n, "selector", "worker"))
                .collect(),
            queues,
            groups,
            pods,
        };
        let conf = tiers_conf(
            "allocate, reclaim",
            &[&[
                (
                    "capacity",
                    &["Allocatable", "Preemptive", "Reclaimable", "QueueOrder"],
                ),
                ("predicates", &["Predicate"]),
                ("gang", &["JobStarving"]),
            ]],
        );
        let o = t.run(&conf, &[&Allocate as &dyn Action, &Reclaim]);
        (bound(&o), pipelined(&o), evicted(&o))
    }
}

fn r(cpu: &str, mem: &str) -> Resources {
    resources(cpu, mem)
}

/// n1 (selector: worker) and n2, 2 CPUs and 4Gi each.
fn workers() -> Vec<(&'static str, Resources)> {
    vec![
        ("n1", node_alloc("2", "4Gi", 10)),
        ("n2", node_alloc("2", "4Gi", 10)),
    ]
}

fn seen(binds: &[(&str, &str)], pipelined: &[(&str, &str)], evicted: &[&str]) -> Seen {
    (
        self::binds(binds),
        pipelined
            .iter()
            .map(|(g, n)| (format!("c1/{g}"), vec![n.to_string()]))
            .collect(),
        evicted.iter().map(|p| format!("c1/{p}")).collect(),
    )
}

#[test]
fn case0_pod_allocatable_when_queue_has_not_exceed_capability() {
    let c = Case {
        nodes: workers(),
        selector_nodes: &["n1"],
        queues: vec![("q1", None, Some(r("2", "2Gi")), 0)],
        pods: vec![
            ("p1", "n1", r("1", "1Gi"), "pg1", "q1"),
            ("p2", "", r("1", "1Gi"), "pg2", "q1"),
        ],
        not_preemptable: &[],
        selects_worker: &["p2"],
    };
    assert_eq!(c.run(), seen(&[("p2", "n1")], &[], &[]));
}

#[test]
fn case1_pod_not_allocatable_when_queue_exceed_queue_capability() {
    let c = Case {
        nodes: workers(),
        selector_nodes: &["n1"],
        queues: vec![("q2", None, Some(r("1.5", "1.5Gi")), 0)],
        pods: vec![
            ("p3", "n1", r("1", "1Gi"), "pg3", "q2"),
            ("p4", "", r("1", "1Gi"), "pg4", "q2"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[], &[]));
}

#[test]
fn case2_can_reclaim_from_other_queues_when_allocated_less_than_deserved() {
    let c = Case {
        nodes: workers(),
        selector_nodes: &["n1"],
        queues: vec![
            ("q3", Some(r("2", "4Gi")), None, 0),
            ("q4", Some(r("2", "4Gi")), None, 0),
        ],
        pods: vec![
            ("p5", "n1", r("2", "4Gi"), "pg5", "q3"),
            ("p6", "n2", r("2", "4Gi"), "pg5", "q3"),
            ("p7", "", r("2", "4Gi"), "pg6", "q4"),
        ],
        not_preemptable: &["p5"],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[("pg6", "n2")], &["p6"]));
}

#[test]
fn case3_cpu_and_memory_overused_scalar_not_candidate_asks_no_cpu_or_memory_reclaim_should_happen()
{
    let a100 = |cpu: &str, mem: &str| with(r(cpu, mem), "nvidia.com/A100", 10);
    let c = Case {
        nodes: vec![
            (
                "n3",
                with(node_alloc("2", "4Gi", 10), "nvidia.com/A100", 10),
            ),
            (
                "n4",
                with(node_alloc("2", "4Gi", 10), "nvidia.com/A100", 10),
            ),
        ],
        selector_nodes: &["n3"],
        queues: vec![
            ("q5", Some(a100("2", "4Gi")), None, 0),
            ("q6", Some(a100("2", "4Gi")), None, 0),
        ],
        pods: vec![
            ("p8", "n3", a100("0", "0Gi"), "pg7", "q5"),
            ("p9", "n4", a100("0", "0Gi"), "pg7", "q5"),
            ("p10", "n3", r("2", "4Gi"), "pg8", "q6"),
            ("p11", "n4", r("2", "4Gi"), "pg8", "q6"),
            ("p12", "", a100("0", "0Gi"), "pg9", "q6"),
        ],
        not_preemptable: &["p8"],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[("pg9", "n4")], &["p9"]));
}

#[test]
fn case4_pods_are_assigned_according_to_the_order_of_queue_priority_in_which_pgs_are_placed() {
    let c = Case {
        nodes: vec![
            ("n5", node_alloc("2", "4Gi", 10)),
            ("n6", node_alloc("2", "4Gi", 10)),
        ],
        selector_nodes: &[],
        queues: vec![
            ("q7", None, Some(r("2", "4Gi")), 5),
            ("q8", None, Some(r("2", "4Gi")), 1),
            ("q9", None, Some(r("2", "4Gi")), 10),
        ],
        pods: vec![
            ("p13", "n5", r("2", "4Gi"), "pg10", "q7"),
            ("p14", "", r("2", "4Gi"), "pg11", "q8"),
            ("p15", "", r("2", "4Gi"), "pg12", "q9"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[("p15", "n6")], &[], &[]));
}

#[test]
fn case5_can_reclaim_from_other_queues_when_allocated_plus_req_within_deserved_on_one_dimension() {
    let c = Case {
        nodes: vec![("n1", node_alloc("2", "4Gi", 10))],
        selector_nodes: &["n1"],
        queues: vec![
            ("q10", Some(r("2", "2Gi")), Some(r("4", "4Gi")), 0),
            ("q11", Some(r("0", "0Gi")), Some(r("2", "2Gi")), 0),
        ],
        pods: vec![
            ("p16", "n1", r("1", "3Gi"), "pg16", "q10"),
            ("p17", "", r("1", "1Gi"), "pg17", "q10"),
            ("p18", "n1", r("1", "1Gi"), "pg18", "q11"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[("pg17", "n1")], &["p18"]));
}

#[test]
fn case6_can_not_reclaim_from_other_queues_when_allocated_plus_req_exceeds_deserved() {
    let c = Case {
        nodes: vec![("n1", node_alloc("2", "4Gi", 10))],
        selector_nodes: &["n1"],
        queues: vec![
            ("q12", Some(r("1", "2Gi")), Some(r("4", "4Gi")), 0),
            ("q13", Some(r("0", "0Gi")), Some(r("2", "2Gi")), 0),
        ],
        pods: vec![
            ("p19", "n1", r("1", "1Gi"), "pg19", "q12"),
            ("p20", "", r("1", "2Gi"), "pg20", "q12"),
            ("p21", "n1", r("1", "1Gi"), "pg21", "q13"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[], &[]));
}

#[test]
fn case7_allocated_does_not_contain_scalar_dimension_deserved_does_should_not_reclaim() {
    let gpu = |cpu: &str, mem: &str, n: i64| with(r(cpu, mem), "nvidia.com/gpu", n);
    let c = Case {
        nodes: vec![("n7", with(node_alloc("4", "8Gi", 10), "nvidia.com/gpu", 4))],
        selector_nodes: &[],
        queues: vec![
            ("queue14", Some(gpu("2", "4Gi", 2)), None, 0),
            ("queue15", None, None, 0),
            ("queue16", Some(gpu("2", "4Gi", 2)), None, 0),
        ],
        pods: vec![
            ("p22", "n7", r("2", "4Gi"), "pg22", "queue14"),
            ("p23", "n7", gpu("0", "0Gi", 1), "pg23", "queue15"),
            ("p24", "n7", gpu("2", "1Gi", 1), "pg24", "queue16"),
            ("p25", "", gpu("2", "3Gi", 1), "pg25", "queue16"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[], &[]));
}

/// n8: 4 CPUs, 8Gi and one GPU.
fn n8() -> Vec<(&'static str, Resources)> {
    vec![("n8", with(node_alloc("4", "8Gi", 10), "nvidia.com/gpu", 1))]
}

#[test]
fn case8_reclaimer_dimensions_are_considered_properly_while_evicting_reclaimees() {
    let gpu = |cpu: &str, mem: &str| with(r(cpu, mem), "nvidia.com/gpu", 1);
    let c = Case {
        nodes: n8(),
        selector_nodes: &[],
        queues: vec![
            ("queue17", Some(r("2", "2Gi")), None, 0),
            ("queue18", Some(gpu("2", "4Gi")), None, 0),
        ],
        pods: vec![
            ("p26", "n8", r("0", "4Gi"), "pg26", "queue17"),
            ("p27", "n8", r("1", "0Gi"), "pg27", "queue17"),
            ("p28", "n8", gpu("0", "0Gi"), "pg28", "queue17"),
            ("p29", "n8", r("2", "4Gi"), "pg29", "queue18"),
            ("p30", "", gpu("1", "0Gi"), "pg30", "queue18"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[("pg30", "n8")], &["p28"]));
}

#[test]
fn case9_reclaimee_has_intersecting_scalar_dimensions_with_deserved_should_not_be_reclaimed_on_cpu_memory()
 {
    let c = Case {
        nodes: n8(),
        selector_nodes: &[],
        queues: vec![
            (
                "queue19",
                Some(with(r("", ""), "nvidia.com/gpu", 1)),
                None,
                0,
            ),
            ("queue20", Some(r("2", "2Gi")), None, 0),
        ],
        pods: vec![
            (
                "p31",
                "n8",
                with(r("4", "4Gi"), "nvidia.com/gpu", 1),
                "pg31",
                "queue19",
            ),
            ("p32", "", r("1", "1Gi"), "pg32", "queue20"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[], &[]));
}

#[test]
fn case10_preemptive_fn_respects_capability_no_reclaim_when_future_used_would_exceed_capability() {
    let c = Case {
        nodes: vec![
            ("n9", node_alloc("8", "100Gi", 10)),
            ("n10", node_alloc("8", "100Gi", 10)),
        ],
        selector_nodes: &[],
        queues: vec![
            ("queue21", Some(r("8", "100Gi")), Some(r("8", "100Gi")), 0),
            ("queue22", None, Some(r("2", "5Gi")), 0),
        ],
        pods: vec![
            ("p33", "n9", r("7", "90Gi"), "pg33", "queue21"),
            ("p34", "", r("2", "5Gi"), "pg34", "queue21"),
            ("p35", "n10", r("2", "5Gi"), "pg35", "queue22"),
        ],
        not_preemptable: &[],
        selects_worker: &[],
    };
    assert_eq!(c.run(), seen(&[], &[], &[]));
}

#[test]
fn job_enqueued_on_other_plugins_reject_pga_rejected_by_co_tier_plugin_must_not_consume_q1_capacity_pgb_must_be_admitted()
 {
    let q1 = deserving("q1", resources("1", "4G"), resources("1", "4G"));
    assert_eq!(
        enqueue_after_a_co_tier_refusal("capacity", q1.clone(), true).1,
        Some(GangPhase::Inqueue)
    );
    // pgA is judged first: admitted, it takes q1's only CPU and pgB waits.
    assert_eq!(
        enqueue_after_a_co_tier_refusal("capacity", q1, false),
        (Some(GangPhase::Inqueue), Some(GangPhase::Pending))
    );
}

#[test]
fn no_double_counting_for_inqueue_job_with_binding_tasks() {
    let (cycle1, cycle2) =
        binding_tasks_then_a_newcomer("capacity", queue("q1", 1, Some(resources("4", "8Gi"))));
    assert_eq!(
        cycle1,
        binds(&[("pA1", "n1"), ("pA2", "n1"), ("pA3", "n1")])
    );
    assert_eq!(cycle2, binds(&[("pB1", "n1")]));
}
