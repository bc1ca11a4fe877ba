//! `pkg/scheduler/actions/preempt/preempt_test.go` (`TestPreempt`): the preempt
//! action with conformance, gang, priority and proportion and the switches of
//! Volcano's tier (every other switch off, as Volcano reads an unset switch in
//! its tests). PodGroups of "low-priority" (10) and "high-priority" (100000).
//! Every case of `TestPreempt` is here; `TestTopologyAwarePreempt` is in
//! [`super::preempt_topology_aware`].
//!
//! Left out:
//! - `TestNormalPreemptRechecksPredicateAfterEviction` (and its benchmark): its
//!   predicate is a plugin written inside the Go test that refuses the node while
//!   a pod named "preemptee" is not releasing; no plugin of Volcano's or of this
//!   scheduler behaves so, so there is nothing of ours for it to drive.
//! - `preempt_shard_test.go`: Volcano's node sharding between scheduler
//!   instances, which this scheduler does not have.
//! - The `minTaskMember` maps of the PodGroups (`{"": n}`): they name the task
//!   role of pods built without one; no case's expectation depends on them.

use super::support::{
    GroupRow, PREEMPTING_PLUGINS, PodRow, Table, evicted, group, node_alloc, pod, queue, resources,
    tiers_conf,
};
use crate::resources::Resources;
use crate::volcano::actions::preempt::Preempt;
use crate::volcano::framework::GangPhase;
use std::collections::BTreeSet;

/// `TestPreempt`'s tier.
pub(super) fn conf() -> String {
    tiers_conf(
        "preempt",
        &[&[
            PREEMPTING_PLUGINS,
            &[("proportion", &["Overused", "Allocatable", "QueueOrder"])],
        ]
        .concat()],
    )
}

const LOW: i32 = 10;
const HIGH: i32 = 100_000;

/// `util.BuildPodGroupWithPrio(name, "c1", "q1", min, …, Inqueue, priority)`.
fn prio_group(name: &'static str, min: usize, priority: i32) -> GroupRow {
    let mut g = group(name, "q1", min, GangPhase::Inqueue);
    g.priority = priority;
    g
}

/// Runs preempt alone on one node `n1` of `cpu` CPUs, as many G of memory and
/// `pods` pods, with queue q1 of capability `cap`; the pods evicted.
fn run(
    (cpu, pods_cap): (&str, i64),
    cap: Option<Resources>,
    groups: Vec<GroupRow>,
    pods: Vec<PodRow>,
) -> BTreeSet<String> {
    let memory = format!("{cpu}G");
    let t = Table {
        nodes: vec![("n1", node_alloc(cpu, &memory, pods_cap))],
        queues: vec![queue("q1", 1, cap)],
        groups,
        pods,
        ..Table::default()
    };
    evicted(&t.run(&conf(), &[&Preempt]))
}

/// preemptee1 (`victim`) of pg1 (low priority, minMember `low_min`) running on
/// n1 and preemptor1 (`preemptor`) of pg2 (high priority) waiting.
fn one_against_one(
    node: (&str, i64),
    cap: (&str, &str),
    low_min: usize,
    victim: Resources,
    preemptor: Resources,
) -> BTreeSet<String> {
    run(
        node,
        Some(resources(cap.0, cap.1)),
        low_and_high(low_min),
        vec![
            pod("preemptee1", "n1", true, victim, "pg1"),
            pod("preemptor1", "", false, preemptor, "pg2"),
        ],
    )
}

/// pg1 of low priority (minMember `low_min`) and pg2 of high priority
/// (minMember 1), both in q1.
fn low_and_high(low_min: usize) -> Vec<GroupRow> {
    vec![prio_group("pg1", low_min, LOW), prio_group("pg2", 1, HIGH)]
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| format!("c1/{n}")).collect()
}

fn one_g(name: &'static str, node: &'static str, running: bool, group: &'static str) -> PodRow {
    pod(name, node, running, resources("1", "1G"), group)
}

/// `util.BuildPod` with `volcano.sh/preemptable: "false"`.
fn kept(mut p: PodRow) -> PodRow {
    p.not_preemptable = true;
    p
}

#[test]
fn do_not_preempt_if_there_are_enough_idle_resources() {
    let evicted = run(
        ("10", 10),
        None,
        vec![group("pg1", "q1", 3, GangPhase::Inqueue)],
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            one_g("preemptor1", "", false, "pg1"),
        ],
    );
    assert_eq!(evicted, set(&[]));
}

#[test]
fn do_not_preempt_if_job_is_pipelined() {
    let evicted = run(
        ("3", 10),
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
    assert_eq!(evicted, set(&[]));
}

#[test]
fn preempt_one_task_of_different_job_to_fit_both_jobs_on_one_node() {
    let evicted = run(
        ("2", 10),
        None,
        low_and_high(1),
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            kept(one_g("preemptee2", "n1", true, "pg1")),
            one_g("preemptor1", "", false, "pg2"),
            one_g("preemptor2", "", false, "pg2"),
        ],
    );
    assert_eq!(evicted, set(&["preemptee1"]));
}

#[test]
fn preempt_enough_tasks_to_fit_large_task_of_different_job() {
    let evicted = run(
        ("6", 10),
        None,
        low_and_high(1),
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            kept(one_g("preemptee3", "n1", true, "pg1")),
            pod("preemptor1", "", false, resources("5", "5G"), "pg2"),
        ],
    );
    assert_eq!(evicted, set(&["preemptee2", "preemptee1"]));
}

