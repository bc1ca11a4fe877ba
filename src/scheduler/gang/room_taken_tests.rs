//! Room taken on a node can let a blocked gang in when allocate fills it member
//! by member and an earlier member's node decides where the later ones may go:
//! once the node an earlier member went to is fuller, it goes elsewhere, where
//! the whole gang fits. A scheduler keeping queueing hints places such a gang in
//! the cycle after the room was taken, as one whose sessions are built anew.

use super::queueing_hints_tests::{
    Bearing, Case, Change, Pair, Shape, asking, decisions, foreign_slice, mistyped, same_decisions,
    sized_member,
};
use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::{Cluster, member, podgroup};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// The nodes a side's ledger holds the members of gang `group` on, by member.
fn nodes_of(pair: &Pair, group: &str) -> Vec<(String, String)> {
    let (held, _) = decisions(&pair.incremental);
    held.into_iter()
        .filter(|(uid, _)| uid.starts_with(&format!("uid-{group}m")))
        .map(|(uid, (node, _))| (uid, node))
        .collect()
}

/// The node a member asking no GPU was pinned to when its gate was lifted.
fn pinned_node(pod: &Pod) -> Option<&str> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name")
        .and_then(|f| f.values.as_ref()?.first())
        .map(String::as_str)
}

/// Two sides over nodes of `gpus` whole cards each, every node's first card
/// held by a pod of HAMi's scheduler.
fn pair_with_foreign_slices(gpus: &[usize]) -> Pair {
    let pair = Pair::new(gpus, 1, false);
    for c in pair.both() {
        for n in 0..gpus.len() {
            c.s.apply_pod(&foreign_slice(&format!("n{n}"), "Pending"));
        }
    }
    pair
}

/// Another scheduler takes the first free card of the `node`th node; in the
/// cycle after, both sides place gang g0's two members on `nodes`.
async fn card_taken_then_placed(pair: &Pair, node: usize, nodes: [&str; 2]) {
    let mut arrived = 0;
    pair.apply(&Change::ForeignSliceStarts(node), &mut arrived, &[], 1)
        .await;
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (1, 1), "the gang placed on both sides");
    let placed: Vec<(String, String)> = ["uid-g0m0", "uid-g0m1"]
        .into_iter()
        .zip(nodes)
        .map(|(uid, node)| (uid.to_string(), node.to_string()))
        .collect();
    assert_eq!(nodes_of(pair, "g0"), placed);
    assert_eq!(decisions(&pair.incremental), decisions(&pair.scratch));
}

#[tokio::test]
async fn a_gang_following_its_own_members_is_placed_once_its_first_members_node_fills_up() {
    // n0 has one free card, n1 three. Binpack sends the first member to n0, the
    // fuller node; the second must follow it there and finds no card.
    let pair = pair_with_foreign_slices(&[2, 4]);
    pair.arrive(
        0,
        (2, 0, 0, 80_000, 0, Bearing::Follows(0, 0), Shape::Alike),
        1,
    );
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (0, 0), "the gang cannot follow its first member");
    assert!(nodes_of(&pair, "g0").is_empty());

    // Another scheduler takes n0's last card: only room was taken, and the first
    // member now goes to n1, where the second finds room too.
    card_taken_then_placed(&pair, 0, ["n1", "n1"]).await;
}

#[test]
fn a_gang_of_three_following_each_other_by_hostname_decides_as_sessions_built_anew() {
    // The same, with three members and the room taken cycles later.
    let case = Case {
        nodes: vec![3, 5],
        queues: 1,
        evictions: false,
        workload: vec![(3, 0, 0, 40_000, 0, Bearing::Follows(0, 0), Shape::Alike)],
        initial: 1,
        changes: vec![
            Change::Tick,
            Change::ForeignSliceStarts(0),
            Change::ForeignSliceStarts(0),
            Change::Tick,
        ],
    };
    same_decisions(&case).expect("same decisions");
}

/// Nodes n0 (a free card, 64 cores) and n1 (no free card), and gang g0 of a
/// master asking 40 cores and no GPU and a worker asking a card and 30 cores.
fn master_and_worker_on_unequal_nodes() -> Pair {
    let pair = pair_with_foreign_slices(&[2, 1]);
    for c in pair.both() {
        c.s.apply_podgroup(&podgroup("g0", 2, "q0", json!({})));
        c.add(&asking(member("g0m0", "g0", 0), 40, false));
        c.add(&asking(member("g0m1", "g0", 0), 30, true));
    }
    pair
}

