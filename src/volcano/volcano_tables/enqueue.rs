//! `pkg/scheduler/actions/enqueue/enqueue_test.go` (`TestEnqueue`): the enqueue
//! action with drf, proportion, sla (`sla-waiting-time: 3m`) and gang in one
//! tier. Every case is translated. Volcano's table expects no status at all for
//! a PodGroup whose queue does not exist; here that PodGroup is simply not
//! admitted (it stays Pending, which is what its status already says).

use super::support::{Table, group, node_alloc, pod, queue, resources};
use crate::volcano::actions::enqueue::Enqueue;
use crate::volcano::framework::GangPhase;

const CONF: &str = "actions: enqueue
tiers:
- plugins:
  - name: drf
  - name: proportion
  - name: sla
    arguments:
      sla-waiting-time: 3m
  - name: gang
";

fn queues(names: &[&str]) -> Vec<crate::volcano::objects::QueueSpec> {
    names
        .iter()
        .map(|n| queue(n, 1, Some(resources("4", "4G"))))
        .collect()
}

#[test]
fn when_podgroup_status_is_inqueue() {
    let t = Table {
        groups: vec![group("pg1", "c1", 2, GangPhase::Inqueue)],
        pods: vec![
            pod("p1", "", false, resources("1", "1G"), "pg1"),
            pod("p2", "", false, resources("1", "1G"), "pg1"),
        ],
        queues: queues(&["c1", "c2"]),
        ..Table::default()
    };
    let o = t.run(CONF, &[&Enqueue]);
    assert_eq!(super::support::phase(&o, "pg1"), Some(GangPhase::Inqueue));
}

#[test]
fn when_podgroup_status_is_pending() {
    let t = Table {
        groups: vec![
            group("pg1", "c1", 1, GangPhase::Pending),
            group("pg2", "c2", 1, GangPhase::Pending),
        ],
        pods: vec![
            pod("p1", "", false, resources("3", "1G"), "pg1"),
            pod("p2", "", false, resources("1", "1G"), "pg2"),
        ],
        queues: queues(&["c1", "c2"]),
        ..Table::default()
    };
    let o = t.run(CONF, &[&Enqueue]);
    assert_eq!(super::support::phase(&o, "pg1"), Some(GangPhase::Inqueue));
    assert_eq!(super::support::phase(&o, "pg2"), Some(GangPhase::Inqueue));
}

#[test]
fn when_podgroup_status_is_running() {
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", 10))],
        groups: vec![group("pg1", "c1", 2, GangPhase::Running)],
        pods: vec![
            pod("p1", "n1", true, resources("1", "1G"), "pg1"),
            pod("p2", "n1", true, resources("1", "1G"), "pg1"),
        ],
        queues: queues(&["c1"]),
        ..Table::default()
    };
    let o = t.run(CONF, &[&Enqueue]);
    assert_eq!(super::support::phase(&o, "pg1"), Some(GangPhase::Running));
}

#[test]
fn pggroup_cannot_enqueue_because_the_specified_queue_is_c1_but_there_is_only_c2() {
    let t = Table {
        groups: vec![group("pg1", "c1", 0, GangPhase::Pending)],
        queues: queues(&["c2"]),
        ..Table::default()
    };
    let o = t.run(CONF, &[&Enqueue]);
    assert_ne!(super::support::phase(&o, "pg1"), Some(GangPhase::Inqueue));
    assert!(o.enqueued.is_empty());
}

#[test]
fn pggroup_cannot_enqueue_because_queue_resources_are_less_than_podgroup_min_resources() {
    let mut pg1 = group("pg1", "c1", 1, GangPhase::Pending);
    pg1.min_resources = Some(resources("8", "8G"));
    let t = Table {
        groups: vec![pg1],
        queues: vec![queue("c1", 1, Some(resources("1", "1G")))],
        ..Table::default()
    };
    let o = t.run(CONF, &[&Enqueue]);
    assert_eq!(super::support::phase(&o, "pg1"), Some(GangPhase::Pending));
}
