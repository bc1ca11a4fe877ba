//! `pkg/scheduler/plugins/proportion/proportion_test.go`: `TestEnqueueAndAllocable`
//! (enqueue then allocate with proportion alone, its allocatable, overused and
//! enqueue checks switched on or off as each case lists them), `TestAllocate`,
//! and `TestNoDoubleCountingForInqueueJobWithBindingTasks` and
//! `TestJobEnqueuedOnOtherPluginsReject` (the scenarios of
//! [`super::inqueue_accounting`], with proportion).
//!
//! Left out: `TestProportion`, which asserts Volcano's `queue_allocated`
//! Prometheus metric over sessions repeated every three seconds while PodGroups
//! are deleted (its `expected` node map is never checked); this scheduler's
//! queue figures are not those metrics.

use super::inqueue_accounting::{binding_tasks_then_a_newcomer, enqueue_after_a_co_tier_refusal};
use super::support::{GroupRow, Table, closed, group, node_alloc, pod, queue, resources};
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::enqueue::Enqueue;
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::framework::{Action, GangPhase};

/// proportion alone, with Volcano's three switches of these cases.
fn conf(allocatable: bool, overused: bool, enqueued: bool) -> String {
    format!(
        "actions: enqueue, allocate
tiers:
- plugins:
  - name: proportion
    enabledAllocatable: {allocatable}
    enabledOverused: {overused}
    enableJobEnqueued: {enqueued}
"
    )
}

/// A PodGroup of one pod in `queue` whose minResources are the pod's request.
fn single(name: &'static str, queue: &'static str, phase: GangPhase, r: (&str, &str)) -> GroupRow {
    let mut g = group(name, queue, 1, phase);
    g.min_resources = Some(resources(r.0, r.1));
    g
}