/// Gang g0 of `pair` (see [`master_and_worker_on_unequal_nodes`]) waits: the
/// worker finds no room next to the master. Once another scheduler's pod takes
/// 30 of n0's cores the master no longer fits there and goes to n1, and the
/// worker fits on n0: both sides place the gang in the cycle after.
async fn placed_once_cpu_taken_moves_the_master(pair: &Pair) {
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!(
        (a, b),
        (0, 0),
        "the worker finds no room next to the master"
    );
    let mut arrived = 0;
    pair.apply(&Change::PlainPod(0, 30), &mut arrived, &[], 1)
        .await;
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (1, 1), "the gang placed on both sides");
    assert_eq!(
        nodes_of(pair, "g0"),
        vec![("uid-g0m1".to_string(), "n0".to_string())],
        "the worker holds n0's card"
    );
    let master = pair.incremental.pod("g0m0").await.expect("the master");
    assert_eq!(pinned_node(&master), Some("n1"), "the master pinned to n1");
    assert_eq!(decisions(&pair.incremental), decisions(&pair.scratch));
}

#[tokio::test]
async fn a_gang_of_unlike_members_is_placed_once_cpu_taken_moves_its_first_member() {
    // n0 has a free card and 64 cores, n1 no free card. The CPU-only master goes
    // to n0 (the nodes tie; the smaller name wins) and leaves 24 cores: too few
    // for the worker, whose only card is there.
    placed_once_cpu_taken_moves_the_master(&master_and_worker_on_unequal_nodes()).await;
}

#[tokio::test]
async fn a_gang_with_a_member_no_node_can_hold_beyond_its_minimum_is_placed_once_cpu_taken_moves_its_first_member()
 {
    // As above, with a third member asking for a GPU type no node has: the
    // master and the worker make the minimum without it, so room taken may
    // still let the gang in.
    let pair = master_and_worker_on_unequal_nodes();
    for c in pair.both() {
        c.add(&mistyped(asking(member("g0m2", "g0", 0), 30, true)));
    }
    placed_once_cpu_taken_moves_the_master(&pair).await;
}

/// A CPU-only pod of gang `group` asking `cores` cores at priority 1000, kept
/// off every node by a node selector no node matches while `kept_off`.
fn urgent_cpu_pod(name: &str, group: &str, cores: u32, kept_off: bool) -> Pod {
    let mut pod = asking(member(name, group, 1), cores, false);
    if let Some(spec) = pod.spec.as_mut() {
        spec.priority = Some(1000);
        spec.node_selector = kept_off.then(|| [("zone".to_string(), "none".to_string())].into());
    }
    pod
}

#[tokio::test]
async fn a_gang_of_unlike_members_is_placed_once_a_job_tried_before_it_takes_the_cores() {
    // As above, but the cores on n0 are taken in the same session, by a job of
    // higher priority whose own change let it in: no node changed before the
    // cycle, and the queue asks for what it asked.
    let pair = master_and_worker_on_unequal_nodes();
    for c in pair.both() {
        c.s.apply_podgroup(&podgroup("g1", 1, "q0", json!({})));
        c.add(&urgent_cpu_pod("g1m0", "g1", 30, true));
    }
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (0, 0), "neither gang fits");

    for c in pair.both() {
        c.add(&urgent_cpu_pod("g1m0", "g1", 30, false));
    }
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (2, 2), "both gangs placed on both sides");
    for (name, node) in [("g1m0", "n0"), ("g0m0", "n1")] {
        let pod = pair.incremental.pod(name).await.expect("the pod");
        assert_eq!(pinned_node(&pod), Some(node), "{name} pinned");
    }
    assert_eq!(
        nodes_of(&pair, "g0"),
        vec![("uid-g0m1".to_string(), "n0".to_string())]
    );
    assert_eq!(decisions(&pair.incremental), decisions(&pair.scratch));
}

#[tokio::test]
async fn a_blocked_gang_of_alike_members_stays_skipped_once_another_gang_took_room() {
    // Three cards; a pair takes two. A trio of alike one-card members waits, and
    // so does a master and worker (the nodes offer no pod slots to a member
    // asking no GPU).
    let c = Cluster::new(&[("n1", 2), ("n2", 1)], GangConfig::default());
    let skipped = || c.s.metrics().planner_jobs_skipped.get();
    c.gang("pair", 2, "default", "p", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1, "the pair is placed");
    c.gang("trio", 3, "default", "t", 3);
    c.s.apply_podgroup(&podgroup("duo", 2, "default", json!({})));
    c.add(&asking(member("d0", "duo", 0), 40, false));
    c.add(&asking(member("d1", "duo", 1), 30, true));
    assert_eq!(c.s.run_gang_cycle().await, 0, "one card left");

    // A gang of one takes the last card: the queue asks for more, so every
    // waiting gang is tried in that cycle.
    c.gang("solo", 1, "default", "s", 1);
    assert_eq!(c.s.run_gang_cycle().await, 1, "the solo gang is placed");
    let (before, waiting) = (skipped(), c.verdict("ml/trio"));

    // The cycle after sees only room taken: the trio still cannot fit and is
    // not tried; the master and worker might now, and are.
    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(skipped() - before, 1, "only the trio is skipped");
    assert_eq!(c.verdict("ml/trio").message, waiting.message);
    assert_eq!(c.verdict("ml/trio").phase, waiting.phase);
}

