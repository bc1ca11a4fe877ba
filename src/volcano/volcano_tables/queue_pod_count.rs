//! A queue's `pods` amount, as Volcano reads it (no Volcano table covers it;
//! the expectations follow `pkg/scheduler/api/resource_info.go` and the
//! capacity and proportion plugins). Volcano charges every task one `pods`
//! against its queue (`GetPodResourceRequest` adds it), and a queue's
//! `capability`, `deserved` and `guarantee` may name `pods` like any resource.
//! The limit checks skip that dimension (`IsIgnoredScalarResource`: allocatable,
//! enqueue, capacity's preemptive and "over deserved" comparisons), so a `pods`
//! capability bounds nothing; capacity's reclaim compares the count where those
//! checks are not used: a queue keeps as many pods as its guarantee names, and
//! a deserved amount naming `pods` covers every pod of the queue; capacity's
//! queue order counts them too (its share runs over every deserved dimension).
//! Proportion shares the nodes' pod slots out like any resource (its total is
//! the session's, pods included, and its request counts one pod per task), and
//! compares the pod count where Volcano's `LessEqual` does: "overused", the
//! queue order's share, and "above deserved" for reclaim.

use super::support::{Table, bound, evicted, group, node_alloc, pod, resources, with};
use crate::resources::Resources;
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::enqueue::Enqueue;
use crate::volcano::actions::reclaim::Reclaim;
use crate::volcano::framework::{Action, GangPhase};
use crate::volcano::objects::QueueSpec;
use std::collections::BTreeSet;

/// `queue_plugin` with gang and predicates in one tier, so that its victims
/// are the ones asked for.
fn conf(queue_plugin: &str) -> String {
    format!(
        "actions: enqueue, allocate, reclaim\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: {queue_plugin}\n"
    )
}

/// `resources(cpu, memory)` with `pods` whole pods.
fn with_pods(cpu: &str, memory: &str, pods: i64) -> Resources {
    with(resources(cpu, memory), "pods", pods)
}

/// Three pending one-CPU pods of their own PodGroups (minResources naming one
/// pod each) in a queue whose capability and deserved amount allow one pod:
/// enqueue and allocate with `queue_plugin`; the pods bound.
fn three_pods_in_a_queue_capped_at_one(queue_plugin: &str) -> BTreeSet<String> {
    let q = QueueSpec {
        capability: Some(with_pods("4", "4G", 1)),
        deserved: Some(with_pods("4", "4G", 1)),
        reclaimable: true,
        ..QueueSpec::new("q1")
    };
    let names = [("pod1", "pg1"), ("pod2", "pg2"), ("pod3", "pg3")];
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", 10))],
        queues: vec![q],
        groups: names
            .iter()
            .map(|(_, pg)| {
                let mut g = group(pg, "q1", 1, GangPhase::Pending);
                g.min_resources = Some(with_pods("1", "1G", 1));
                g
            })
            .collect(),
        pods: names
            .iter()
            .map(|(p, pg)| pod(p, "", false, resources("1", "1G"), pg))
            .collect(),
        ..Table::default()
    };
    bound(&t.run(&conf(queue_plugin), &[&Enqueue as &dyn Action, &Allocate]))
        .into_keys()
        .collect()
}

#[test]
fn a_pods_capability_admits_and_places_more_pods_under_capacity() {
    assert_eq!(
        three_pods_in_a_queue_capped_at_one("capacity"),
        BTreeSet::from(["c1/pod1".into(), "c1/pod2".into(), "c1/pod3".into()])
    );
}

#[test]
fn a_pods_capability_admits_and_places_more_pods_under_proportion() {
    assert_eq!(
        three_pods_in_a_queue_capped_at_one("proportion"),
        BTreeSet::from(["c1/pod1".into(), "c1/pod2".into(), "c1/pod3".into()])
    );
}

/// q2 runs `running` one-CPU pods on n1 (4 CPUs) and deserves `q2_deserved`,
/// with `q2_guarantee`; q1 (deserving 2 CPUs) waits with a pod asking 2 CPUs,
/// more than n1 has free. Allocate then reclaim with capacity; the evicted pods.
fn reclaim_from_q2(
    running: usize,
    q2_deserved: Resources,
    q2_guarantee: Option<Resources>,
) -> BTreeSet<String> {
    let q1 = QueueSpec {
        deserved: Some(resources("2", "2G")),
        reclaimable: true,
        ..QueueSpec::new("q1")
    };
    let q2 = QueueSpec {
        deserved: Some(q2_deserved),
        guarantee: q2_guarantee,
        reclaimable: true,
        ..QueueSpec::new("q2")
    };
    let running_pods = ["r1", "r2", "r3"];
    let mut groups = vec![group("waiting", "q1", 1, GangPhase::Inqueue)];
    let mut pods = vec![pod("w1", "", false, resources("2", "0"), "waiting")];
    for p in &running_pods[..running] {
        groups.push(group(p, "q2", 1, GangPhase::Running));
        pods.push(pod(p, "n1", true, resources("1", "0"), p));
    }
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", 10))],
        queues: vec![q1, q2],
        groups,
        pods,
        ..Table::default()
    };
    evicted(&t.run(&conf("capacity"), &[&Allocate as &dyn Action, &Reclaim]))
}

