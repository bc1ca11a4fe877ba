//! `pkg/scheduler/actions/preempt/preempt_test.go` (`TestPreempt`, in part): the
//! preempt action with conformance, gang, priority and proportion and the
//! switches Volcano's table sets (every other switch left unset there, which
//! Volcano reads as off).
//!
//! Not yet translated: the remaining `TestPreempt` cases (several victims for a
//! large task, best-effort pods, preemption policy Never, the per-node rollback and
//! multi-queue regressions), `TestNormalPreemptRechecksPredicateAfterEviction` and
//! `TestTopologyAwarePreempt` (Volcano's topology-aware preemption option, which
//! this scheduler does not have).

use super::support::{GroupRow, PodRow, Table, evicted, group, node_alloc, pod, queue, resources};
use crate::resources::Resources;
use crate::volcano::actions::preempt::Preempt;
use crate::volcano::framework::GangPhase;

const CONF: &str = "actions: preempt
tiers:
- plugins:
  - name: conformance
    enableReclaimable: false
  - name: gang
    enableJobOrder: false
    enableJobReady: false
    enableReclaimable: false
  - name: priority
    enableJobReady: false
    enableReclaimable: false
  - name: proportion
    enableJobEnqueued: false
    enablePreemptive: false
    enableReclaimable: false
";

const LOW: i32 = 10;
const HIGH: i32 = 100_000;

fn prio_group(name: &'static str, min: usize, priority: i32) -> GroupRow {
    let mut g = group(name, "q1", min, GangPhase::Inqueue);
    g.priority = priority;
    g
}

/// One node `n1` of `cpu` CPUs and as many G of memory, queue q1 of capability
/// `cap`, these groups and pods; preempt alone.
fn run(cpu: &str, cap: Option<Resources>, groups: Vec<GroupRow>, pods: Vec<PodRow>) -> usize {
    let memory = format!("{cpu}G");
    let t = Table {
        nodes: vec![("n1", node_alloc(cpu, &memory, 10))],
        queues: vec![queue("q1", 1, cap)],
        groups,
        pods,
    };
    evicted(&t.run(CONF, &[&Preempt])).len()
}

fn one_g(name: &'static str, node: &'static str, running: bool, group: &'static str) -> PodRow {
    pod(name, node, running, resources("1", "1G"), group)
}

#[test]
fn do_not_preempt_if_there_are_enough_idle_resources() {
    let evictions = run(
        "10",
        None,
        vec![group("pg1", "q1", 3, GangPhase::Inqueue)],
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            one_g("preemptor1", "", false, "pg1"),
        ],
    );
    assert_eq!(evictions, 0);
}

#[test]
fn do_not_preempt_if_job_is_pipelined() {
    let evictions = run(
        "3",
        None,
        vec![
            group("pg1", "q1", 1, GangPhase::Inqueue),
            group("pg2", "q1", 1, GangPhase::Inqueue),
        ],
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            one_g("preemptee3", "n1", true, "pg2"),
            one_g("preemptor2", "", false, "pg2"),
        ],
    );
    assert_eq!(evictions, 0);
}

/// The node has room; the queue (capability 4 CPUs) does not: Volcano evicts.
#[test]
fn preempt_low_priority_job_in_same_queue() {
    let evictions = run(
        "12",
        Some(resources("4", "4G")),
        vec![prio_group("pg1", 0, LOW), prio_group("pg2", 1, HIGH)],
        vec![
            pod("preemptee1", "n1", true, resources("3", "3G"), "pg1"),
            pod("preemptor1", "", false, resources("3", "3G"), "pg2"),
        ],
    );
    assert_eq!(evictions, 1);
}

#[test]
fn preempt_low_priority_job_in_same_queue_allocatable_and_has_enough_resource_dont_preempt() {
    let evictions = run(
        "12",
        Some(resources("6", "6G")),
        vec![prio_group("pg1", 1, LOW), prio_group("pg2", 1, HIGH)],
        vec![
            pod("preemptee1", "n1", true, resources("3", "3G"), "pg1"),
            pod("preemptor1", "", false, resources("3", "3G"), "pg2"),
        ],
    );
    assert_eq!(evictions, 0);
}

#[test]
fn rollback_evictions_when_preemptor_exceeds_queue_capacity_after_evicting_victims() {
    let evictions = run(
        "10",
        Some(resources("3", "3G")),
        vec![prio_group("pg1", 1, LOW), prio_group("pg2", 1, HIGH)],
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            pod("preemptor1", "", false, resources("4", "4G"), "pg2"),
        ],
    );
    assert_eq!(evictions, 0);
}