#[tokio::test]
async fn a_blocked_gang_short_of_its_minimum_on_every_node_stays_skipped_once_another_gang_took_room()
 {
    // Three cards; a pair takes two. A master and a worker wait, the worker
    // asking for a GPU type no node has; so do a master and such a worker whose
    // minimum the master alone makes (the nodes offer no pod slots to a member
    // asking no GPU, so it waits for room).
    let c = Cluster::new(&[("n1", 2), ("n2", 1)], GangConfig::default());
    let skipped = || c.s.metrics().planner_jobs_skipped.get();
    c.gang("pair", 2, "default", "p", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1, "the pair is placed");
    for (group, min) in [("mistyped", 2), ("elastic", 1)] {
        c.s.apply_podgroup(&podgroup(group, min, "default", json!({})));
        c.add(&asking(member(&format!("{group}0"), group, 0), 40, false));
        c.add(&mistyped(asking(
            member(&format!("{group}1"), group, 1),
            30,
            true,
        )));
    }
    assert_eq!(c.s.run_gang_cycle().await, 0, "neither fits");
    c.gang("solo", 1, "default", "s", 1);
    assert_eq!(c.s.run_gang_cycle().await, 1, "the solo gang is placed");
    let waiting = c.verdict("ml/mistyped");

    // Only room taken since: no room lets the mistyped worker in, so the gang
    // needing it is not tried; the one its master alone makes ready is.
    let before = skipped();
    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(skipped() - before, 1, "only the gang needing the worker");
    assert_eq!(c.verdict("ml/mistyped").message, waiting.message);
}

/// A pod of another scheduler in `namespace` running on `node`, asking no GPU,
/// that keeps the pods of its namespace labelled `key: value` off its node.
fn repelling_pod(node: &str, namespace: &str, (key, value): (&str, &str)) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "repelling", "namespace": namespace, "uid": "uid-repelling"},
        "spec": {"schedulerName": "default-scheduler", "nodeName": node,
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {key: value}},
                 "topologyKey": "kubernetes.io/hostname"}]}},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("repelling pod")
}

#[tokio::test]
async fn a_gang_whose_members_differ_only_in_labels_is_tried_again_once_a_pod_may_repel_one() {
    // Three cards; a pair takes two. A trio of alike members waits, and so does
    // a trio whose members carry their index as a label.
    let c = Cluster::new(&[("n1", 2), ("n2", 1)], GangConfig::default());
    let skipped = || c.s.metrics().planner_jobs_skipped.get();
    c.gang("pair", 2, "default", "p", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1, "the pair is placed");
    c.gang("trio", 3, "default", "t", 3);
    c.s.apply_podgroup(&podgroup("indexed", 3, "default", json!({})));
    for i in 0..3 {
        let mut pod = member(&format!("i{i}"), "indexed", i);
        pod.metadata
            .labels
            .get_or_insert_default()
            .insert("index".into(), i.to_string());
        c.add(&pod);
    }
    assert_eq!(c.s.run_gang_cycle().await, 0, "one card left");
    c.gang("solo", 1, "default", "s", 1);
    assert_eq!(c.s.run_gang_cycle().await, 1, "the solo gang is placed");

    // Only room taken, and no pod anywhere repels by labels: the labels tell
    // the indexed members apart for nothing, and both trios are skipped.
    let before = skipped();
    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(skipped() - before, 2, "both trios are skipped");

    // A pod with required anti-affinity starts: labels may now keep one
    // indexed member off a node another could use, and that trio is tried.
    c.add(&repelling_pod("n2", "other", ("app", "nobody")));
    let before = skipped();
    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(skipped() - before, 1, "only the alike trio is skipped");
}

#[tokio::test]
async fn a_gang_whose_members_differ_only_in_labels_is_placed_once_room_taken_moves_its_first_member()
 {
    // n0 has one free card of two, n1 two of three; a pod on n1 keeps tier-1
    // pods off it. Binpack sends the tier-0 member to n0, the fuller node, and
    // the tier-1 member, kept off n1, finds no card.
    let pair = pair_with_foreign_slices(&[2, 3]);
    for c in pair.both() {
        c.add(&repelling_pod("n1", "ml", ("tier", "t1")));
    }
    for c in pair.both() {
        c.s.apply_podgroup(&podgroup("g0", 2, "q0", json!({})));
        for (m, tier) in [(0, 0), (1, 1)] {
            let name = format!("g0m{m}");
            c.add(&sized_member(
                &name,
                "g0",
                0,
                (80_000, 0, Bearing::Plain(tier)),
            ));
        }
    }
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (0, 0), "the tier-1 member finds no card");

    // Another scheduler takes a card on n1, now the fuller node: the tier-0
    // member goes there, and the tier-1 member takes n0's card.
    card_taken_then_placed(&pair, 1, ["n1", "n0"]).await;
}
