//! Tasks kept between cycles: a cycle builds the tasks of the members that changed
//! and keeps the others, and what it decides is what a session built anew decides.

use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::{Cluster, member};
use k8s_openapi::api::core::v1::Pod;

/// Tasks built so far by the cluster's planner.
fn built(c: &Cluster) -> u64 {
    c.s.metrics().planner_tasks_built.get()
}

/// `pod` with one label changed: a new version of the pod that changes nothing the
/// planner reads.
fn relabelled(mut pod: Pod, round: u32) -> Pod {
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert("round".into(), round.to_string());
    pod
}

/// `pod` asking for `gpus` whole GPUs.
fn asking_gpus(mut pod: Pod, gpus: u32) -> Pod {
    if let Some(limits) = pod
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
        .and_then(|c| c.resources.as_mut())
        .and_then(|r| r.limits.as_mut())
    {
        limits.insert(
            "nvidia.com/gpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity(gpus.to_string()),
        );
    }
    pod
}

#[tokio::test]
async fn a_cycle_builds_only_the_tasks_of_members_that_changed() {
    // One whole card; two gangs that each need more: both wait, every cycle.
    let c = Cluster::new(&[("n1", 1)], GangConfig::default());
    c.gang("a", 3, "default", "a", 3);
    c.gang("b", 2, "default", "b", 2);
    c.s.run_gang_cycle().await;
    assert_eq!(built(&c), 5, "the first cycle builds every member's task");
    let waiting_a = c.verdict("ml/a");
    let waiting_b = c.verdict("ml/b");

    c.s.run_gang_cycle().await;
    assert_eq!(built(&c), 5, "nothing changed: nothing is built again");

    let pod = c.pod("b1").await.expect("b1");
    c.add(&relabelled(pod, 1));
    c.s.run_gang_cycle().await;
    assert_eq!(
        built(&c),
        6,
        "only the changed member's task is built again"
    );
    assert_eq!(c.verdict("ml/a").message, waiting_a.message);
    assert_eq!(c.verdict("ml/b").message, waiting_b.message);
}

#[tokio::test]
async fn a_member_whose_pod_changed_is_planned_on_its_new_request() {
    // Two cards for a pair whose members ask two each: it waits, until its
    // members ask one each.
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.s.apply_podgroup(&crate::scheduler::gang_tests::podgroup(
        "pair",
        2,
        "default",
        serde_json::json!({}),
    ));
    for i in 0..2 {
        c.add(&asking_gpus(member(&format!("p{i}"), "pair", i), 2));
    }
    assert_eq!(
        c.s.run_gang_cycle().await,
        0,
        "four cards do not fit on two"
    );
    for i in 0..2 {
        let pod = c.pod(&format!("p{i}")).await.expect("member");
        c.add(&asking_gpus(pod, 1));
    }
    assert_eq!(
        c.s.run_gang_cycle().await,
        1,
        "two cards fit: the pair is placed"
    );
}

/// Jobs the cluster's planner skipped so far.
fn skipped(c: &Cluster) -> u64 {
    c.s.metrics().planner_jobs_skipped.get()
}

#[tokio::test]
async fn a_blocked_gang_is_tried_again_only_once_room_is_freed() {
    // Two whole cards, both taken by a pair; a trio waits for three.
    let c = Cluster::new(&[("n1", 2), ("n2", 1)], GangConfig::default());
    c.gang("pair", 2, "default", "p", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1, "the pair is placed");
    c.gang("trio", 3, "default", "t", 3);
    assert_eq!(
        c.s.run_gang_cycle().await,
        0,
        "one card left: the trio waits"
    );
    let waiting = c.verdict("ml/trio");
    assert_eq!(skipped(&c), 0);

    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(
        skipped(&c),
        1,
        "nothing changed: the trio is not tried again"
    );
    assert_eq!(c.verdict("ml/trio").message, waiting.message);
    assert_eq!(c.verdict("ml/trio").phase, waiting.phase);

    // A member of the pair leaves: its card is free, and the trio fits.
    c.s.forget_pod("uid-p0");
    c.s.forget_pod("uid-p1");
    assert_eq!(
        c.s.run_gang_cycle().await,
        1,
        "room was freed: the trio is placed"
    );
    assert_eq!(skipped(&c), 1);
}
