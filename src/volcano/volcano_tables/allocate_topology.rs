//! `pkg/scheduler/actions/allocate/allocate_test.go`, the network-topology tests:
//! `TestAllocateWithNetWorkTopologies`, `TestNodeLevelScoreWithNetWorkTopologies`
//! and `TestHyperNodeBinpackWithNetWorkTopologies`: PodGroups with
//! `spec.networkTopology` over HyperNodes, with the plugins and switches of each
//! test's one tier.
//!
//! Volcano's tables give a PodGroup that has members running the HyperNode they
//! run in (its `volcano.sh/allocated-hyper-node` annotation); here that is where
//! the running members are, which is how Volcano recovers the annotation when it
//! is missing. Tables that give tiers without HyperNode objects (`0` for the
//! lowest) keep Volcano's numbers.
//!
//! Left out: `TestAllocateWithPartitionPolicyNetworkTopology`, whose PodGroups
//! split their members into sub-groups with their own network topology
//! (`spec.subGroupPolicy`, read and ignored by this scheduler).

use super::support::{GroupRow, PodRow, Table, bound, group, node_alloc, pod, queue, resources};
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::framework::GangPhase;
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::topology::{HighestTier, HyperNode, TopologyConstraint, TopologyMode};
use serde_json::json;
use std::collections::BTreeMap;

/// The one tier of `TestAllocateWithNetWorkTopologies` (and of
/// `TestHyperNodeBinpackWithNetWorkTopologies`).
const TIER: &[(&str, &[&str])] = &[
    (
        "gang",
        &["JobOrder", "JobReady", "JobPipelined", "JobStarving"],
    ),
    ("predicates", &["Predicate"]),
    (
        "network-topology-aware",
        &["NodeOrder", "HyperNodeOrder", "HyperNodeGradient"],
    ),
];

/// The one tier of `TestNodeLevelScoreWithNetWorkTopologies`: binpack too.
const BINPACK_TIER: &[(&str, &[&str])] = &[
    (
        "gang",
        &["JobOrder", "JobReady", "JobPipelined", "JobStarving"],
    ),
    ("predicates", &["Predicate"]),
    ("binpack", &["NodeOrder"]),
    (
        "network-topology-aware",
        &["NodeOrder", "HyperNodeOrder", "HyperNodeGradient"],
    ),
];

/// A HyperNode of `tier` (named `tier_name`, if any) whose members are these
/// nodes or, with `of_hyper_nodes`, these HyperNodes, by exact name.
fn hyper_node(
    name: &str,
    tier: u32,
    tier_name: Option<&str>,
    of_hyper_nodes: bool,
    members: &[&str],
) -> HyperNode {
    let kind = if of_hyper_nodes { "HyperNode" } else { "Node" };
    let members: Vec<_> = members
        .iter()
        .map(|m| json!({"type": kind, "selector": {"exactMatch": {"name": m}}}))
        .collect();
    let mut spec = json!({"tier": tier, "members": members});
    if let Some(t) = tier_name {
        spec["tierName"] = t.into();
    }
    HyperNode::from_json(&json!({"metadata": {"name": name}, "spec": spec})).expect("hyper node")
}

fn leaf(name: &str, tier: u32, tier_name: Option<&str>, nodes: &[&str]) -> HyperNode {
    hyper_node(name, tier, tier_name, false, nodes)
}

fn spine(name: &str, tier: u32, tier_name: Option<&str>, children: &[&str]) -> HyperNode {
    hyper_node(name, tier, tier_name, true, children)
}

/// s0 (s0-n1, s0-n2) and s1 (s1-n3, s1-n4) at `leaf_tier`, under s2 one tier up
/// unless `spine_too` is false; the tiers named `task-spec` and `job-spec` when
/// `named`.
fn two_leaves(leaf_tier: u32, spine_too: bool, named: bool) -> Vec<HyperNode> {
    let name = |n: &'static str| named.then_some(n);
    let mut h = vec![
        leaf(
            "s0",
            leaf_tier,
            name("volcano.sh/task-spec"),
            &["s0-n1", "s0-n2"],
        ),
        leaf(
            "s1",
            leaf_tier,
            name("volcano.sh/task-spec"),
            &["s1-n3", "s1-n4"],
        ),
    ];
    if spine_too {
        h.push(spine(
            "s2",
            leaf_tier + 1,
            name("volcano.sh/job-spec"),
            &["s0", "s1"],
        ));
    }
    h
}

