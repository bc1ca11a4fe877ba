//! `pkg/scheduler/actions/reclaim/reclaim_test.go` (`TestReclaim`): the reclaim
//! action over pods that ask only CPU and memory, with the plugins each case
//! registers in the one tier of Volcano's test and that tier's switches. Every
//! case of the table is here.
//!
//! Left out: `reclaim_shard_test.go`, which tests Volcano's node sharding between
//! scheduler instances (this scheduler has none).

use super::support::{
    Table, closed, evicted, group, node_alloc, pod, queue, resources, tiers_conf,
};
use crate::volcano::actions::reclaim::Reclaim;
use crate::volcano::framework::GangPhase;
use std::collections::BTreeSet;

/// The case's plugins in the one tier of `TestReclaim`, with the switches that
/// tier turns on (every other one is off in Volcano's test).
fn conf(plugins: &[&str]) -> String {
    const TIER: &[(&str, &[&str])] = &[
        ("conformance", &["Reclaimable"]),
        ("gang", &["Reclaimable", "JobStarving"]),
        ("proportion", &["Reclaimable", "QueueOrder", "Preemptive"]),
        ("capacity", &["Reclaimable", "QueueOrder", "Preemptive"]),
        ("priority", &["Reclaimable", "JobOrder", "TaskOrder"]),
    ];
    let tier: Vec<(&str, &[&str])> = TIER
        .iter()
        .filter(|(p, _)| plugins.contains(p))
        .copied()
        .collect();
    tiers_conf("reclaim", &[&tier])
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Three running pods of pg1 (the middle one preemptable) and one pending pod of
/// pg2, on one node that they fill.
fn one_overusing_queue(reclaimer_closed: bool) -> Table {
    let mut pods = vec![
        pod("preemptee1", "n1", true, resources("1", "1G"), "pg1"),
        pod("preemptee2", "n1", true, resources("1", "1G"), "pg1"),
        pod("preemptee3", "n1", true, resources("1", "1G"), "pg1"),
        pod("preemptor1", "", false, resources("1", "1G"), "pg2"),
    ];
    pods[0].not_preemptable = true;
    pods[2].not_preemptable = true;
    let q2 = queue("q2", 1, None);
    let mut pg1 = group("pg1", "q1", 1, GangPhase::Inqueue);
    pg1.priority = 100;
    let mut pg2 = group("pg2", "q2", 1, GangPhase::Inqueue);
    pg2.priority = 1000;
    Table {
        nodes: vec![("n1", node_alloc("3", "3Gi", 10))],
        queues: vec![
            queue("q1", 1, None),
            if reclaimer_closed { closed(q2) } else { q2 },
        ],
        groups: vec![pg1, pg2],
        pods,
        ..Table::default()
    }
}

#[test]
fn two_queue_with_one_queue_overusing_resource_should_reclaim() {
    let o =
        one_overusing_queue(false).run(&conf(&["conformance", "gang", "proportion"]), &[&Reclaim]);
    assert_eq!(evicted(&o), set(&["c1/preemptee2"]));
}

/// Two running pods each of pg1 and pg2 on n1, and pg3's pending preemptor;
/// the pods at `kept` are not preemptable.
fn two_by_two(kept: &[usize]) -> Vec<super::support::PodRow> {
    let mut pods = vec![
        pod("preemptee1-1", "n1", true, resources("1", "1G"), "pg1"),
        pod("preemptee1-2", "n1", true, resources("1", "1G"), "pg1"),
        pod("preemptee2-1", "n1", true, resources("1", "1G"), "pg2"),
        pod("preemptee2-2", "n1", true, resources("1", "1G"), "pg2"),
        pod("preemptor1", "", false, resources("1", "1G"), "pg3"),
    ];
    for i in kept {
        pods[*i].not_preemptable = true;
    }
    pods
}

#[test]
fn sort_reclaimees_when_reclaiming_from_overusing_queue() {
    let pods = two_by_two(&[3]);
    let groups = [("pg1", "q1", 500), ("pg2", "q2", 100), ("pg3", "q3", 1000)]
        .into_iter()
        .map(|(n, q, p)| {
            let mut g = group(n, q, 1, GangPhase::Inqueue);
            g.priority = p;
            g
        })
        .collect();
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4Gi", 10))],
        queues: ["q1", "q2", "q3"]
            .iter()
            .map(|q| queue(q, 1, None))
            .collect(),
        groups,
        pods,
        ..Table::default()
    };
    let o = t.run(
        &conf(&["conformance", "gang", "priority", "proportion"]),
        &[&Reclaim],
    );
    assert_eq!(evicted(&o), set(&["c1/preemptee2-1"]));
}

#[test]
fn sort_reclaimees_when_reclaiming_from_overusing_queues_with_different_queue_priority() {
    let pods = two_by_two(&[1, 3]);
    let queues = [("q1", 5), ("q2", 10), ("q3", 1)]
        .into_iter()
        .map(|(n, priority)| crate::volcano::objects::QueueSpec {
            priority,
            ..queue(n, 1, None)
        })
        .collect();
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4Gi", 10))],
        queues,
        groups: vec![
            group("pg1", "q1", 1, GangPhase::Inqueue),
            group("pg2", "q2", 1, GangPhase::Inqueue),
            group("pg3", "q3", 1, GangPhase::Inqueue),
        ],
        pods,
        ..Table::default()
    };
    let o = t.run(&conf(&["conformance", "gang", "proportion"]), &[&Reclaim]);
    assert_eq!(evicted(&o), set(&["c1/preemptee1-1"]));
}

