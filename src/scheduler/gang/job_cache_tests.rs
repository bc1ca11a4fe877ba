//! Jobs kept between cycles: a cycle assembles the jobs of gangs that changed and
//! keeps the others, and a kept job follows what it was built from.

use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::{Cluster, podgroup, queue};
use serde_json::json;

/// Jobs assembled so far by the cluster's planner.
fn built(c: &Cluster) -> u64 {
    c.s.metrics().planner_jobs_built.get()
}

#[tokio::test]
async fn a_cycle_assembles_only_the_jobs_of_gangs_that_changed() {
    // One whole card; two gangs that each need more: both wait, every cycle.
    let c = Cluster::new(&[("n1", 1)], GangConfig::default());
    c.gang("a", 3, "default", "a", 3);
    c.gang("b", 2, "default", "b", 2);
    c.s.run_gang_cycle().await;
    assert_eq!(built(&c), 2, "the first cycle assembles every job");
    // Both were admitted by enqueue in the first cycle: what they reserve of
    // their queue changed.
    c.s.run_gang_cycle().await;
    assert_eq!(built(&c), 4, "admitted jobs are assembled again");
    let waiting_a = c.verdict("ml/a");

    c.s.run_gang_cycle().await;
    assert_eq!(built(&c), 4, "nothing changed: no job is assembled again");

    let mut pod = c.pod("b1").await.expect("b1");
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert("round".into(), "1".into());
    c.add(&pod);
    c.s.run_gang_cycle().await;
    assert_eq!(
        built(&c),
        5,
        "only the changed member's job is assembled again"
    );
    assert_eq!(c.verdict("ml/a"), waiting_a);
}

/// What the queue's jobs ask for, as the last cycle's view shows it.
fn requested(c: &Cluster, name: &str) -> crate::resources::Resources {
    c.s.gang_view()
        .queues
        .iter()
        .find(|q| q.name == name)
        .map(|q| q.request.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_kept_job_follows_its_podgroup_to_another_queue() {
    let c = Cluster::new(&[("n1", 1)], GangConfig::default());
    c.s.apply_queue(&queue("other", json!({"weight": 1})));
    c.gang("a", 3, "default", "a", 3);
    c.gang("b", 2, "default", "b", 2);
    c.s.run_gang_cycle().await;
    c.s.run_gang_cycle().await;
    assert_eq!(c.verdict("ml/a").queue, "default");
    let before = built(&c);
    let both = requested(&c, "default");
    assert!(requested(&c, "other").is_empty());

    c.s.apply_podgroup(&podgroup("a", 3, "other", json!({})));
    c.s.run_gang_cycle().await;
    assert_eq!(
        c.verdict("ml/a").queue,
        "other",
        "the moved gang waits in its new queue"
    );
    assert_eq!(c.verdict("ml/b").queue, "default");
    assert_eq!(
        built(&c),
        before + 1,
        "only the moved gang's job is assembled again"
    );
    let mut after = requested(&c, "other");
    assert!(
        !after.is_empty(),
        "the queue it moved to counts what it asks"
    );
    assert_ne!(requested(&c, "default"), both, "the queue it left does not");
    after.add(&requested(&c, "default"));
    assert_eq!(after, both);
}

/// Runs cycles until one assembles no job; returns how many were assembled.
async fn settle(c: &Cluster) -> u64 {
    let before = built(c);
    loop {
        let start = built(c);
        c.s.run_gang_cycle().await;
        if built(c) == start {
            return built(c) - before;
        }
    }
}

#[tokio::test]
async fn a_placement_on_a_node_leaves_the_jobs_held_there_as_they_were() {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.gang("a", 1, "default", "a", 1);
    let first = settle(&c).await;
    assert_eq!(c.s.with_ledger(|l| l.pods().count()), 1, "a is placed");

    // b is placed on the node a holds a card of: the node's usage changes,
    // its cards do not, and neither does what a is charged.
    c.gang("b", 1, "default", "b", 1);
    let second = settle(&c).await;
    assert_eq!(c.s.with_ledger(|l| l.pods().count()), 2, "b is placed");
    assert_eq!(
        second, first,
        "b's arrival assembles b's job as a's did a's, and a's not again"
    );
}

#[tokio::test]
async fn new_cards_registered_on_a_node_charge_its_members_again() {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.gang("a", 1, "default", "a", 1);
    settle(&c).await;
    let charged = |c: &Cluster| -> Vec<String> {
        let state = c.s.gang_view();
        let mut cards: Vec<String> = state
            .queues
            .iter()
            .flat_map(|q| q.cards_allocated.keys().cloned())
            .collect();
        cards.sort();
        cards
    };
    let before = charged(&c);
    assert!(
        before.iter().any(|n| n.contains("H100")),
        "a is charged an H100: {before:?}"
    );

    let mut node = crate::scheduler::gang_tests::gpu_node("n1", 2);
    if let Some(register) = node
        .metadata
        .annotations
        .as_mut()
        .and_then(|a| a.get_mut("hami.io/node-nvidia-register"))
    {
        *register = register.replace("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB");
    }
    c.s.apply_node(&node);
    let rebuilt = settle(&c).await;
    assert_eq!(rebuilt, 1, "a's job is assembled again");
    let after = charged(&c);
    assert!(
        after.iter().any(|n| n.contains("A100")) && !after.iter().any(|n| n.contains("H100")),
        "a is charged the card now registered: {after:?}"
    );
}

#[tokio::test]
async fn an_arrival_among_running_jobs_assembles_its_own_job_only() {
    // Gangs of one spread over two nodes, as a queue of single pods runs: each
    // arrival must cost its own job, however many already run beside it.
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], GangConfig::default());
    c.gang("a", 1, "default", "a", 1);
    let first = settle(&c).await;
    for g in ["b", "c"] {
        c.gang(g, 1, "default", g, 1);
        settle(&c).await;
    }
    c.gang("d", 1, "default", "d", 1);
    let last = settle(&c).await;
    assert_eq!(
        c.s.with_ledger(|l| l.pods().count()),
        4,
        "all four are placed"
    );
    assert_eq!(
        last, first,
        "d's arrival assembles d's job as a's did a's, and no running job again"
    );

    // A departure frees room: the jobs still running are not assembled again,
    // only the emptied gang's (once as its member leaves, once as enqueue
    // takes back its admission).
    let gone = c.pod("a0").await.expect("a0");
    c.s.forget_pod(gone.metadata.uid.as_deref().unwrap_or_default());
    assert_eq!(
        settle(&c).await,
        2,
        "a departure assembles the emptied gang's job only"
    );
}
