//! `pkg/scheduler/actions/reclaim/reclaim_test.go` (`TestReclaim`): the reclaim
//! action over CPU and memory pods, with conformance, gang, priority and
//! proportion or capacity in one tier, as each case lists them.
//!
//! Volcano's cases reclaim for pods that ask only CPU and memory. Until such pods
//! are planned (issue 24 item 1), a case that needs an eviction for one is
//! ignored with that reason; the cases whose expectation is that nobody is
//! evicted run now. Left out: the cases after "Reclaim succeeds for second task
//! when first task has PreemptionPolicy=Never" (the multi-node regression cases)
//! are not translated yet.

use super::support::{Table, closed, evicted, group, pod, queue, resources};
use crate::volcano::actions::reclaim::Reclaim;
use crate::volcano::framework::GangPhase;
use std::collections::BTreeSet;

/// The plugins of a case, one tier, with Volcano's default switches.
fn conf(plugins: &[&str]) -> String {
    let mut text = "actions: reclaim\ntiers:\n- plugins:\n".to_string();
    for p in plugins {
        text.push_str(&format!("  - name: {p}\n"));
    }
    text
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
        nodes: vec![("n1", resources("3", "3Gi"))],
        queues: vec![
            queue("q1", 1, None),
            if reclaimer_closed { closed(q2) } else { q2 },
        ],
        groups: vec![pg1, pg2],
        pods,
    }
}

#[test]
#[ignore = "needs CPU-only planning (issue 24 item 1)"]
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
#[ignore = "needs CPU-only planning (issue 24 item 1)"]
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
        nodes: vec![("n1", resources("4", "4Gi"))],
        queues: ["q1", "q2", "q3"]
            .iter()
            .map(|q| queue(q, 1, None))
            .collect(),
        groups,
        pods,
    };
    let o = t.run(
        &conf(&["conformance", "gang", "priority", "proportion"]),
        &[&Reclaim],
    );
    assert_eq!(evicted(&o), set(&["c1/preemptee2-1"]));
}

#[test]
#[ignore = "needs CPU-only planning (issue 24 item 1)"]
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
        nodes: vec![("n1", resources("4", "4Gi"))],
        queues,
        groups: vec![
            group("pg1", "q1", 1, GangPhase::Inqueue),
            group("pg2", "q2", 1, GangPhase::Inqueue),
            group("pg3", "q3", 1, GangPhase::Inqueue),
        ],
        pods,
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
        nodes: vec![("n1", resources("1", "1Gi"))],
        queues: vec![queue("q1", 5, None), queue("q2", 10, None)],
        groups: vec![pg1, pg2],
        pods: vec![
            pod("preemptee1", "n1", true, resources("1", "1G"), "pg1"),
            preemptor,
        ],
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
#[ignore = "needs CPU-only planning (issue 24 item 1)"]
fn node_available_resources_should_be_included_in_reclaimed_resources() {
    let t = Table {
        nodes: vec![("n1", resources("10", "2Gi"))],
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
    };
    let o = t.run(
        &conf(&["conformance", "gang", "priority", "proportion"]),
        &[&Reclaim],
    );
    assert_eq!(evicted(&o), set(&["c1/preemptee1-1"]));
}

#[test]
#[ignore = "needs CPU-only planning (issue 24 item 1)"]
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
        nodes: vec![("n1", resources("2", "2G"))],
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
    };
    let o = t.run(
        &conf(&["conformance", "gang", "proportion", "priority"]),
        &[&Reclaim],
    );
    assert_eq!(evicted(&o), set(&["c1/victim-pod"]));
}