/// pod1 (1 CPU, 2G) of pg1 in q1 runs on n1; pod2 (2 CPUs, 1G) of pg2 in q2 on
/// n2; then `waiting` (a pending pod of its own PodGroup).
fn run(
    waiting: (&'static str, &'static str, &'static str, (&str, &str)),
    allocatable: bool,
    overused: bool,
    enqueued: bool,
) -> SessionOutcome {
    let (pod_name, pg, q, r) = waiting;
    let t = Table {
        nodes: vec![
            ("n1", node_alloc("2", "2G", 10)),
            ("n2", node_alloc("2", "2G", 10)),
        ],
        queues: vec![
            queue("q1", 1, Some(resources("2", "2G"))),
            queue("q2", 1, Some(resources("3", "3G"))),
        ],
        groups: vec![
            single("pg1", "q1", GangPhase::Running, ("1", "2G")),
            single("pg2", "q2", GangPhase::Running, ("2", "1G")),
            single(pg, q, GangPhase::Pending, r),
        ],
        pods: vec![
            pod("pod1", "n1", true, resources("1", "2G"), "pg1"),
            pod("pod2", "n2", true, resources("2", "1G"), "pg2"),
            pod(pod_name, "", false, resources(r.0, r.1), pg),
        ],
        ..Table::default()
    };
    t.run(
        &conf(allocatable, overused, enqueued),
        &[&Enqueue as &dyn Action, &Allocate],
    )
}

/// Each pod placed by the session, and its node.
fn placed_on(o: &SessionOutcome) -> Vec<(String, Option<String>)> {
    o.commits
        .iter()
        .flat_map(|c| &c.members)
        .map(|m| (m.name.clone(), m.placement.as_ref().map(|p| p.node.clone())))
        .collect()
}

/// Pods placed by the session.
fn binds(o: &SessionOutcome) -> Vec<String> {
    o.commits
        .iter()
        .flat_map(|c| &c.members)
        .map(|m| format!("c1/{}", m.name))
        .collect()
}

#[test]
fn case0_memory_exceed_derserved_job_only_request_cpu_can_be_enqueued_and_allocated() {
    let o = run(("pod3", "pg3", "q1", ("1", "0G")), true, true, true);
    assert_eq!(
        placed_on(&o),
        [("pod3".to_string(), Some("n1".to_string()))]
    );
}

#[test]
fn case1_cpu_exceed_derserved_job_only_request_memory_can_be_enqueued_and_allocated() {
    let o = run(("pod4", "pg4", "q2", ("0", "1G")), true, true, true);
    assert_eq!(
        placed_on(&o),
        [("pod4".to_string(), Some("n2".to_string()))]
    );
}

#[test]
fn case2_exceed_capacity_can_not_enqueue() {
    let o = run(("pod5", "pg5", "q1", ("1", "1G")), false, false, true);
    assert!(binds(&o).is_empty(), "{o:?}");
}

#[test]
fn case3_exceed_deserved_can_not_allocate() {
    let o = run(("pod5", "pg5", "q1", ("1", "1G")), true, false, false);
    assert!(binds(&o).is_empty(), "{o:?}");
}

#[test]
fn case4_queue_with_non_open_state_can_not_enqueue() {
    let t = Table {
        nodes: vec![
            ("n1", node_alloc("2", "2G", 10)),
            ("n2", node_alloc("2", "2G", 10)),
        ],
        queues: vec![closed(queue("q3", 1, Some(resources("3", "3G"))))],
        groups: vec![single("pg6", "q3", GangPhase::Pending, ("1", "1G"))],
        pods: vec![pod("pod6", "", false, resources("1", "1G"), "pg6")],
        ..Table::default()
    };
    let o = t.run(
        &conf(false, false, true),
        &[&Enqueue as &dyn Action, &Allocate],
    );
    assert!(binds(&o).is_empty(), "{o:?}");
}

/// `TestAllocate`: allocate then reclaim with proportion's queue order alone.
#[test]
fn case0_pods_are_assigned_according_to_the_order_of_queue_priority_in_which_pgs_are_placed() {
    let queue_of = |name: &str, priority: i32| crate::volcano::objects::QueueSpec {
        priority,
        ..queue(name, 1, Some(resources("2", "4Gi")))
    };
    let t = Table {
        nodes: vec![
            ("n1", node_alloc("2", "4Gi", 10)),
            ("n2", node_alloc("2", "4Gi", 10)),
        ],
        queues: vec![queue_of("q1", 5), queue_of("q2", 1), queue_of("q3", 10)],
        groups: vec![
            group("pg1", "q1", 1, GangPhase::Running),
            group("pg2", "q2", 1, GangPhase::Inqueue),
            group("pg3", "q3", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            pod("p1", "n1", true, resources("2", "4Gi"), "pg1"),
            pod("p2", "", false, resources("2", "4Gi"), "pg2"),
            pod("p3", "", false, resources("2", "4Gi"), "pg3"),
        ],
        ..Table::default()
    };
    let conf = "actions: allocate, reclaim
tiers:
- plugins:
  - name: proportion
    enableJobOrder: false
    enableJobReady: false
    enableJobPipelined: false
    enableJobEnqueued: false
    enablePreemptable: false
    enableReclaimable: false
    enabledAllocatable: false
    enabledOverused: false
    enablePreemptive: false
";
    let o = t.run(
        conf,
        &[
            &Allocate as &dyn Action,
            &crate::volcano::actions::reclaim::Reclaim,
        ],
    );
    assert_eq!(placed_on(&o), [("p3".to_string(), Some("n2".to_string()))]);
}

#[test]
fn job_enqueued_on_other_plugins_reject_phantom_inqueue_reservation_rejecter_blocks_pga_pgb_must_still_be_admitted()
 {
    let q1 = || queue("q1", 1, Some(resources("1", "4G")));
    assert_eq!(
        enqueue_after_a_co_tier_refusal("proportion", q1(), true).1,
        Some(GangPhase::Inqueue)
    );
    // pgA is judged first: admitted, it takes q1's only CPU and pgB waits.
    assert_eq!(
        enqueue_after_a_co_tier_refusal("proportion", q1(), false),
        (Some(GangPhase::Inqueue), Some(GangPhase::Pending))
    );
}

#[test]
fn no_double_counting_for_inqueue_job_with_binding_tasks() {
    let (cycle1, cycle2) =
        binding_tasks_then_a_newcomer("proportion", queue("q1", 1, Some(resources("4", "8Gi"))));
    let on_n1 = |pods: &[&str]| -> std::collections::BTreeMap<String, String> {
        pods.iter()
            .map(|p| (format!("c1/{p}"), "n1".to_string()))
            .collect()
    };
    assert_eq!(cycle1, on_n1(&["pA1", "pA2", "pA3"]));
    assert_eq!(cycle2, on_n1(&["pB1"]));
}
