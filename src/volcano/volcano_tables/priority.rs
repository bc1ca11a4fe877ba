//! `pkg/scheduler/plugins/priority/priority_test.go`: `TestPreempt` (allocate then
//! preempt with the priority plugin alone, its evictions switched on or off).
//! Volcano's pods live in namespaces ns1 and ns2; here every pod is in one
//! namespace, which neither case depends on.
//!
//! Left out: `TestUnifiedEvictableFn_GangReclaimPermitsAll` asks the plugin's
//! victim function for Volcano's `gangreclaim` and `gangpreempt` actions, which
//! this scheduler does not have (its preempt and reclaim already evict whole
//! gangs).

use super::support::{Table, evicted, group, node_alloc, pod, queue, resources};
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::preempt::Preempt;
use crate::volcano::framework::GangPhase;

/// The priority plugin alone with the switches Volcano's case sets (every other
/// switch is left unset there, which Volcano reads as off).
fn conf(evicts: bool) -> String {
    format!(
        "actions: allocate, preempt
tiers:
- plugins:
  - name: priority
    enablePreemptable: {evicts}
    enableReclaimable: {evicts}
    enableJobReady: false
    enableJobPipelined: false
    enableJobEnqueued: false
    enableQueueOrder: false
"
    )
}

/// pg1 (low priority) runs preemptee1 on node1 and `preemptee2`; pg2 (high
/// priority) waits with preemptor1; both in queue q1 of capability 6 CPUs, 6G.
fn table(nodes: [(&'static str, &str, &str); 2], preemptee2: super::support::PodRow) -> Table {
    let mut pg1 = group("pg1", "q1", 1, GangPhase::Inqueue);
    pg1.priority = 100;
    let mut pg2 = group("pg2", "q1", 1, GangPhase::Inqueue);
    pg2.priority = 1000;
    Table {
        nodes: nodes
            .iter()
            .map(|(n, cpu, mem)| (*n, node_alloc(cpu, mem, 10)))
            .collect(),
        queues: vec![queue("q1", 1, Some(resources("6", "6G")))],
        groups: vec![pg1, pg2],
        pods: vec![
            pod("preemptee1", "node1", true, resources("3", "3G"), "pg1"),
            preemptee2,
            pod("preemptor1", "", false, resources("3", "3G"), "pg2"),
        ],
        ..Table::default()
    }
}

#[test]
fn enable_preempt_low_priority_enable_preemptable_true() {
    let mut preemptee2 = pod("preemptee2", "node1", true, resources("3", "3G"), "pg1");
    preemptee2.priority = 1000;
    let t = table([("node1", "6", "6G"), ("node2", "2", "2G")], preemptee2);
    let o = t.run(&conf(true), &[&Allocate, &Preempt]);
    assert_eq!(evicted(&o), ["c1/preemptee1".to_string()].into());
    let pipelined: Vec<(&str, &str)> = o
        .commits
        .iter()
        .flat_map(|c| c.members.iter().map(move |m| (c, m)))
        .filter(|(_, m)| m.pipelined)
        .filter_map(|(c, m)| Some((&*c.gang.name, m.placement.as_ref()?.node.as_str())))
        .collect();
    assert_eq!(pipelined, [("pg2", "node1")]);
}

#[test]
fn disable_preempt_low_priority_enable_preemptable_false() {
    let mut preemptee2 = pod("preemptee2", "node2", true, resources("3", "3G"), "pg1");
    preemptee2.not_preemptable = true;
    let t = table([("node1", "3", "3G"), ("node2", "3", "3G")], preemptee2);
    let o = t.run(&conf(false), &[&Allocate, &Preempt]);
    assert!(evicted(&o).is_empty(), "{o:?}");
    assert!(
        o.commits
            .iter()
            .flat_map(|c| &c.members)
            .all(|m| !m.pipelined)
    );
}
