//! `pkg/scheduler/plugins/gang/gang_test.go`
//! (`TestShouldSkipUnschedulableForReleasing`): whether a PodGroup below its
//! minMember is told `Unschedulable` at the end of a session when some of its
//! members are being deleted from their nodes. Volcano's table hands job objects
//! to the helper its gang plugin asks at session close; here each case is a
//! cluster with those pods (running, terminating on a node, terminating before
//! ever being placed, waiting, pipelined by preempt) run through allocate and
//! preempt, and the PodGroup status this scheduler writes is checked. Every case
//! is translated; "skip" in Volcano's table means no `Unschedulable` condition.

use super::support::{
    GroupRow, PodRow, Table, group, node_alloc, pipelined, pod, queue, resources, terminating,
};
use crate::gang::status::podgroup_status;
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::preempt::Preempt;
use crate::volcano::framework::{GangPhase, SessionOutcome};
use std::collections::BTreeMap;

/// The plugins that decide these cases: gang (its minimum), priority (who may
/// preempt whom) and proportion (the queue's share), all switches on.
const CONF: &str = "actions: allocate, preempt
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: proportion
";

/// PodGroup `name` of queue q1, already running, with `min` members.
fn running_group(name: &'static str, min: usize, priority: i32) -> GroupRow {
    let mut g = group(name, "q1", min, GangPhase::Running);
    g.priority = priority;
    g
}

/// pg1 (minMember `min`, priority `priority`) with a pod running on n1 and one
/// being deleted from n2, both asking `size` CPUs and as many G, plus `more`
/// pods, on nodes n1, n2 and n3 of 2 CPUs, 2G and 10 pods each.
fn releasing_gang(min: usize, priority: i32, size: &str, more: Vec<PodRow>) -> Table {
    let memory = format!("{size}G");
    let mut pods = vec![
        pod("running", "n1", true, resources(size, &memory), "pg1"),
        terminating(pod(
            "releasing",
            "n2",
            true,
            resources(size, &memory),
            "pg1",
        )),
    ];
    pods.extend(more);
    Table {
        nodes: ["n1", "n2", "n3"]
            .into_iter()
            .map(|n| (n, node_alloc("2", "2G", 10)))
            .collect(),
        queues: vec![queue("q1", 1, None)],
        groups: vec![running_group("pg1", min, priority)],
        pods,
        ..Table::default()
    }
}

fn run(t: Table) -> SessionOutcome {
    t.run(CONF, &[&Allocate, &Preempt])
}

/// The type of the condition this scheduler writes into PodGroup `c1/<name>`'s
/// status, and the phase it writes.
fn written(o: &SessionOutcome, name: &str) -> (Option<String>, Option<String>) {
    let Some(v) = super::support::verdict(o, name) else {
        return (None, None);
    };
    let status = podgroup_status(v, "2026-01-01T00:00:00Z");
    let condition = status["conditions"][0]["type"].as_str().map(String::from);
    let phase = status["phase"].as_str().map(String::from);
    (condition, phase)
}

fn unschedulable(o: &SessionOutcome, name: &str) -> bool {
    written(o, name).0.as_deref() == Some("Unschedulable")
}

#[test]
fn partial_termination() {
    let o = run(releasing_gang(2, 0, "1", Vec::new()));
    assert_eq!(
        written(&o, "pg1"),
        (Some("Scheduled".into()), Some("Running".into()))
    );
}

#[test]
fn pending_replacement_still_needs_condition() {
    // Larger than any node: it stays pending.
    let replacement = pod("replacement", "", false, resources("4", "1G"), "pg1");
    let o = run(releasing_gang(2, 0, "1", vec![replacement]));
    assert!(unschedulable(&o, "pg1"), "{:?}", written(&o, "pg1"));
}

#[test]
fn pipelined_replacement_still_needs_condition() {
    // n1 and n2 are full, n3 full of a low-priority PodGroup's pods; preempt
    // evicts one of them for the replacement, which is pipelined onto n3.
    let mut t = releasing_gang(
        2,
        100_000,
        "2",
        vec![
            pod("replacement", "", false, resources("1", "1G"), "pg1"),
            pod("low1", "n3", true, resources("1", "1G"), "pg2"),
            pod("low2", "n3", true, resources("1", "1G"), "pg2"),
        ],
    );
    t.groups.push(running_group("pg2", 1, 10));
    let o = run(t);
    assert_eq!(
        pipelined(&o),
        BTreeMap::from([("c1/pg1".to_string(), vec!["n3".to_string()])])
    );
    assert!(unschedulable(&o, "pg1"), "{:?}", written(&o, "pg1"));
}

#[test]
fn never_scheduled_releasing_task_is_not_counted() {
    let mut t = releasing_gang(1, 0, "1", Vec::new());
    // Deleted while it was still waiting: it never had a node.
    t.pods = vec![terminating(pod(
        "releasing",
        "",
        false,
        resources("1", "1G"),
        "pg1",
    ))];
    let o = run(t);
    assert!(unschedulable(&o, "pg1"), "{:?}", written(&o, "pg1"));
}

#[test]
fn scheduled_tasks_below_min_available() {
    let o = run(releasing_gang(3, 0, "1", Vec::new()));
    assert!(unschedulable(&o, "pg1"), "{:?}", written(&o, "pg1"));
}
