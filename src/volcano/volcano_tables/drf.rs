//! `pkg/scheduler/plugins/drf/hdrf_test.go` (`TestHDRF`): allocate with
//! hierarchical DRF and proportion over queues of a `volcano.sh/hierarchy`, pods
//! asking CPU only, memory only or both, until the one node is full. Each case's
//! expectation is the pods each PodGroup ends with (Volcano's `expected`
//! resources, one pod per `pods` unit).
//!
//! Volcano's loop compares its whole `expected` map with each job's allocation,
//! which never holds, so its test never fails whatever is allocated; the
//! expectations are asserted here as the table states them.

use super::support::{GroupRow, PodRow, Table, group, node_alloc, pod, resources, tiers_conf};
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::framework::GangPhase;
use crate::volcano::objects::QueueSpec;
use std::collections::BTreeMap;

/// `TestHDRF`'s tier: drf with `enableHierarchy`, and proportion.
fn conf() -> String {
    tiers_conf(
        "allocate",
        &[&[
            ("drf", &["QueueOrder", "JobOrder"]),
            ("proportion", &["JobEnqueued", "QueueOrder", "Reclaimable"]),
        ]],
    )
    .replace(
        "  - name: drf\n",
        "  - name: drf\n    enableHierarchy: true\n",
    )
}

/// `makePods(n, cpu, mem, group)`: pending pods `<group>-p<i>`.
fn make_pods(n: usize, cpu: &str, mem: &str, group: &'static str) -> Vec<PodRow> {
    (0..n)
        .map(|i| {
            let name: &'static str = format!("{group}-p{i}").leak();
            pod(name, "", false, resources(cpu, mem), group)
        })
        .collect()
}

/// `util.BuildQueueWithAnnos(name, 1, nil, {hierarchy, hierarchy-weights})`.
fn hierarchy_queue(name: &str, path: &str, weights: &str) -> QueueSpec {
    QueueSpec {
        hierarchy: Some(path.into()),
        hierarchy_weights: Some(weights.into()),
        ..super::support::queue(name, 1, None)
    }
}

fn inqueue(name: &'static str, queue: &'static str) -> GroupRow {
    group(name, queue, 0, GangPhase::Inqueue)
}

/// Pods placed per PodGroup after allocate.
fn placed(t: &Table) -> BTreeMap<String, usize> {
    t.run(&conf(), &[&Allocate])
        .verdicts
        .iter()
        .map(|(k, v)| (k.name.to_string(), v.ready))
        .collect()
}

fn expect(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn rescaling_test() {
    let t = Table {
        nodes: vec![("n", node_alloc("10", "10G", 50))],
        queues: vec![
            hierarchy_queue("root-sci", "root/sci", "100/50"),
            hierarchy_queue("root-eng-dev", "root/eng/dev", "100/50/50"),
            hierarchy_queue("root-eng-prod", "root/eng/prod", "100/50/50"),
        ],
        groups: vec![
            inqueue("pg1", "root-sci"),
            inqueue("pg21", "root-eng-dev"),
            inqueue("pg22", "root-eng-prod"),
        ],
        pods: [
            make_pods(10, "1", "1G", "pg1"),
            make_pods(10, "1", "0G", "pg21"),
            make_pods(10, "0", "1G", "pg22"),
        ]
        .concat(),
        ..Table::default()
    };
    assert_eq!(placed(&t), expect(&[("pg1", 5), ("pg21", 5), ("pg22", 5)]));
}

#[test]
fn blocking_nodes_test() {
    let t = Table {
        nodes: vec![("n", node_alloc("30", "30G", 500))],
        queues: vec![
            hierarchy_queue("root-pg1", "root/pg1", "100/25"),
            hierarchy_queue("root-pg2", "root/pg2", "100/25"),
            hierarchy_queue("root-pg3-pg31", "root/pg3/pg31", "100/25/50"),
            hierarchy_queue("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
            hierarchy_queue("root-pg4", "root/pg4", "100/25"),
        ],
        groups: vec![
            inqueue("pg1", "root-pg1"),
            inqueue("pg2", "root-pg2"),
            inqueue("pg31", "root-pg3-pg31"),
            inqueue("pg32", "root-pg3-pg31"),
            inqueue("pg4", "root-pg4"),
        ],
        pods: [
            make_pods(30, "1", "0G", "pg1"),
            make_pods(30, "1", "0G", "pg2"),
            make_pods(30, "1", "0G", "pg31"),
            make_pods(30, "0", "1G", "pg32"),
            make_pods(30, "0", "1G", "pg4"),
        ]
        .concat(),
        ..Table::default()
    };
    assert_eq!(
        placed(&t),
        expect(&[
            ("pg1", 10),
            ("pg2", 10),
            ("pg31", 10),
            ("pg32", 15),
            ("pg4", 15)
        ])
    );
}
