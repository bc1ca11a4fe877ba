//! `pkg/scheduler/actions/backfill/backfill_test.go` (`TestPickUpPendingTasks`):
//! the order in which backfill places best-effort pods (pods that ask for
//! nothing), with priority (task and job order) and drf (queue order). Volcano's
//! table checks the list its backfill builds, in a session without nodes; here
//! the same cluster gets a node, and the order shows in the placements the
//! session commits and, on a node with fewer pod slots than best-effort pods,
//! in which of them get one.
//!
//! Volcano's table pipelines half of the pods before backfill runs; its backfill
//! takes every pipelined best-effort pod back and orders it with the pending
//! ones, so here those pods are simply pending. The pods that ask for 500m CPU
//! are there to be passed over: backfill places best-effort pods only.

use super::support::{GroupRow, PodRow, Table, group, node_alloc, pod, queue, tiers_conf};
use crate::resources::Resources;
use crate::volcano::actions::backfill::Backfill;
use crate::volcano::framework::{GangPhase, SessionOutcome};

/// `TestPickUpPendingTasks`'s tier.
fn conf() -> String {
    tiers_conf(
        "backfill",
        &[&[
            ("priority", &["Preemptable", "TaskOrder", "JobOrder"]),
            ("drf", &["QueueOrder"]),
        ]],
    )
}

/// `util.BuildPodGroupWithPrio(name, "default", "q1", 1, {"": 3}, Inqueue,
/// "job-priority-<priority>")`.
fn prio_group(name: &'static str, priority: i32) -> GroupRow {
    let mut g = group(name, "q1", 1, GangPhase::Inqueue);
    g.priority = priority;
    g.namespace = "default";
    g.min_roles = vec![("", 3)];
    g
}

/// `util.BuildPodWithPriority("default", name, "", Pending, request, group, …,
/// priority)`.
fn prio_pod(name: &'static str, request: Resources, group: &'static str, priority: i32) -> PodRow {
    let mut p = pod(name, "", false, request, group);
    p.priority = priority;
    p
}

/// Volcano's cluster on one node `n1` with room for `slots` pods, after backfill.
fn run(slots: i64) -> SessionOutcome {
    const PODS: [(&str, &str, i32); 16] = [
        ("pg1-besteffort-task-1", "pg1", 1),
        ("pg1-unbesteffort-task-1", "pg1", 1),
        ("pg1-besteffort-task-3", "pg1", 3),
        ("pg1-unbesteffort-task-3", "pg1", 3),
        ("pg2-besteffort-task-1", "pg2", 1),
        ("pg2-unbesteffort-task-1", "pg2", 1),
        ("pg2-besteffort-task-3", "pg2", 3),
        ("pg2-unbesteffort-task-3", "pg2", 3),
        ("pg1-besteffort-task-2", "pg1", 2),
        ("pg1-unbesteffort-task-2", "pg1", 2),
        ("pg1-besteffort-task-4", "pg1", 4),
        ("pg1-unbesteffort-task-4", "pg1", 4),
        ("pg2-besteffort-task-2", "pg2", 2),
        ("pg2-unbesteffort-task-2", "pg2", 2),
        ("pg2-besteffort-task-4", "pg2", 4),
        ("pg2-unbesteffort-task-4", "pg2", 4),
    ];
    let pods = PODS
        .iter()
        .map(|&(name, group, priority)| {
            let mut request = Resources::default();
            if name.contains("unbesteffort") {
                request.set("cpu", 500);
            }
            prio_pod(name, request, group, priority)
        })
        .collect();
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", slots))],
        queues: vec![queue("q1", 1, None)],
        groups: vec![prio_group("pg1", 1), prio_group("pg2", 2)],
        pods,
        ..Table::default()
    };
    t.run(&conf(), &[&Backfill])
}

/// The pods the session placed, in the order it placed them.
fn placed_in_order(o: &SessionOutcome) -> Vec<String> {
    o.placements().map(|m| m.name.clone()).collect()
}

#[test]
fn test() {
    assert_eq!(
        placed_in_order(&run(8)),
        [
            "pg2-besteffort-task-4",
            "pg2-besteffort-task-3",
            "pg2-besteffort-task-2",
            "pg2-besteffort-task-1",
            "pg1-besteffort-task-4",
            "pg1-besteffort-task-3",
            "pg1-besteffort-task-2",
            "pg1-besteffort-task-1",
        ]
    );
}

#[test]
fn test_with_three_pod_slots_the_first_three_in_that_order_get_them() {
    let o = run(3);
    assert_eq!(
        super::support::bound(&o).into_keys().collect::<Vec<_>>(),
        [
            "default/pg2-besteffort-task-2",
            "default/pg2-besteffort-task-3",
            "default/pg2-besteffort-task-4",
        ]
    );
}
