//! Gangs with `spec.networkTopology` through planning sessions, on two leaf
//! switches (`s0`: node-0..3, `s1`: node-4..7, two whole GPUs per node) under one
//! spine (`s2`, tier 2).

use crate::gang::plan::plan;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::conf_fixture::priority_gang_then;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{gpu_nodes, gpu_task, job, placed_state, running_task};
use crate::volcano::framework::{GangKey, JobInfo, SessionOutcome};
use crate::volcano::objects::QueueSpec;
use crate::volcano::topology::{
    HighestTier, HyperNode, NetworkTopology, TopologyConstraint, TopologyMode,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Enqueue and allocate, the predicates deciding where.
fn allocate_conf() -> String {
    priority_gang_then("enqueue, allocate", &[("predicates", &[])])
}

/// [`allocate_conf`] with network-topology-aware scoring HyperNodes.
fn with_plugin_conf() -> String {
    priority_gang_then(
        "enqueue, allocate",
        &[
            ("predicates", &[]),
            ("network-topology-aware", &[("weight", "10")]),
        ],
    )
}

fn hyper_node(name: &str, tier: u32, members: serde_json::Value) -> HyperNode {
    HyperNode::from_json(&json!({"metadata": {"name": name},
        "spec": {"tier": tier, "members": members}}))
    .expect("hyper node")
}

fn leaf(name: &str, pattern: &str) -> HyperNode {
    hyper_node(
        name,
        1,
        json!([{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]),
    )
}

/// The two-tier topology; without the spine when `spine` is false.
fn topology(spine: bool) -> Vec<HyperNode> {
    let mut h = vec![leaf("s0", "^node-[0-3]$"), leaf("s1", "^node-[4-7]$")];
    if spine {
        h.push(hyper_node(
            "s2",
            2,
            json!([
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}}
            ]),
        ));
    }
    h
}

fn key(name: &str) -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: name.into(),
        single: false,
    }
}

fn constraint(mode: TopologyMode, tier: u32) -> Option<TopologyConstraint> {
    Some(TopologyConstraint {
        mode,
        highest_tier: HighestTier::Number(tier),
    })
}

/// A gang of `n` one-GPU members, `min` of them needed together.
fn gang(name: &str, n: u32, min: usize, topology: Option<TopologyConstraint>) -> JobInfo {
    let k = key(name);
    let tasks = (0..n)
        .map(|i| gpu_task(&k, &format!("{name}-{i}"), 1))
        .collect();
    let mut j = job(name, "default", min, tasks);
    j.network_topology = topology;
    j
}

/// A job holding the GPUs given as (node, gpu).
fn holding(name: &str, gpus: &[(usize, u32)]) -> JobInfo {
    let k = key(name);
    let tasks = gpus
        .iter()
        .enumerate()
        .map(|(i, (node, g))| running_task(&k, &format!("{name}-{i}"), *node, *g))
        .collect();
    job(name, "default", gpus.len(), tasks)
}

fn run(conf: &str, hyper: &[HyperNode], jobs: Vec<JobInfo>) -> SessionOutcome {
    let conf = SchedulerConf::parse(conf).expect("conf");
    let mut state = placed_state(
        gpu_nodes(8, 2, 1),
        vec![QueueInfo::idle(QueueSpec::new("default"))],
        jobs,
    );
    let unlabelled = BTreeMap::new();
    let names: Vec<String> = state.nodes.iter().map(|n| n.name.clone()).collect();
    state.topology = Arc::new(NetworkTopology::resolve(
        hyper,
        names.iter().map(|n| (n.as_str(), &unlabelled)),
    ));
    plan(state, &conf)
}

/// The nodes a job's members were placed on.
fn nodes_of(o: &SessionOutcome, name: &str) -> BTreeSet<String> {
    o.commits
        .iter()
        .filter(|c| c.gang == key(name))
        .flat_map(|c| &c.members)
        .filter_map(|m| m.placement.as_ref().map(|p| p.node.clone()))
        .collect()
}

fn placed_count(o: &SessionOutcome, name: &str) -> usize {
    o.commits
        .iter()
        .filter(|c| c.gang == key(name))
        .map(|c| c.members.len())
        .sum()
}

fn message(o: &SessionOutcome, name: &str) -> String {
    o.verdicts[&key(name)].message.clone().unwrap_or_default()
}

fn in_one_leaf(nodes: &BTreeSet<String>) -> bool {
    let leaf = |n: &String| {
        n.trim_start_matches("node-")
            .parse::<usize>()
            .ok()
            .map(|i| i / 4)
    };
    let leaves: BTreeSet<_> = nodes.iter().map(leaf).collect();
    leaves.len() == 1
}

