//! What the `gangpreempt` and `gangreclaim` tables share: Volcano's test task
//! (`testTask`: 1 CPU, priority given), the tier, three one-node HyperNodes, and
//! a session running the action as the configuration builds it (so its
//! `configurations:` arguments are read as a deployment reads them).

use super::support::{
    GroupRow, PREEMPTING_PLUGINS, PodRow, Table, evicted, group, node_alloc, pod, queue, resources,
    tiers_conf,
};
use crate::volcano::actions::configured;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::{Action, GangPhase};
use crate::volcano::topology::{HighestTier, HyperNode, TopologyConstraint, TopologyMode};
use std::collections::BTreeSet;

/// The tier of the tables: Volcano's tests register one plugin that lets every
/// candidate go; gang does so here, with what a session needs to call a job
/// starving and pipelined, and conformance and priority as a deployment lists
/// them. `network-topology-aware` gives the HyperNode gradients.
const NETWORK_TOPOLOGY: &[(&str, &[&str])] = &[("network-topology-aware", &["HyperNodeGradient"])];

/// `testTask(job, name, node, Running|Pending, priority, 1000)`: 1 CPU, 1G.
pub fn test_task(name: &'static str, group: &'static str, node: &'static str) -> PodRow {
    pod(name, node, !node.is_empty(), resources("1", "1G"), group)
}

/// A PodGroup of `queue` with minMember 1, admitted, of this priority.
pub fn job(name: &'static str, queue: &'static str, priority: i32) -> GroupRow {
    let mut g = group(name, queue, 1, GangPhase::Inqueue);
    g.priority = priority;
    g
}

/// `job` that must stay inside one HyperNode of tier 1.
pub fn hard_tier_one(mut g: GroupRow) -> GroupRow {
    g.network_topology = Some(TopologyConstraint {
        mode: TopologyMode::Hard,
        highest_tier: HighestTier::Number(1),
    });
    g
}

/// A PodGroup saying `volcano.sh/preemptable: "false"`.
pub fn not_preemptable(mut g: GroupRow) -> GroupRow {
    g.annotations = vec![("volcano.sh/preemptable", "false")];
    g
}

/// Nodes n1.. of 1 CPU, 1G and 10 pods.
pub fn one_cpu_nodes(names: &[&'static str]) -> Vec<(&'static str, crate::resources::Resources)> {
    names
        .iter()
        .map(|n| (*n, node_alloc("1", "1G", 10)))
        .collect()
}

/// HyperNodes d1, d2, d3 of tier 1 holding n1, n2, n3.
pub fn three_domains() -> Vec<HyperNode> {
    ["1", "2", "3"]
        .iter()
        .map(|i| {
            HyperNode::from_json(&serde_json::json!({
                "metadata": {"name": format!("d{i}")},
                "spec": {"tier": 1, "members": [
                    {"type": "Node", "selector": {"exactMatch": {"name": format!("n{i}")}}}
                ]}
            }))
            .expect("hyper node")
        })
        .collect()
}

/// Runs `action` alone as a configuration listing it with these
/// `configurations:` builds it, over the table under `hyper_nodes`; the pods
/// evicted.
pub fn run_action(
    t: &Table,
    hyper_nodes: &[HyperNode],
    action: &str,
    configurations: &str,
) -> BTreeSet<String> {
    let mut text = tiers_conf(action, &[&[PREEMPTING_PLUGINS, NETWORK_TOPOLOGY].concat()]);
    if !configurations.is_empty() {
        text.push_str(&format!("configurations:\n{configurations}"));
    }
    let conf = SchedulerConf::parse(&text).expect("configuration");
    let actions = configured(&conf);
    let actions: Vec<&dyn Action> = actions.iter().map(AsRef::as_ref).collect();
    evicted(&t.run_in_topology(hyper_nodes, &text, &actions))
}

/// `c1/<name>` of each name.
pub fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| format!("c1/{n}")).collect()
}

/// n1, n2 and n3 in HyperNodes d1, d2, d3: n1 and n2 held by jobs of the
/// preemptor's queue q1 of higher priority (victims of neither action), the
/// victim (priority 10, of `victim_queue`) on n3; the preemptor (q1, priority
/// 100) must stay inside one HyperNode of tier 1. The pods `action` evicts
/// with `maxDomains: max_domains`.
pub fn victim_in_third_domain(
    action: &str,
    victim_queue: &'static str,
    max_domains: usize,
) -> BTreeSet<String> {
    let t = Table {
        nodes: one_cpu_nodes(&["n1", "n2", "n3"]),
        queues: vec![queue("q1", 1, None), queue("q2", 1, None)],
        groups: vec![
            hard_tier_one(job("preemptor", "q1", 100)),
            job("high1", "q1", 1000),
            job("high2", "q1", 1000),
            job("victim", victim_queue, 10),
        ],
        pods: vec![
            test_task("preemptor", "preemptor", ""),
            test_task("busy1", "high1", "n1"),
            test_task("busy2", "high2", "n2"),
            test_task("victim", "victim", "n3"),
        ],
        ..Table::default()
    };
    run_action(
        &t,
        &three_domains(),
        action,
        &format!("- name: {action}\n  arguments:\n    maxDomains: {max_domains}\n"),
    )
}

/// A gang of three 1-CPU tasks (q1, priority 100) without a constraint, and
/// the victims v1, v2, v3 (priority 10, of `victim_queue`) filling n1, n2, n3,
/// one per HyperNode: only the three HyperNodes together hold the gang, so
/// room is found only when the whole cluster is searched. The pods `action`
/// evicts.
pub fn spread_victims(action: &str, victim_queue: &'static str) -> BTreeSet<String> {
    let mut gang = job("preemptor", "q1", 100);
    gang.min_member = 3;
    let t = Table {
        nodes: one_cpu_nodes(&["n1", "n2", "n3"]),
        queues: vec![queue("q1", 1, None), queue("q2", 1, None)],
        groups: vec![gang, job("victim", victim_queue, 10)],
        pods: vec![
            test_task("p1", "preemptor", ""),
            test_task("p2", "preemptor", ""),
            test_task("p3", "preemptor", ""),
            test_task("v1", "victim", "n1"),
            test_task("v2", "victim", "n2"),
            test_task("v3", "victim", "n3"),
        ],
        ..Table::default()
    };
    run_action(&t, &three_domains(), action, "")
}
