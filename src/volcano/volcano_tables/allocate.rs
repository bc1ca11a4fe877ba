//! `pkg/scheduler/actions/allocate/allocate_test.go`: `TestAllocate` and
//! `TestFareShareAllocate`, the allocate action over pods that ask only CPU and
//! memory, with the plugins and tier switches each test registers. The
//! network-topology tests of the same file are in [`super::allocate_topology`].
//!
//! Left out:
//! - `TestParseArgs` checks that an argument of Volcano's allocate action
//!   (`predicateErrorCacheEnable`) reaches a field of the action object; no
//!   decision follows from it.
//! - `TestAllocateWithPVC` binds PersistentVolumeClaims through Volcano's volume
//!   binder, and `TestAllocateWithDRA` allocates DRA ResourceClaims; this
//!   scheduler places pods by their requests and vGPUs and leaves volumes and
//!   claims to kube-scheduler.
//! - `TestWorksheetShallowCopy`, `TestWorksheetEmpty`, `TestWorksheetClone`,
//!   `TestInvalidateSubJobNomination`, `TestAllocateFromNomination_*`,
//!   `TestValidateNomination_MissBranches` and
//!   `TestAllocate_FlatPathHonorsAndClearsNomination` call internals of Volcano's
//!   allocate action (its per-sub-job worksheets and nominated-node bookkeeping)
//!   on hand-built objects, not a session's decisions.
//! - `BenchmarkAllocate` and `BenchmarkHyperNodeGradientFnPerformance` measure
//!   speed and assert nothing.

use super::support::{GroupRow, PodRow, Table, bound, group, node_alloc, pod, queue, resources};
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::framework::GangPhase;
use crate::volcano::framework::outcome::SessionOutcome;
use std::collections::BTreeMap;

/// The one tier of `TestAllocate`.
const ALLOCATE_TIER: &[(&str, &[&str])] = &[
    (
        "gang",
        &["JobOrder", "JobReady", "JobPipelined", "JobStarving"],
    ),
    ("drf", &["Preemptable", "JobOrder"]),
    ("proportion", &["QueueOrder", "Reclaimable", "Allocatable"]),
    ("predicates", &["Predicate"]),
    ("nodeorder", &["NodeOrder"]),
];

/// The one tier of `TestFareShareAllocate`: no gang, and proportion's
/// allocatable check off.
const FAIR_SHARE_TIER: &[(&str, &[&str])] = &[
    ("drf", &["Preemptable", "JobOrder"]),
    ("proportion", &["QueueOrder", "Reclaimable"]),
    ("predicates", &["Predicate"]),
    ("nodeorder", &["NodeOrder"]),
];

/// Runs allocate alone over `table` with the plugins of `tier`.
fn allocate(table: &Table, tier: &[(&str, &[&str])]) -> SessionOutcome {
    table.run(
        &super::support::tiers_conf("allocate", &[tier]),
        &[&Allocate],
    )
}

fn binds(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(pod, node)| (pod.to_string(), node.to_string()))
        .collect()
}

/// A pending pod of pg1 in role `role`, asking 1 CPU and 1G and selecting nodes
/// labelled `nodeRole: <role>`.
fn role_pod(name: &'static str, role: &'static str) -> PodRow {
    let mut p = pod(name, "", false, resources("1", "1G"), "pg1");
    p.labels = vec![("volcano.sh/task-spec", role)];
    p.node_selector = vec![("nodeRole", role)];
    p
}