#[test]
fn a_gang_of_eight_lands_inside_one_tier_one_hyper_node() {
    let o = run(
        &allocate_conf(),
        &topology(true),
        vec![gang("train", 8, 8, constraint(TopologyMode::Hard, 1))],
    );
    let nodes = nodes_of(&o, "train");
    assert_eq!(placed_count(&o, "train"), 8);
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    assert!(in_one_leaf(&nodes), "{nodes:?}");
}

#[test]
fn a_hard_gang_no_leaf_can_hold_waits_naming_the_topology() {
    // s0 keeps 6 GPUs free, s1 keeps 7: together 13, but no leaf has 8.
    let busy = holding("busy", &[(0, 0), (1, 0), (4, 0)]);
    let o = run(
        &allocate_conf(),
        &topology(true),
        vec![busy, gang("train", 8, 8, constraint(TopologyMode::Hard, 1))],
    );
    assert_eq!(placed_count(&o, "train"), 0);
    let m = message(&o, "train");
    assert!(
        m.contains("networkTopology hard, highestTierAllowed 1"),
        "{m}"
    );
    assert!(
        m.contains("s1: 7 of minMember 8; s0: 6 of minMember 8"),
        "{m}"
    );
}

#[test]
fn a_higher_allowed_tier_lets_the_gang_span_the_spine() {
    let busy = holding("busy", &[(0, 0), (1, 0), (4, 0)]);
    let o = run(
        &allocate_conf(),
        &topology(true),
        vec![busy, gang("train", 8, 8, constraint(TopologyMode::Hard, 2))],
    );
    assert_eq!(placed_count(&o, "train"), 8);
    assert!(!in_one_leaf(&nodes_of(&o, "train")));
}

/// Without a spine the two leaves meet only at the cluster-wide root, which
/// Volcano puts one tier above them (tier 2): a hard gang allowed tier 2 spans
/// both leaves, one allowed tier 1 never does.
#[test]
fn without_a_spine_the_leaves_meet_at_the_cluster_root_one_tier_up() {
    let busy = || holding("busy", &[(0, 0), (1, 0), (4, 0)]);
    let o = run(
        &allocate_conf(),
        &topology(false),
        vec![
            busy(),
            gang("train", 8, 8, constraint(TopologyMode::Hard, 2)),
        ],
    );
    assert_eq!(placed_count(&o, "train"), 8);
    assert!(!in_one_leaf(&nodes_of(&o, "train")));
    let o = run(
        &allocate_conf(),
        &topology(false),
        vec![
            busy(),
            gang("train", 8, 8, constraint(TopologyMode::Hard, 1)),
        ],
    );
    assert_eq!(placed_count(&o, "train"), 0);
    assert!(message(&o, "train").contains("no HyperNode of tier 1 or lower"));
}

#[test]
fn a_soft_gang_prefers_a_leaf_and_goes_anywhere_when_none_holds_it() {
    let o = run(
        &allocate_conf(),
        &topology(false),
        vec![gang("fits", 4, 4, constraint(TopologyMode::Soft, 1))],
    );
    assert!(in_one_leaf(&nodes_of(&o, "fits")));

    let busy = holding("busy", &[(0, 0), (1, 0), (4, 0)]);
    let o = run(
        &allocate_conf(),
        &topology(false),
        vec![
            busy,
            gang("spills", 8, 8, constraint(TopologyMode::Soft, 1)),
        ],
    );
    assert_eq!(placed_count(&o, "spills"), 8);
}

/// Volcano makes a soft constraint hard at its cluster-wide root, whatever tier
/// it names: an unknown tier name leaves a soft gang's preference for one
/// HyperNode intact. The empty nodes (node-3, node-5..7) are in both leaves.
#[test]
fn a_soft_gang_naming_an_unknown_tier_still_prefers_a_leaf() {
    let soft_named = Some(TopologyConstraint {
        mode: TopologyMode::Soft,
        highest_tier: HighestTier::Named("rack".into()),
    });
    let busy = holding("busy", &[(0, 0), (1, 0), (2, 0), (4, 0)]);
    let o = run(
        &allocate_conf(),
        &topology(false),
        vec![busy, gang("fits", 4, 4, soft_named)],
    );
    assert_eq!(placed_count(&o, "fits"), 4);
    assert!(in_one_leaf(&nodes_of(&o, "fits")));
}

#[test]
fn a_hard_gang_is_placed_anywhere_when_no_hyper_node_exists() {
    // Volcano's cluster-wide root is then tier 1 and holds every node, so any
    // allowed tier reaches it: the gang is placed as one without the constraint.
    let o = run(
        &allocate_conf(),
        &[],
        vec![gang("train", 2, 2, constraint(TopologyMode::Hard, 1))],
    );
    assert_eq!(placed_count(&o, "train"), 2);
    let o = run(&allocate_conf(), &[], vec![gang("free", 2, 2, None)]);
    assert_eq!(placed_count(&o, "free"), 2);
    // Tier 0 is below even that root: nothing can hold the gang.
    let o = run(
        &allocate_conf(),
        &[],
        vec![gang("flat", 2, 2, constraint(TopologyMode::Hard, 0))],
    );
    assert_eq!(placed_count(&o, "flat"), 0);
    assert!(message(&o, "flat").contains("no HyperNode exists"));
}