/// The node has room; the queue (capability 4 CPUs) does not: Volcano evicts.
#[test]
fn preempt_low_priority_job_in_same_queue() {
    let evicted = one_against_one(
        ("12", 10),
        ("4", "4G"),
        0,
        resources("3", "3G"),
        resources("3", "3G"),
    );
    assert_eq!(evicted, set(&["preemptee1"]));
}

#[test]
fn preempt_low_priority_job_in_same_queue_allocatable_and_has_enough_resource_dont_preempt() {
    let evicted = one_against_one(
        ("12", 10),
        ("6", "6G"),
        1,
        resources("3", "3G"),
        resources("3", "3G"),
    );
    assert_eq!(evicted, set(&[]));
}

#[test]
fn preempt_low_priority_job_in_same_queue_but_not_pod_with_preemptable_false_or_higher_priority() {
    let mut preemptee3 = one_g("preemptee3", "n1", true, "pg1");
    preemptee3.priority = HIGH;
    let evicted = run(
        ("12", 10),
        Some(resources("3", "3G")),
        low_and_high(1),
        vec![
            kept(one_g("preemptee1", "n1", true, "pg1")),
            one_g("preemptee2", "n1", true, "pg1"),
            preemptee3,
            one_g("preemptor1", "", false, "pg2"),
        ],
    );
    assert_eq!(evicted, set(&["preemptee2"]));
}

/// The node takes one pod: a best-effort pod holds its only slot.
#[test]
fn un_best_effort_high_priority_pod_preempt_best_effort_low_priority_pod_in_same_queue() {
    let evicted = one_against_one(
        ("12", 1),
        ("6", "6G"),
        0,
        Resources::default(),
        resources("3", "3G"),
    );
    assert_eq!(evicted, set(&["preemptee1"]));
}

#[test]
fn best_effort_high_priority_pod_preempt_best_effort_low_priority_pod_in_same_queue() {
    let evicted = one_against_one(
        ("12", 1),
        ("6", "6G"),
        0,
        Resources::default(),
        Resources::default(),
    );
    assert_eq!(evicted, set(&["preemptee1"]));
}

#[test]
fn can_not_preempt_resources_when_task_preemption_policy_is_never() {
    let mut preemptor = one_g("preemptor1", "", false, "pg2");
    preemptor.never_preempts = true;
    let t = Table {
        nodes: vec![("n1", node_alloc("1", "1Gi", 1))],
        queues: vec![queue("q1", 1, None)],
        groups: low_and_high(0),
        pods: vec![one_g("preemptee1", "n1", true, "pg1"), preemptor],
        ..Table::default()
    };
    assert_eq!(evicted(&t.run(&conf(), &[&Preempt])), set(&[]));
}

#[test]
fn rollback_evictions_when_preemptor_exceeds_queue_capacity_after_evicting_victims() {
    let evicted = run(
        ("10", 10),
        Some(resources("3", "3G")),
        low_and_high(1),
        vec![
            one_g("preemptee1", "n1", true, "pg1"),
            one_g("preemptee2", "n1", true, "pg1"),
            pod("preemptor1", "", false, resources("4", "4G"), "pg2"),
        ],
    );
    assert_eq!(evicted, set(&[]));
}

/// Evicting the 1-CPU pod on n1 leaves the queue without room (capability 6
/// CPUs); evicting the 4-CPU pod on n2 gives it room: only n2's victim goes.
#[test]
fn only_commit_evictions_on_the_node_where_preemption_succeeds() {
    let t = Table {
        nodes: vec![
            ("n1", node_alloc("3", "3G", 10)),
            ("n2", node_alloc("4", "4G", 10)),
        ],
        queues: vec![queue("q1", 1, Some(resources("6", "6G")))],
        groups: vec![
            prio_group("pg1", 0, LOW),
            prio_group("pg2", 1, HIGH),
            prio_group("pg3", 0, LOW),
        ],
        pods: vec![
            one_g("preemptee1", "n1", true, "pg1"),
            pod("preemptee2", "n2", true, resources("4", "4G"), "pg3"),
            pod("preemptor1", "", false, resources("3", "3G"), "pg2"),
        ],
        ..Table::default()
    };
    assert_eq!(evicted(&t.run(&conf(), &[&Preempt])), set(&["preemptee2"]));
}

#[test]
fn multi_queue_preemptor_tasks_must_not_be_overwritten_by_intra_job_preemption_of_another_queue() {
    let mut pg3 = prio_group("pg3", 1, HIGH);
    pg3.queue = "q2";
    let mut pg2 = prio_group("pg2", 0, LOW);
    pg2.queue = "q2";
    let t = Table {
        nodes: vec![("n1", node_alloc("2", "2G", 10))],
        queues: vec![
            queue("q1", 1, None),
            queue("q2", 1, Some(resources("4", "4G"))),
        ],
        groups: vec![group("pg1", "q1", 1, GangPhase::Inqueue), pg2, pg3],
        pods: vec![
            one_g("q1-runner1", "n1", true, "pg1"),
            one_g("q2-preemptee1", "n1", true, "pg2"),
            one_g("q2-preemptor1", "", false, "pg3"),
        ],
        ..Table::default()
    };
    assert_eq!(
        evicted(&t.run(&conf(), &[&Preempt])),
        set(&["q2-preemptee1"])
    );
}