/// Leaves s3..s6 (two nodes each, `sN-n1`, `sN-n2`) at tier 1; s1 over s3, s4
/// and s2 over s5, s6 at tier 2; s0 over s1, s2 at tier 3; tiers named
/// `task-spec`, `job-spec` and `hypernode-spec` when `named`.
fn three_tiers(named: bool) -> Vec<HyperNode> {
    let name = |n: &'static str| named.then_some(n);
    vec![
        spine("s0", 3, name("volcano.sh/hypernode-spec"), &["s1", "s2"]),
        spine("s1", 2, name("volcano.sh/job-spec"), &["s3", "s4"]),
        spine("s2", 2, name("volcano.sh/job-spec"), &["s5", "s6"]),
        leaf("s3", 1, name("volcano.sh/task-spec"), &["s3-n1", "s3-n2"]),
        leaf("s4", 1, name("volcano.sh/task-spec"), &["s4-n1", "s4-n2"]),
        leaf("s5", 1, name("volcano.sh/task-spec"), &["s5-n1", "s5-n2"]),
        leaf("s6", 1, name("volcano.sh/task-spec"), &["s6-n1", "s6-n2"]),
    ]
}

/// Nodes of 2 CPUs, 4Gi and 10 pods.
fn nodes(names: &[&'static str]) -> Vec<(&'static str, crate::resources::Resources)> {
    names
        .iter()
        .map(|n| (*n, node_alloc("2", "4Gi", 10)))
        .collect()
}

const FOUR_NODES: &[&str] = &["s0-n1", "s0-n2", "s1-n3", "s1-n4"];
const EIGHT_NODES: &[&str] = &[
    "s3-n1", "s3-n2", "s4-n1", "s4-n2", "s5-n1", "s5-n2", "s6-n1", "s6-n2",
];

fn hard(tier: u32) -> TopologyConstraint {
    TopologyConstraint {
        mode: TopologyMode::Hard,
        highest_tier: HighestTier::Number(tier),
    }
}

fn hard_named(name: &str) -> TopologyConstraint {
    TopologyConstraint {
        mode: TopologyMode::Hard,
        highest_tier: HighestTier::Named(name.into()),
    }
}

/// `util.BuildPodGroupWithNetWorkTopologies(name, "c1", …, "soft", 0)`.
fn soft() -> TopologyConstraint {
    TopologyConstraint {
        mode: TopologyMode::Soft,
        highest_tier: HighestTier::Number(0),
    }
}

/// pg1 in q1, Inqueue, with this minMember and constraint.
fn pg1(min_member: usize, constraint: TopologyConstraint) -> GroupRow {
    let mut g = group("pg1", "q1", min_member, GangPhase::Inqueue);
    g.network_topology = Some(constraint);
    g
}

/// A pod of pg1 asking 2 CPUs and 4G in `role`, running on `node` (or pending
/// when `""`).
fn member(name: &'static str, role: &'static str, node: &'static str) -> PodRow {
    let mut p = pod(name, node, !node.is_empty(), resources("2", "4G"), "pg1");
    p.labels = vec![("volcano.sh/task-spec", role)];
    p
}

/// p1 (master) and p2.. (workers), all pending.
fn pending_members(n: usize) -> Vec<PodRow> {
    const NAMES: [&str; 3] = ["p1", "p2", "p3"];
    NAMES
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, name)| member(name, if i == 0 { "master" } else { "worker" }, ""))
        .collect()
}

/// p1 (master) running on `a`, p2 (worker) on `b`, p3 (worker) pending.
fn rescheduled(a: &'static str, b: &'static str) -> Vec<PodRow> {
    vec![
        member("p1", "master", a),
        member("p2", "worker", b),
        member("p3", "worker", ""),
    ]
}