#[test]
fn binpack_fills_the_fuller_leaf_first() {
    let busy = holding("busy", &[(5, 0)]);
    let o = run(
        &allocate_conf(),
        &topology(true),
        vec![busy, gang("train", 4, 4, constraint(TopologyMode::Hard, 1))],
    );
    let nodes = nodes_of(&o, "train");
    assert!(nodes.iter().all(|n| n.as_str() >= "node-4"), "{nodes:?}");
}

/// An elastic gang with members on `s1` grows: with a spine allowed, the node
/// order alone would pick `s0`, where another job already fills a GPU; the plugin
/// keeps it next to its members.
#[test]
fn the_plugin_keeps_a_growing_gang_next_to_its_members() {
    let jobs = || {
        let k = key("elastic");
        let mut tasks = vec![running_task(&k, "elastic-0", 6, 0)];
        tasks.push(gpu_task(&k, "elastic-1", 1));
        let mut j = job("elastic", "default", 1, tasks);
        j.network_topology = constraint(TopologyMode::Hard, 2);
        vec![holding("busy", &[(0, 0), (0, 1), (1, 0)]), j]
    };
    let without = run(&allocate_conf(), &topology(true), jobs());
    assert_eq!(
        nodes_of(&without, "elastic"),
        BTreeSet::from(["node-1".to_string()])
    );
    let with = run(&with_plugin_conf(), &topology(true), jobs());
    assert_eq!(
        nodes_of(&with, "elastic"),
        BTreeSet::from(["node-6".to_string()])
    );
}

/// With members placed on `s1` and only the leaf tier allowed, growing into `s0`
/// would span the spine: the new member waits for room on `s1`.
#[test]
fn a_growing_hard_gang_stays_in_its_leaf() {
    let k = key("elastic");
    let mut tasks: Vec<_> = (0..4)
        .map(|i| running_task(&k, &format!("elastic-{i}"), 4 + i, 0))
        .collect();
    tasks.extend((4..9).map(|i| gpu_task(&k, &format!("elastic-{i}"), 1)));
    let mut j = job("elastic", "default", 4, tasks);
    j.network_topology = constraint(TopologyMode::Hard, 1);
    let o = run(&allocate_conf(), &topology(true), vec![j]);
    let nodes = nodes_of(&o, "elastic");
    assert_eq!(placed_count(&o, "elastic"), 4, "{nodes:?}");
    assert!(nodes.iter().all(|n| n.as_str() >= "node-4"), "{nodes:?}");
}

/// A `highestTierName` no HyperNode carries names no tier: Volcano cannot turn
/// it into `highestTierAllowed` and schedules the gang as one without the
/// constraint, preemption included. Every GPU is held by a job of lower
/// priority; the gang of two evicts two of its members.
#[test]
fn a_gang_naming_an_unknown_tier_preempts_as_an_unconstrained_one() {
    let preempt = allocate_conf().replacen("allocate", "allocate, preempt", 1);
    let every_gpu: Vec<(usize, u32)> = (0..8).flat_map(|n| [(n, 0), (n, 1)]).collect();
    let mut busy = holding("busy", &every_gpu);
    busy.min_member = 1;
    let mut train = gang(
        "train",
        2,
        2,
        Some(TopologyConstraint {
            mode: TopologyMode::Hard,
            highest_tier: HighestTier::Named("rack".into()),
        }),
    );
    train.priority = 100;
    let o = run(&preempt, &topology(true), vec![busy, train]);
    assert_eq!(o.evictions().count(), 2, "{o:?}");
}

/// Preemption for a hard gang allowed the tier of the cluster-wide root (two
/// leaves without a spine meet there, at tier 2): a gang of ten, more than a
/// leaf's eight GPUs, evicts across both leaves; allowed only tier 1, nobody.
#[test]
fn preemption_spans_parentless_leaves_when_the_gang_reaches_the_cluster_root() {
    let preempt = allocate_conf().replacen("allocate", "allocate, preempt", 1);
    let evictions_for = |tier: u32| {
        let every_gpu: Vec<(usize, u32)> = (0..8).flat_map(|n| [(n, 0), (n, 1)]).collect();
        let mut busy = holding("busy", &every_gpu);
        busy.min_member = 1;
        let mut train = gang("train", 10, 10, constraint(TopologyMode::Hard, tier));
        train.priority = 100;
        let o = run(&preempt, &topology(false), vec![busy, train]);
        o.evictions().count()
    };
    assert_eq!(evictions_for(2), 10);
    assert_eq!(evictions_for(1), 0);
}