#[test]
fn can_not_reclaim_resources_when_task_preemption_policy_is_never() {
    let mut preemptor = pod("preemptor1", "", false, resources("1", "1G"), "pg2");
    preemptor.never_preempts = true;
    let mut pg1 = group("pg1", "q1", 0, GangPhase::Inqueue);
    pg1.priority = 100;
    let mut pg2 = group("pg2", "q2", 0, GangPhase::Inqueue);
    pg2.priority = 1000;
    let t = Table {
        nodes: vec![("n1", node_alloc("1", "1Gi", 1))],
        queues: vec![queue("q1", 5, None), queue("q2", 10, None)],
        groups: vec![pg1, pg2],
        pods: vec![
            pod("preemptee1", "n1", true, resources("1", "1G"), "pg1"),
            preemptor,
        ],
        ..Table::default()
    };
    let o = t.run(&conf(&["conformance", "gang", "proportion"]), &[&Reclaim]);
    assert!(evicted(&o).is_empty(), "{o:?}");
}

#[test]
fn can_not_reclaim_resources_when_queue_is_not_open_proportion_plugin() {
    let o =
        one_overusing_queue(true).run(&conf(&["conformance", "gang", "proportion"]), &[&Reclaim]);
    assert!(evicted(&o).is_empty(), "{o:?}");
}

#[test]
fn can_not_reclaim_resources_when_queue_is_not_open_capacity_plugin() {
    let o = one_overusing_queue(true).run(&conf(&["conformance", "gang", "capacity"]), &[&Reclaim]);
    assert!(evicted(&o).is_empty(), "{o:?}");
}

#[test]
fn node_available_resources_should_be_included_in_reclaimed_resources() {
    let t = Table {
        nodes: vec![("n1", node_alloc("10", "2Gi", 10))],
        queues: vec![
            crate::volcano::objects::QueueSpec {
                priority: 1,
                ..queue("q1", 1, None)
            },
            crate::volcano::objects::QueueSpec {
                priority: 2,
                ..queue("q2", 1, None)
            },
            queue("q3", 3, None),
        ],
        groups: vec![
            group("pg1", "q1", 0, GangPhase::Running),
            group("pg2", "q2", 0, GangPhase::Running),
            group("pg3", "q3", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            pod("preemptee1-1", "n1", true, resources("1", "1G"), "pg1"),
            pod("preemptee2-1", "n1", true, resources("1", "1G"), "pg2"),
            pod("preemptor1", "", false, resources("2", "1G"), "pg3"),
        ],
        ..Table::default()
    };
    let o = t.run(
        &conf(&["conformance", "gang", "priority", "proportion"]),
        &[&Reclaim],
    );
    assert_eq!(evicted(&o), set(&["c1/preemptee1-1"]));
}

#[test]
fn reclaim_succeeds_for_second_task_when_first_task_has_preemption_policy_never() {
    let mut victim_no = pod(
        "victim-pod-no",
        "n1",
        true,
        resources("1", "1G"),
        "pg-victim",
    );
    victim_no.not_preemptable = true;
    let mut task1 = pod(
        "preemptor-task1-non-preemptable",
        "",
        false,
        resources("1", "1G"),
        "pg-preemptor",
    );
    task1.never_preempts = true;
    let mut pg_victim = group("pg-victim", "q1", 1, GangPhase::Running);
    pg_victim.priority = 100;
    let mut pg_preemptor = group("pg-preemptor", "q2", 2, GangPhase::Inqueue);
    pg_preemptor.priority = 1000;
    let t = Table {
        nodes: vec![("n1", node_alloc("2", "2G", 10))],
        queues: vec![queue("q1", 1, None), queue("q2", 1, None)],
        groups: vec![pg_victim, pg_preemptor],
        pods: vec![
            victim_no,
            pod("victim-pod", "n1", true, resources("1", "1G"), "pg-victim"),
            task1,
            pod(
                "preemptor-task2-preemptable",
                "",
                false,
                resources("1", "1G"),
                "pg-preemptor",
            ),
        ],
        ..Table::default()
    };
    let o = t.run(
        &conf(&["conformance", "gang", "proportion", "priority"]),
        &[&Reclaim],
    );
    assert_eq!(evicted(&o), set(&["c1/victim-pod"]));
}

#[test]
fn only_commit_evictions_on_the_node_where_reclaim_succeeds() {
    let t = Table {
        nodes: vec![("n1", node_alloc("10", "10G", 10))],
        queues: vec![queue("q1", 1, None), queue("q2", 9, None)],
        groups: vec![
            group("pg-victim", "q1", 0, GangPhase::Running),
            group("pg-preemptor", "q2", 1, GangPhase::Inqueue),
        ],
        pods: vec![
            pod("victim-n1", "n1", true, resources("2", "2G"), "pg-victim"),
            pod(
                "preemptor1",
                "",
                false,
                resources("3", "3G"),
                "pg-preemptor",
            ),
        ],
        ..Table::default()
    };
    let o = t.run(&conf(&["conformance", "gang", "proportion"]), &[&Reclaim]);
    assert!(evicted(&o).is_empty(), "{o:?}");
}