/// The table's cluster with queue q1.
fn table(nodes_: &[&'static str], group_: GroupRow, pods: Vec<PodRow>) -> Table {
    Table {
        nodes: nodes(nodes_),
        queues: vec![queue("q1", 1, None)],
        groups: vec![group_],
        pods,
        ..Table::default()
    }
}

/// [`bind_count`] on s0-n1, s0-n2 (in s0), s1-n3, s1-n4 (in s1) under s2.
fn on_two_leaves(group_: GroupRow, pods: Vec<PodRow>) -> usize {
    bind_count(FOUR_NODES, group_, pods, &two_leaves(1, true, false))
}

/// [`on_two_leaves`] with the tiers named `task-spec` (1) and `job-spec` (2).
fn on_named_leaves(group_: GroupRow, pods: Vec<PodRow>) -> usize {
    bind_count(FOUR_NODES, group_, pods, &two_leaves(1, true, true))
}

/// [`bind_count`] on the eight nodes of [`three_tiers`].
fn on_three_tiers(group_: GroupRow, pods: Vec<PodRow>) -> usize {
    bind_count(EIGHT_NODES, group_, pods, &three_tiers(false))
}

fn allocate(t: &Table, hyper_nodes: &[HyperNode]) -> SessionOutcome {
    t.run_in_topology(
        hyper_nodes,
        &super::support::tiers_conf("allocate", &[TIER]),
        &[&Allocate],
    )
}

/// How many pods allocate binds over the table's cluster under these
/// HyperNodes (what Volcano's `MinimalBindCheck` compares).
fn bind_count(
    nodes_: &[&'static str],
    group_: GroupRow,
    pods: Vec<PodRow>,
    hyper_nodes: &[HyperNode],
) -> usize {
    bound(&allocate(&table(nodes_, group_, pods), hyper_nodes)).len()
}

/// p1 of pg1 (minMember 1), selecting `nodeRole: master`, on s0-n1 (in s0) and
/// s1-n2 (in s1, labelled `nodeRole: master`), both HyperNodes of tier 0.
fn affinity_case(constraint: TopologyConstraint) -> SessionOutcome {
    let mut p1 = member("p1", "master", "");
    p1.node_selector = vec![("nodeRole", "master")];
    let mut t = table(&["s0-n1", "s1-n2"], pg1(1, constraint), vec![p1]);
    t.node_labels = vec![("s1-n2", "nodeRole", "master")];
    allocate(
        &t,
        &[
            leaf("s0", 0, None, &["s0-n1"]),
            leaf("s1", 0, None, &["s1-n2"]),
        ],
    )
}

#[test]
fn soft_network_topology_constrain_can_allocate_job_when_resources_are_enough() {
    assert_eq!(
        bind_count(
            FOUR_NODES,
            pg1(3, soft()),
            pending_members(3),
            &two_leaves(0, true, false)
        ),
        3
    );
}

#[test]
fn soft_network_topology_constrain_can_allocate_job_when_minavailable_lt_replicas() {
    assert_eq!(on_two_leaves(pg1(1, soft()), pending_members(2)), 2);
}

#[test]
fn soft_network_topology_constrain_two_available_hypernodes_can_allocate_job_to_nodes_with_affinity()
 {
    let o = affinity_case(soft());
    assert_eq!(
        bound(&o),
        BTreeMap::from([("c1/p1".to_string(), "s1-n2".to_string())])
    );
}

#[test]
fn soft_network_topology_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_resources_are_enough()
 {
    assert_eq!(
        on_two_leaves(pg1(2, soft()), rescheduled("s0-n1", "s0-n2")),
        1
    );
}

#[test]
fn soft_network_topology_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_resources_are_enough_and_minavailable_eq_replicas()
 {
    assert_eq!(
        on_two_leaves(pg1(3, soft()), rescheduled("s0-n1", "s0-n2")),
        1
    );
}

#[test]
fn soft_network_topology_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_cross_highest_tier_allowed_tier_and_hypernodes_info_has_three_tier()
 {
    assert_eq!(
        on_three_tiers(pg1(2, soft()), rescheduled("s3-n1", "s3-n2")),
        1
    );
}

#[test]
fn hard_network_topology_constrain_can_not_allocate_job_when_cross_highest_tier_allowed_tier() {
    assert_eq!(on_two_leaves(pg1(3, hard(1)), pending_members(3)), 0);
}

#[test]
fn hard_network_topology_constrain_can_allocate_job_when_highest_tier_allowed_not_reached() {
    assert_eq!(on_two_leaves(pg1(3, hard(2)), pending_members(3)), 3);
}

#[test]
fn hard_network_topology_constrain_can_allocate_job_when_multi_hypernodes_are_available() {
    assert_eq!(on_two_leaves(pg1(2, hard(1)), pending_members(2)), 2);
}

#[test]
fn hard_network_topology_constrain_can_allocate_job_when_minavailable_lt_replicas() {
    assert_eq!(on_two_leaves(pg1(1, hard(1)), pending_members(2)), 2);
}

#[test]
fn hard_network_topology_constrain_two_available_hypernodes_can_allocate_job_to_nodes_with_affinity()
 {
    let o = affinity_case(hard(1));
    assert_eq!(
        bound(&o),
        BTreeMap::from([("c1/p1".to_string(), "s1-n2".to_string())])
    );
}

#[test]
fn hard_network_topology_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_highest_tier_allowed_not_reached()
 {
    assert_eq!(
        on_two_leaves(pg1(2, hard(2)), rescheduled("s0-n1", "s0-n2")),
        1
    );
}

#[test]
fn hard_network_topology_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_highest_tier_allowed_not_reached_and_minavailable_eq_replicas()
 {
    assert_eq!(
        on_two_leaves(pg1(3, hard(2)), rescheduled("s0-n1", "s0-n2")),
        1
    );
}

#[test]
fn hard_network_topology_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_highest_tier_allowed_not_reached_and_hypernodes_info_has_three_tier()
 {
    assert_eq!(
        on_three_tiers(pg1(2, hard(2)), rescheduled("s3-n1", "s3-n2")),
        1
    );
}

#[test]
fn hard_network_topology_constrain_and_tasks_in_job_rescheduled_can_not_allocate_job_when_cross_highest_tier_allowed_tier()
 {
    assert_eq!(
        on_two_leaves(pg1(2, hard(1)), rescheduled("s0-n1", "s0-n2")),
        0
    );
}

#[test]
fn hard_network_topology_constrain_and_tasks_in_job_rescheduled_can_not_allocate_job_when_cross_highest_tier_allowed_tier_and_hypernodes_info_has_three_tier()
 {
    assert_eq!(
        on_three_tiers(pg1(2, hard(1)), rescheduled("s3-n1", "s3-n2")),
        0
    );
}

#[test]
fn hard_network_topology_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_lca_hypernode_is_empty()
 {
    assert_eq!(
        bind_count(
            FOUR_NODES,
            pg1(2, hard(2)),
            rescheduled("s0-n1", "s0-n2"),
            &two_leaves(1, false, false)
        ),
        1
    );
}

#[test]
fn hard_network_topology_constrain_can_not_allocate_job_when_cross_highest_tier_name_tier() {
    assert_eq!(
        on_named_leaves(
            pg1(3, hard_named("volcano.sh/task-spec")),
            pending_members(3)
        ),
        0
    );
}

#[test]
fn hard_network_topology_constrain_can_allocate_job_when_the_tier_corresponding_to_highest_tier_name_not_reached()
 {
    assert_eq!(
        on_named_leaves(
            pg1(3, hard_named("volcano.sh/job-spec")),
            pending_members(3)
        ),
        3
    );
}

#[test]
fn hard_network_topology_constrain_can_allocate_job_when_multi_hypernodes_are_available_by_highest_tier_name()
 {
    assert_eq!(
        on_named_leaves(
            pg1(2, hard_named("volcano.sh/task-spec")),
            pending_members(2)
        ),
        2
    );
}

#[test]
fn hard_network_topology_constrain_and_task_in_job_rescheduled_can_allocate_job_when_the_tier_corresponding_to_highest_tier_name_not_reached()
 {
    assert_eq!(
        on_named_leaves(
            pg1(2, hard_named("volcano.sh/job-spec")),
            rescheduled("s0-n1", "s0-n2")
        ),
        1
    );
}

#[test]
fn hard_network_topology_constrain_and_task_in_job_rescheduled_can_allocate_job_when_the_tier_corresponding_to_highest_tier_name_not_reached_and_minavailable_eq_replicas()
 {
    assert_eq!(
        on_named_leaves(
            pg1(3, hard_named("volcano.sh/job-spec")),
            rescheduled("s0-n1", "s0-n2")
        ),
        1
    );
}

/// Volcano's table runs p1 and p2 on s0-n1 and s0-n2, nodes the cluster does
/// not have (its PodGroup records HyperNode s3 as theirs).
#[test]
fn hard_network_topology_constrain_and_task_in_job_rescheduled_can_allocate_job_when_the_tier_corresponding_to_highest_tier_name_not_reached_and_hypernodes_info_has_three_tier()
 {
    assert_eq!(
        bind_count(
            EIGHT_NODES,
            pg1(2, hard_named("volcano.sh/job-spec")),
            rescheduled("s0-n1", "s0-n2"),
            &three_tiers(true)
        ),
        1
    );
}

#[test]
fn hard_network_topology_constrain_and_tasks_in_job_rescheduled_can_not_allocate_job_when_cross_the_tier_corresponding_to_highest_tier_name()
 {
    assert_eq!(
        bind_count(
            FOUR_NODES,
            pg1(2, hard_named("volcano.sh/task-spec")),
            rescheduled("s0-n1", "s0-n2"),
            &two_leaves(1, true, true)
        ),
        0
    );
}

#[test]
fn hard_network_topology_with_highest_tier_name_constrain_and_tasks_in_job_rescheduled_can_allocate_job_when_here_is_no_corresponding_highest_tier_allowed_for_highest_tier_name()
 {
    assert_eq!(
        bind_count(
            FOUR_NODES,
            pg1(2, hard_named("volcano.sh/hypercluster")),
            rescheduled("s0-n1", "s0-n2"),
            &two_leaves(1, false, true)
        ),
        1
    );
}

/// `TestNodeLevelScoreWithNetWorkTopologies`.
#[test]
fn hard_network_topology_constrain_allocate_job_to_highest_score_hypenode_with_node_level_binpack()
{
    let mut p2 = member("p2", "worker", "");
    p2.request = resources("4", "8Gi");
    let mut p4 = member("p4", "worker", "s0-n2");
    p4.request = resources("4", "8Gi");
    let mut p1 = member("p1", "master", "");
    p1.request = resources("2", "4Gi");
    let mut p3 = member("p3", "master", "s0-n1");
    p3.request = resources("2", "4Gi");
    p3.group = "pg2";
    p4.group = "pg2";
    let pg2 = group("pg2", "q1", 2, GangPhase::Running);
    let t = Table {
        nodes: vec![
            ("s0-n1", node_alloc("4", "8Gi", 10)),
            ("s0-n2", node_alloc("8", "16Gi", 10)),
            ("s1-n3", node_alloc("4", "8Gi", 10)),
            ("s1-n4", node_alloc("8", "16Gi", 10)),
        ],
        queues: vec![queue("q1", 1, None)],
        groups: vec![pg1(2, hard(1)), pg2],
        pods: vec![p1, p2, p3, p4],
        ..Table::default()
    };
    let o = t.run_in_topology(
        &two_leaves(1, true, false),
        &super::support::tiers_conf("allocate", &[BINPACK_TIER]),
        &[&Allocate],
    );
    assert_eq!(
        bound(&o),
        BTreeMap::from([
            ("c1/p1".to_string(), "s0-n1".to_string()),
            ("c1/p2".to_string(), "s0-n2".to_string()),
        ])
    );
}

/// `TestHyperNodeBinpackWithNetWorkTopologies`: four pods that each fill a
/// node, three leaves of two nodes under one spine; two leaves get two pods
/// each.
#[test]
fn hard_network_topology_constrain_allocate_task_to_node_under_lca_hypernode() {
    let pods = ["p1", "p2", "p3", "p4"]
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let mut p = member(name, if i == 0 { "master" } else { "worker" }, "");
            p.request = resources("4", "8Gi");
            p
        })
        .collect();
    let t = Table {
        nodes: ["s0-n1", "s0-n2", "s1-n3", "s1-n4", "s2-n5", "s2-n6"]
            .into_iter()
            .map(|n| (n, node_alloc("4", "8Gi", 10)))
            .collect(),
        queues: vec![queue("q1", 1, None)],
        groups: vec![pg1(4, hard(2))],
        pods,
        ..Table::default()
    };
    let o = allocate(
        &t,
        &[
            leaf("s0", 1, None, &["s0-n1", "s0-n2"]),
            leaf("s1", 1, None, &["s1-n3", "s1-n4"]),
            leaf("s2", 1, None, &["s2-n5", "s2-n6"]),
            spine("s3", 2, None, &["s0", "s1", "s2"]),
        ],
    );
    let mut per_leaf: BTreeMap<String, usize> = BTreeMap::new();
    for node in bound(&o).values() {
        *per_leaf.entry(node[..2].to_string()).or_default() += 1;
    }
    let mut counts: Vec<usize> = per_leaf.into_values().collect();
    counts.sort_unstable();
    assert_eq!(counts, [2, 2], "{o:?}");
}
