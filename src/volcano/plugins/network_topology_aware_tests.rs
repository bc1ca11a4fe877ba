use super::*;
use crate::resources::Resources;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::GangKey;
use crate::volcano::framework::testing::{gpu_task, job, running_task, state};
use crate::volcano::plugins::registry;
use crate::volcano::topology::HyperNode;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

fn hyper_node(name: &str, tier: u32, kind: &str, members: &[&str]) -> HyperNode {
    let members: Vec<_> = members
        .iter()
        .map(|m| json!({"type": kind, "selector": {"exactMatch": {"name": m}}}))
        .collect();
    HyperNode::from_json(&json!({"metadata": {"name": name},
        "spec": {"tier": tier, "members": members}}))
    .unwrap()
}

/// Three tiers: leaves a0, a1 (spine a) and b0 (spine b), under one root.
fn three_tiers() -> NetworkTopology {
    let hyper = [
        hyper_node("a0", 1, "Node", &["node-0", "node-1"]),
        hyper_node("a1", 1, "Node", &["node-2", "node-3"]),
        hyper_node("b0", 1, "Node", &["node-4", "node-5"]),
        hyper_node("a", 2, "HyperNode", &["a0", "a1"]),
        hyper_node("b", 2, "HyperNode", &["b0"]),
        hyper_node("root", 3, "HyperNode", &["a", "b"]),
    ];
    let none = BTreeMap::new();
    let names: Vec<String> = (0..6).map(|i| format!("node-{i}")).collect();
    NetworkTopology::resolve(&hyper, names.iter().map(|n| (n.as_str(), &none)))
}

fn plugin(weight: i64) -> NetworkTopologyAware {
    NetworkTopologyAware {
        weight: weight as f64,
        ip_score_set: false,
        evict_max_hyper_nodes: 8,
    }
}

fn key() -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: "train".into(),
        single: false,
    }
}

fn scores(weight: i64, running_on: &[usize], candidates: &[&str]) -> Vec<f64> {
    let k = key();
    let mut tasks: Vec<_> = running_on
        .iter()
        .enumerate()
        .map(|(i, n)| running_task(&k, &format!("t{i}"), *n, 0))
        .collect();
    tasks.push(gpu_task(&k, "waiting", 1));
    let j = job("train", "default", 1, tasks);
    let mut st = state(Resources::new(), Vec::new(), vec![j.clone()]);
    st.topology = Arc::new(three_tiers());
    plugin(weight).hyper_node_order(&st, &j, candidates)
}

#[test]
fn closer_to_the_placed_members_scores_higher() {
    // Members on a0: a0 itself 100; a1 joins at spine a (tier 2): 50; b0 only at
    // the root (tier 3): 0.
    assert_eq!(scores(1, &[0], &["a0", "a1", "b0"]), vec![100.0, 50.0, 0.0]);
    assert_eq!(scores(10, &[0], &["a1", "b0"]), vec![500.0, 0.0]);
}

#[test]
fn ties_go_to_the_candidate_holding_more_members() {
    // Members on a0 and a1 (placed under spine a): both leaves join them at tier 2;
    // a0 holds two of the four tasks, a1 one.
    let s = scores(1, &[0, 1, 2], &["a0", "a1"]);
    assert_eq!(s, vec![50.0 + 50.0, 50.0 + 25.0]);
}

#[test]
fn no_opinion_before_anything_is_placed() {
    assert!(scores(1, &[], &["a0", "b0"]).is_empty());
}

#[test]
fn the_seed_configuration_loads_and_bad_weights_are_refused() {
    let ok = crate::volcano::conf_fixture::priority_gang_then(
        "enqueue, allocate, backfill",
        &[
            ("predicates", &[]),
            ("proportion", &[]),
            ("nodeorder", &[]),
            ("binpack", &[]),
            ("network-topology-aware", &[("weight", "10")]),
        ],
    );
    let conf = SchedulerConf::parse(&ok).unwrap();
    registry::build(&conf).unwrap();
    for (args, needle) in [("weight: -1", "weight"), ("wieght: 1", "unknown argument")] {
        let text = format!(
            "actions: allocate\ntiers:\n- plugins:\n  - name: network-topology-aware\n    arguments:\n      {args}\n"
        );
        let e = registry::load(&text).unwrap_err().to_string();
        assert!(e.contains(needle), "{args}: {e}");
    }
}

/// Volcano's `hypernode.gradient.evict.max-hypernodes` loads: it caps the
/// HyperNodes the gang eviction actions search (default 8, also for 0 or
/// less), and only while the plugin's HyperNode gradients are switched on.
#[test]
fn eviction_hyper_nodes_argument_loads_with_volcano_default() {
    let cap = |entry: &str| {
        let conf = SchedulerConf::parse(&format!(
            "actions: enqueue, allocate, gangpreempt\ntiers:\n- plugins:\n  - name: network-topology-aware\n{entry}"
        ))
        .expect("configuration");
        registry::build(&conf)
            .expect("plugins build")
            .eviction_hyper_nodes()
    };
    assert_eq!(cap(""), Some(8));
    assert_eq!(
        cap("    arguments:\n      hypernode.gradient.evict.max-hypernodes: 3\n"),
        Some(3)
    );
    assert_eq!(
        cap("    arguments:\n      hypernode.gradient.evict.max-hypernodes: 0\n"),
        Some(8)
    );
    assert_eq!(cap("    enabledHyperNodeGradient: false\n"), None);
}
