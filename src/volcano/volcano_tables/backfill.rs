//! `pkg/scheduler/actions/backfill/backfill_test.go` (`TestPickUpPendingTasks`):
//! the order in which backfill places best-effort pods (pods that ask for
//! nothing), with priority (task and job order) and drf (queue order). Volcano's
//! table checks the list its backfill builds, in a session without nodes; here
//! the same cluster gets a node, and the order shows in the placements the
//! session commits and, on a node with fewer pod slots than best-effort pods,
//! in which of them get one.
//!
//! Volcano's table pipelines half of the pods (onto `node1`, a node the session
//! does not have) before backfill runs; its backfill takes every pipelined
//! best-effort pod back and orders it with the pending ones. Here an action
//! pipelines the same pods there first. The pods that ask for 500m CPU are there
//! to be passed over: backfill places best-effort pods only, and leaves the
//! others pipelined.

use super::support::{GroupRow, PodRow, Table, group, node_alloc, pod, queue, tiers_conf};
use crate::fit::Placement;
use crate::placement::Choice;
use crate::resources::Resources;
use crate::volcano::actions::backfill::Backfill;
use crate::volcano::framework::{Action, GangKey, GangPhase, Session, SessionOutcome, Statement};

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

/// The pods Volcano's table pipelines: its `pipelinedPods`.
const PIPELINED: [&str; 8] = [
    "pg1-besteffort-task-2",
    "pg1-unbesteffort-task-2",
    "pg1-besteffort-task-4",
    "pg1-unbesteffort-task-4",
    "pg2-besteffort-task-2",
    "pg2-unbesteffort-task-2",
    "pg2-besteffort-task-4",
    "pg2-unbesteffort-task-4",
];

/// `stmt.Pipeline(task, "node1", false)` for each of [`PIPELINED`], committed:
/// what an earlier action of the session leaves behind.
#[derive(Debug)]
struct PipelineOntoNode1;

impl Action for PipelineOntoNode1 {
    fn name(&self) -> &'static str {
        "pipeline"
    }

    fn execute(&self, session: &mut Session) {
        for name in PIPELINED {
            let group = &name[..3];
            let key = GangKey {
                namespace: "default".into(),
                name: group.into(),
                single: false,
            };
            let uid = format!("uid-{name}");
            let Some(task) = session.state.task(&key, &uid) else {
                continue;
            };
            let choice = Choice {
                node: "node1".into(),
                placement: Placement {
                    devices: Vec::new(),
                    node_score: 0.0,
                },
                rank: 0.0,
            };
            let charge = session.charge_for(task, Some(&choice));
            let mut statement = Statement::new();
            statement.pipeline(session, &key, &uid, Some(&choice), charge);
            statement.commit(session);
        }
    }
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
    t.run(&conf(), &[&PipelineOntoNode1, &Backfill])
}

/// The pods the session placed (not pipelined), in the order it placed them.
fn placed_in_order(o: &SessionOutcome) -> Vec<String> {
    o.placements()
        .filter(|m| !m.pipelined)
        .map(|m| m.name.clone())
        .collect()
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
fn test_leaves_the_pods_that_ask_for_cpu_pipelined() {
    assert_eq!(
        super::support::pipelined(&run(8)),
        [
            ("default/pg1".to_string(), vec!["node1".to_string(); 2]),
            ("default/pg2".to_string(), vec!["node1".to_string(); 2]),
        ]
        .into_iter()
        .collect()
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

/// Beside the table, what `backfill.go` does after preempt: a best-effort pod
/// preempt pipelined onto the pod slot its victim is leaving is taken back, and
/// with no slot free now it waits for the next session; the victim still goes.
#[test]
fn a_best_effort_preemptor_taken_back_with_no_free_slot_waits_and_its_victim_still_goes() {
    // `TestPreempt`'s tier, with backfill after preempt.
    let conf = super::preempt::conf().replacen("actions: preempt", "actions: preempt, backfill", 1);
    let mut low = group("pg1", "q1", 1, GangPhase::Running);
    low.priority = 1;
    let mut high = group("pg2", "q1", 1, GangPhase::Inqueue);
    high.priority = 100;
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", 1))],
        queues: vec![queue("q1", 1, None)],
        groups: vec![low, high],
        pods: vec![
            pod("preemptee1", "n1", true, Resources::default(), "pg1"),
            pod("preemptor1", "", false, Resources::default(), "pg2"),
        ],
        ..Table::default()
    };
    let preempted = t.run(&conf, &[&crate::volcano::actions::preempt::Preempt]);
    assert_eq!(
        super::support::pipelined(&preempted).len(),
        1,
        "preempt alone pipelines the preemptor"
    );
    let o = t.run(
        &conf,
        &[&crate::volcano::actions::preempt::Preempt, &Backfill],
    );
    assert_eq!(
        super::support::evicted(&o).into_iter().collect::<Vec<_>>(),
        ["c1/preemptee1"]
    );
    assert!(super::support::pipelined(&o).is_empty());
    assert!(super::support::bound(&o).is_empty());
}