#[test]
fn a_pods_guarantee_keeps_that_many_pods_of_the_queue_from_reclaim() {
    // Three pods and a guarantee of two: one may go, and one is all q1 needs.
    assert_eq!(
        reclaim_from_q2(3, resources("1", "1G"), Some(with_pods("0", "0", 2))).len(),
        1
    );
    // A guarantee of three: none may go.
    let kept = reclaim_from_q2(3, resources("1", "1G"), Some(with_pods("0", "0", 3)));
    assert!(kept.is_empty(), "{kept:?}");
}

#[test]
fn a_deserved_amount_naming_only_pods_covers_every_pod_of_the_queue() {
    // Without it, q2 deserves nothing its CPU-only pods ask for: each is a
    // victim at once.
    assert_eq!(reclaim_from_q2(3, resources("0", "0"), None).len(), 1);
    // Naming pods, q2's pods are within what it deserves on every dimension
    // that counts for reclaim: none goes.
    let taken = reclaim_from_q2(3, with(Resources::default(), "pods", 5), None);
    assert!(taken.is_empty(), "{taken:?}");
}

#[test]
fn a_queue_deserving_pods_is_served_by_its_pod_count_too() {
    // q1 deserves 4 CPUs and 1 pod and runs one 1-CPU pod: its share is 1 (one
    // pod of one). q2 deserves 4 CPUs and runs two: its share is 0.5. n1 has
    // room for one more pod; the queue with the lower share gets it.
    let deserving = |name: &str, deserved: Resources| QueueSpec {
        deserved: Some(deserved),
        reclaimable: true,
        ..QueueSpec::new(name)
    };
    let running = |name: &'static str, queue: &'static str| {
        (
            group(name, queue, 1, GangPhase::Running),
            pod(name, "n1", true, resources("1", "0"), name),
        )
    };
    let waiting = |name: &'static str, queue: &'static str| {
        (
            group(name, queue, 1, GangPhase::Inqueue),
            pod(name, "", false, resources("1", "0"), name),
        )
    };
    let (groups, pods) = [
        running("a1", "q1"),
        running("b1", "q2"),
        running("b2", "q2"),
        waiting("a2", "q1"),
        waiting("b3", "q2"),
    ]
    .into_iter()
    .unzip();
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", 10))],
        queues: vec![
            deserving("q1", with_pods("4", "4G", 1)),
            deserving("q2", resources("4", "4G")),
        ],
        groups,
        pods,
        ..Table::default()
    };
    let placed: BTreeSet<String> = bound(&t.run(&conf("capacity"), &[&Allocate as &dyn Action]))
        .into_keys()
        .collect();
    assert_eq!(placed, BTreeSet::from(["c1/b3".to_string()]));
}

#[test]
fn proportion_reclaims_from_a_queue_holding_more_pods_than_its_share_of_the_pod_slots() {
    // n1 has 4 CPUs and 4 pod slots, all taken by q2's four half-CPU pods; q1
    // (same weight) waits with one half-CPU pod. q1 deserves 0.5 CPU and 1 pod,
    // q2 2 CPUs and the 3 pods left: on CPU q2 holds no more than it deserves,
    // but it holds one pod too many, so one of its pods is reclaimed.
    let groups = vec![
        group("waiting", "q1", 1, GangPhase::Inqueue),
        group("big", "q2", 1, GangPhase::Running),
    ];
    let mut pods = vec![pod("w1", "", false, resources("500m", "0"), "waiting")];
    for p in ["b1", "b2", "b3", "b4"] {
        pods.push(pod(p, "n1", true, resources("500m", "0"), "big"));
    }
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", 4))],
        queues: vec![
            super::support::queue("q1", 1, None),
            super::support::queue("q2", 1, None),
        ],
        groups,
        pods,
        ..Table::default()
    };
    let taken = evicted(&t.run(&conf("proportion"), &[&Allocate as &dyn Action, &Reclaim]));
    assert_eq!(taken.len(), 1, "{taken:?}");
}
