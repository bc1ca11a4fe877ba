//! `pkg/scheduler/plugins/capacity/capacity_test.go`: `TestEnqueueAndAllocatable`
//! (enqueue then allocate with capacity alone: queues with an explicit deserved
//! amount and capability, pods that ask only CPU or only memory).
//!
//! Not yet translated: the session-open share tests (with and without
//! hierarchy), the ancestor reclaim scenarios and the DRA tests. Left out:
//! `Test_updateQueueAttrShare` and `Test_buildHierarchicalQueueAttrs_nilSafety`
//! call Go internals of the plugin on hand-built queue attributes;
//! `TestNoDoubleCountingForInqueueJobWithBindingTasks` and
//! `TestJobEnqueuedOnOtherPluginsReject` for the reasons given in [`super::proportion`].

use super::support::{Table, bound, closed, group, node_alloc, pod, queue, resources, tiers_conf};
use crate::resources::Resources;
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::enqueue::Enqueue;
use crate::volcano::framework::{Action, GangPhase};
use crate::volcano::objects::QueueSpec;
use std::collections::BTreeMap;

/// `util.BuildQueueWithResourcesQuantity(name, deserved, capability)`.
fn deserving(name: &str, deserved: Resources, capability: Resources) -> QueueSpec {
    QueueSpec {
        deserved: Some(deserved),
        ..queue(name, 1, Some(capability))
    }
}

/// pod1 (1 CPU, 3G) of pg1 in q1 on n1 and pod2 (3 CPUs, 1G) of pg2 in q2 on n2,
/// both Running; then `waiting`, a pending pod of its own Pending PodGroup
/// (minResources its request) in `queue`; enqueue and allocate with capacity.
fn run(
    waiting: (&'static str, &'static str, &'static str, (&str, &str)),
    running: bool,
) -> BTreeMap<String, String> {
    let (pod_name, pg, q, r) = waiting;
    let single = |name, queue, phase, (cpu, mem): (&str, &str)| {
        let mut g = group(name, queue, 1, phase);
        g.min_resources = Some(resources(cpu, mem));
        g
    };
    let mut groups = vec![single(pg, q, GangPhase::Pending, r)];
    let mut pods = vec![pod(pod_name, "", false, resources(r.0, r.1), pg)];
    let mut queues = vec![
        deserving("q1", resources("2", "2G"), resources("2", "2G")),
        deserving("q2", resources("2", "2G"), resources("3", "3G")),
    ];
    if running {
        groups.push(single("pg1", "q1", GangPhase::Running, ("1", "3G")));
        groups.push(single("pg2", "q2", GangPhase::Running, ("3", "1G")));
        pods.push(pod("pod1", "n1", true, resources("1", "3G"), "pg1"));
        pods.push(pod("pod2", "n2", true, resources("3", "1G"), "pg2"));
    } else {
        queues = vec![closed(queue("q3", 1, Some(resources("3", "3G"))))];
    }
    let t = Table {
        nodes: vec![
            ("n1", node_alloc("3", "3G", 10)),
            ("n2", node_alloc("3", "3G", 10)),
        ],
        queues,
        groups,
        pods,
        ..Table::default()
    };
    let conf = tiers_conf(
        "enqueue, allocate",
        &[&[(
            "capacity",
            &["Allocatable", "Preemptive", "Overused", "JobEnqueued"],
        )]],
    );
    bound(&t.run(&conf, &[&Enqueue as &dyn Action, &Allocate]))
}

fn binds(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(p, n)| (format!("c1/{p}"), n.to_string()))
        .collect()
}

#[test]
fn case0_memory_exceed_derserved_job_only_request_cpu_can_be_enqueued_and_allocated() {
    assert_eq!(
        run(("pod3", "pg3", "q1", ("1", "0G")), true),
        binds(&[("pod3", "n1")])
    );
}

#[test]
fn case1_cpu_exceed_derserved_job_only_request_memory_can_be_enqueued_and_allocated() {
    assert_eq!(
        run(("pod4", "pg4", "q2", ("0", "1G")), true),
        binds(&[("pod4", "n2")])
    );
}

#[test]
fn case2_exceed_capacity_can_not_enqueue() {
    assert_eq!(run(("pod5", "pg5", "q1", ("1", "1G")), true), binds(&[]));
}

#[test]
fn case4_queue_with_non_open_state_can_not_enqueue() {
    assert_eq!(run(("pod6", "pg6", "q3", ("1", "1G")), false), binds(&[]));
}