/// pg1 in queue c1 (Inqueue) with these minimums.
fn pg1(min_member: usize, min_roles: &[(&'static str, usize)]) -> GroupRow {
    let mut g = group("pg1", "c1", min_member, GangPhase::Inqueue);
    g.min_roles = min_roles.to_vec();
    g
}

/// Masters p0, p1 and workers p2, p3 of pg1 on n1 (`nodeRole: master`, 1 CPU)
/// and n2 (`nodeRole: worker`, `n2_cpu` CPUs).
fn masters_and_workers(group: GroupRow, n2_cpu: &str) -> Table {
    Table {
        nodes: vec![
            ("n1", node_alloc("1", "2Gi", 10)),
            ("n2", node_alloc(n2_cpu, "2Gi", 10)),
        ],
        node_labels: vec![("n1", "nodeRole", "master"), ("n2", "nodeRole", "worker")],
        queues: vec![queue("c1", 1, None)],
        groups: vec![group],
        pods: vec![
            role_pod("p0", "master"),
            role_pod("p1", "master"),
            role_pod("p2", "worker"),
            role_pod("p3", "worker"),
        ],
    }
}

#[test]
fn prepredicate_failed_node_selector_does_not_match() {
    let t = Table {
        nodes: vec![("n1", node_alloc("2", "4Gi", 10))],
        node_labels: vec![("n1", "nodeRole", "worker")],
        queues: vec![queue("c1", 1, None)],
        groups: vec![pg1(1, &[])],
        pods: vec![role_pod("p1", "master"), role_pod("p2", "worker")],
    };
    let o = allocate(&t, ALLOCATE_TIER);
    assert_eq!(bound(&o), binds(&[("c1/p2", "n1")]));
}

#[test]
fn prepredicate_failed_and_tasks_are_not_used_up_continue_on_until_min_member_meet() {
    let t = masters_and_workers(pg1(2, &[("master", 1), ("worker", 1)]), "1");
    let o = allocate(&t, ALLOCATE_TIER);
    assert_eq!(bound(&o), binds(&[("c1/p0", "n1"), ("c1/p2", "n2")]));
}

#[test]
fn master_s_min_member_can_not_be_allocated_break_from_allocating() {
    let t = masters_and_workers(pg1(2, &[("master", 2), ("worker", 0)]), "2");
    let o = allocate(&t, ALLOCATE_TIER);
    assert_eq!(bound(&o), binds(&[]));
}

#[test]
fn one_job_with_two_pods_on_one_node() {
    let t = Table {
        nodes: vec![("n1", node_alloc("2", "4Gi", 10))],
        queues: vec![queue("c1", 1, None)],
        groups: vec![pg1(0, &[])],
        pods: vec![
            pod("p1", "", false, resources("1", "1G"), "pg1"),
            pod("p2", "", false, resources("1", "1G"), "pg1"),
        ],
        ..Table::default()
    };
    let o = allocate(&t, ALLOCATE_TIER);
    assert_eq!(bound(&o), binds(&[("c1/p1", "n1"), ("c1/p2", "n1")]));
}

#[test]
fn two_jobs_on_one_node() {
    let mut pg2 = group("pg2", "c2", 0, GangPhase::Inqueue);
    pg2.namespace = "c2";
    let t = Table {
        nodes: vec![("n1", node_alloc("2", "4G", 10))],
        queues: vec![queue("c1", 1, None), queue("c2", 1, None)],
        groups: vec![pg1(0, &[]), pg2],
        pods: vec![
            pod("pg1-p-1", "", false, resources("1", "1G"), "pg1"),
            pod("pg1-p-2", "", false, resources("1", "1G"), "pg1"),
            pod("pg2-p-1", "", false, resources("1", "1G"), "pg2"),
            pod("pg2-p-2", "", false, resources("1", "1G"), "pg2"),
        ],
        ..Table::default()
    };
    let o = allocate(&t, ALLOCATE_TIER);
    assert_eq!(
        bound(&o),
        binds(&[("c2/pg2-p-1", "n1"), ("c1/pg1-p-1", "n1")])
    );
}

#[test]
fn high_priority_queue_should_not_block_others() {
    let t = Table {
        nodes: vec![("n1", node_alloc("2", "4G", 10))],
        queues: vec![queue("c1", 1, None), queue("c2", 1, None)],
        groups: vec![pg1(0, &[]), group("pg2", "c2", 0, GangPhase::Inqueue)],
        pods: vec![
            pod("p1", "", false, resources("3", "1G"), "pg1"),
            pod("p2", "", false, resources("1", "1G"), "pg2"),
        ],
        ..Table::default()
    };
    let o = allocate(&t, ALLOCATE_TIER);
    assert_eq!(bound(&o), binds(&[("c1/p2", "n1")]));
}

/// A PodGroup of namespace `ns-1` in `queue`, minMember 0.
fn ns1_group(name: &'static str, queue: &'static str, phase: GangPhase) -> GroupRow {
    let mut g = group(name, queue, 0, phase);
    g.namespace = "ns-1";
    g
}

/// node-1 (5 CPUs, 5G) where pod-small-1 (1 CPU, 1G) of pg-small-1 in q-1
/// runs; queues q-1 and q-2.
fn fair_share(mut groups: Vec<GroupRow>, mut pods: Vec<PodRow>) -> Table {
    groups.insert(0, ns1_group("pg-small-1", "q-1", GangPhase::Running));
    pods.insert(
        0,
        pod(
            "pod-small-1",
            "node-1",
            true,
            resources("1", "1G"),
            "pg-small-1",
        ),
    );
    Table {
        nodes: vec![("node-1", node_alloc("5", "5G", 10))],
        queues: vec![queue("q-1", 1, None), queue("q-2", 1, None)],
        groups,
        pods,
        ..Table::default()
    }
}

#[test]
fn queue_with_low_drf_share_value_has_high_priority_should_allocate_first() {
    let t = fair_share(
        vec![
            ns1_group("pg-large-1", "q-1", GangPhase::Inqueue),
            ns1_group("pg-large-2", "q-2", GangPhase::Inqueue),
        ],
        vec![
            pod("pod-large-1", "", false, resources("2", "2G"), "pg-large-1"),
            pod("pod-large-2", "", false, resources("3", "2G"), "pg-large-2"),
        ],
    );
    let o = allocate(&t, FAIR_SHARE_TIER);
    assert_eq!(bound(&o), binds(&[("ns-1/pod-large-2", "node-1")]));
}

#[test]
fn queue_s_drf_share_value_will_be_updated_and_its_priority_will_change_before_it_is_put_back_into_the_priority_queue()
 {
    let t = fair_share(
        vec![
            ns1_group("pg-large-1", "q-1", GangPhase::Inqueue),
            ns1_group("pg-small-2", "q-2", GangPhase::Inqueue),
            ns1_group("pg-large-2", "q-2", GangPhase::Inqueue),
        ],
        vec![
            pod("pod-large-1", "", false, resources("2", "2G"), "pg-large-1"),
            pod("pod-large-2", "", false, resources("2", "2G"), "pg-large-2"),
            pod("pod-small-2", "", false, resources("1", "1G"), "pg-small-2"),
        ],
    );
    let o = allocate(&t, FAIR_SHARE_TIER);
    assert_eq!(
        bound(&o),
        binds(&[
            ("ns-1/pod-large-1", "node-1"),
            ("ns-1/pod-large-2", "node-1"),
        ])
    );
}

#[test]
fn queue_s_one_jobs_has_no_pending_tasks_should_be_put_back_to_queues_for_next_job() {
    let t = Table {
        nodes: vec![("node-1", node_alloc("5", "5G", 10))],
        queues: vec![queue("q-1", 1, None)],
        groups: vec![
            ns1_group("pg-1", "q-1", GangPhase::Running),
            ns1_group("pg-2", "q-1", GangPhase::Inqueue),
        ],
        pods: vec![
            pod("pod-1", "node-1", true, resources("1", "1G"), "pg-1"),
            pod("pod-2", "", false, resources("2", "2G"), "pg-2"),
        ],
        ..Table::default()
    };
    let o = allocate(&t, FAIR_SHARE_TIER);
    assert_eq!(bound(&o), binds(&[("ns-1/pod-2", "node-1")]));
}
