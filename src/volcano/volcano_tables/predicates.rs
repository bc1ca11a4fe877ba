//! `pkg/scheduler/plugins/predicates/predicates_test.go`: the cases that run
//! sessions (`TestEventHandler`, `TestNodeNum`, `TestPodAntiAffinity`): allocate
//! (then backfill or preempt) with the predicates plugin, a nodeSelector, the
//! node's pod count and required pod anti-affinity on `role: worker` per
//! hostname.
//!
//! Left out: the other tests of the file call the plugin's Go internals with
//! hand-built objects and no session (`TestTaskPodAnnotations`, the
//! `SetUpDynamicResourcesArgs` and `InitPlugin` argument parsing of kube-scheduler
//! plugins Volcano embeds, `TestBatchNodeOrderRunsPreScorePlugins`,
//! `TestPredicateFailureReasonAggregationOrderStable` and the reserve-order
//! tests, each driving fake kube-scheduler framework plugins); this scheduler
//! does not embed kube-scheduler's plugin framework.

use super::support::{
    GroupRow, PodRow, Table, bound, evicted, group, node_alloc, pod, queue, resources, tiers_conf,
};
use crate::resources::Resources;
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::backfill::Backfill;
use crate::volcano::actions::preempt::Preempt;
use crate::volcano::framework::GangPhase;
use std::collections::BTreeMap;

/// `getWorkerAffinity()`: no two `role: worker` pods on one hostname.
fn worker_anti_affinity() -> serde_json::Value {
    serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [
            {"key": "role", "operator": "In", "values": ["worker"]}
        ]},
        "topologyKey": "kubernetes.io/hostname"
    }]}})
}

/// A pod labelled `role: worker` (`util.BuildPod`'s labels).
fn worker(mut p: PodRow) -> PodRow {
    p.labels = vec![("role", "worker")];
    p
}

/// `util.BuildPodGroupWithPrio(name, "ns1", "q1", min, nil, phase, class)`.
fn prio_group(name: &'static str, min: usize, phase: GangPhase, priority: i32) -> GroupRow {
    let mut g = group(name, "q1", min, phase);
    g.priority = priority;
    g
}

fn binds(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(p, n)| (format!("c1/{p}"), n.to_string()))
        .collect()
}

/// worker-1 (selects `selector: worker`) and worker-2 of pg1 (minMember 2,
/// priority 2), worker-3 of pg2 (minMember 1, priority 1), all in q1 of weight 0.
fn three_workers(requests: [Resources; 3], anti_affinity: bool) -> (Vec<GroupRow>, Vec<PodRow>) {
    let [r1, r2, r3] = requests;
    let mut pods = vec![
        worker(pod("worker-1", "", false, r1, "pg1")),
        worker(pod("worker-2", "", false, r2, "pg1")),
        worker(pod("worker-3", "", false, r3, "pg2")),
    ];
    pods[0].node_selector = vec![("selector", "worker")];
    if anti_affinity {
        for p in &mut pods {
            p.affinity = Some(worker_anti_affinity());
        }
    }
    let groups = vec![
        prio_group("pg1", 2, GangPhase::Inqueue, 2),
        prio_group("pg2", 1, GangPhase::Inqueue, 1),
    ];
    (groups, pods)
}

/// pg1's two workers cannot both go to node1 (anti-affinity) and worker-2 does
/// not fit node2: pg1 places nobody; worker-3 goes to node1.
#[test]
fn pod_deallocate() {
    let (groups, pods) = three_workers(
        [
            resources("3", "3k"),
            resources("5", "5k"),
            resources("4", "4k"),
        ],
        true,
    );
    let t = Table {
        nodes: vec![
            ("node1", node_alloc("14", "14k", 10)),
            ("node2", node_alloc("3", "3k", 10)),
        ],
        node_labels: vec![
            ("node1", "selector", "worker"),
            ("node1", "kubernetes.io/hostname", "node1"),
            ("node2", "kubernetes.io/hostname", "node2"),
        ],
        queues: vec![queue("q1", 0, None)],
        groups,
        pods,
    };
    let conf = tiers_conf(
        "allocate",
        &[&[
            ("predicates", &["Predicate"]),
            ("gang", &["JobReady", "JobPipelined"]),
            ("priority", &["JobOrder"]),
        ]],
    );
    assert_eq!(
        bound(&t.run(&conf, &[&Allocate])),
        binds(&[("worker-3", "node1")])
    );
}

/// The node takes two pods: pg1's two best-effort workers, not pg2's.
#[test]
fn pod_predicate() {
    let none = Resources::default;
    let (groups, pods) = three_workers([none(), none(), none()], false);
    let t = Table {
        nodes: vec![("node1", node_alloc("4", "4k", 2))],
        node_labels: vec![("node1", "selector", "worker")],
        queues: vec![queue("q1", 0, None)],
        groups,
        pods,
    };
    let conf = tiers_conf("allocate, backfill", &[&[("predicates", &["Predicate"])]]);
    assert_eq!(
        bound(&t.run(&conf, &[&Allocate, &Backfill])),
        binds(&[("worker-1", "node1"), ("worker-2", "node1")])
    );
}

/// worker-3 repels worker-1 on the only node; evicting worker-2 (low priority)
/// would not help, so nobody is evicted or pipelined.
#[test]
fn pod_anti_affinity() {
    const HIGH: i32 = 100_000;
    const LOW: i32 = 10;
    let mut w1 = worker(pod("worker-1", "n1", true, resources("3", "3G"), "pg1"));
    w1.priority = HIGH;
    w1.affinity = Some(worker_anti_affinity());
    let mut w2 = pod("worker-2", "n1", true, resources("3", "3G"), "pg1");
    w2.priority = LOW;
    let mut w3 = worker(pod("worker-3", "", false, resources("3", "3G"), "pg2"));
    w3.priority = HIGH;
    w3.affinity = Some(worker_anti_affinity());
    let t = Table {
        nodes: vec![("n1", node_alloc("12", "12G", 2))],
        node_labels: vec![("n1", "kubernetes.io/hostname", "node1")],
        queues: vec![queue("q1", 0, Some(resources("9", "9G")))],
        groups: vec![
            prio_group("pg1", 0, GangPhase::Running, LOW),
            prio_group("pg2", 1, GangPhase::Inqueue, HIGH),
        ],
        pods: vec![w1, w2, w3],
    };
    let conf = tiers_conf(
        "allocate, preempt",
        &[&[
            ("predicates", &["Predicate"]),
            ("priority", &["Preemptable", "JobStarving"]),
        ]],
    );
    let o = t.run(&conf, &[&Allocate, &Preempt]);
    assert!(evicted(&o).is_empty(), "{o:?}");
    assert!(
        o.commits
            .iter()
            .flat_map(|c| &c.members)
            .all(|m| !m.pipelined),
        "{o:?}"
    );
}
