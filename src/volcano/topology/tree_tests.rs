use super::*;
use serde_json::json;

fn hn(name: &str, tier: u32, members: serde_json::Value) -> HyperNode {
    HyperNode::from_json(&json!({
        "metadata": {"name": name}, "spec": {"tier": tier, "members": members}
    }))
    .unwrap()
}

fn nodes_of(kind: &str, names: &[&str]) -> serde_json::Value {
    json!(
        names
            .iter()
            .map(|n| json!({"type": kind, "selector": {"exactMatch": {"name": n}}}))
            .collect::<Vec<_>>()
    )
}

/// Two leaf switches of four nodes under one spine: the shape of Volcano's
/// examples.
fn two_tier() -> (Vec<HyperNode>, Vec<String>) {
    let hyper = vec![
        hn(
            "s0",
            1,
            json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[0-3]$"}}}]),
        ),
        hn(
            "s1",
            1,
            json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[4-7]$"}}}]),
        ),
        hn("s2", 2, nodes_of("HyperNode", &["s0", "s1"])),
    ];
    let nodes = (0..8).map(|i| format!("node-{i}")).collect();
    (hyper, nodes)
}

fn resolve(hyper: &[HyperNode], nodes: &[String]) -> NetworkTopology {
    let none = BTreeMap::new();
    NetworkTopology::resolve(hyper, nodes.iter().map(|n| (n.as_str(), &none)))
}

#[test]
fn every_node_under_a_hyper_node_through_its_children() {
    let (hyper, nodes) = two_tier();
    let t = resolve(&hyper, &nodes);
    assert_eq!(t.tiers, vec![1, 2]);
    assert_eq!(t.get("s0").unwrap().nodes.len(), 4);
    assert_eq!(t.get("s2").unwrap().nodes.len(), 8);
    assert_eq!(t.get("s0").unwrap().parent.as_deref(), Some("s2"));
    assert_eq!(t.home_of("node-5"), Some("s1"));
    assert_eq!(t.home_of("node-9"), None);
    let tier1: Vec<&str> = t.at_tier(1).map(|(n, _)| n).collect();
    assert_eq!(tier1, ["s0", "s1"]);
    assert!(t.problems.is_empty(), "{:?}", t.problems);
}

#[test]
fn the_span_of_nodes_is_their_lowest_common_hyper_node() {
    let (hyper, nodes) = two_tier();
    let t = resolve(&hyper, &nodes);
    assert_eq!(t.span(["node-0", "node-3"]), Span::Within("s0".into()));
    assert_eq!(t.span(["node-0", "node-4"]), Span::Within("s2".into()));
    assert_eq!(t.span(Vec::<&str>::new()), Span::Nowhere);
    assert_eq!(t.span(["node-0", "elsewhere"]), Span::Scattered);
    assert_eq!(t.common_ancestor("s0", "s0"), Some("s0"));
    assert_eq!(t.common_ancestor("s0", "s1"), Some("s2"));
}

#[test]
fn two_trees_without_a_common_root_do_not_span() {
    let hyper = vec![
        hn("a", 1, nodes_of("Node", &["n1"])),
        hn("b", 1, nodes_of("Node", &["n2"])),
    ];
    let t = resolve(&hyper, &["n1".into(), "n2".into()]);
    assert_eq!(t.span(["n1", "n2"]), Span::Scattered);
}

#[test]
fn nodes_picked_by_labels() {
    let hyper = vec![hn(
        "rack1",
        1,
        json!([{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "1"}}}}]),
    )];
    let rack1: BTreeMap<String, String> = [("rack".into(), "1".into())].into();
    let none = BTreeMap::new();
    let t = NetworkTopology::resolve(&hyper, [("a", &rack1), ("b", &none)]);
    assert_eq!(
        t.get("rack1").unwrap().nodes,
        BTreeSet::from(["a".to_string()])
    );
}

#[test]
fn inconsistent_objects_are_read_one_way_and_reported() {
    let hyper = vec![
        hn("leaf", 1, nodes_of("Node", &["n1"])),
        hn("other", 1, nodes_of("Node", &["n1"])),
        hn("spine-a", 2, nodes_of("HyperNode", &["leaf", "ghost"])),
        hn("spine-b", 2, nodes_of("HyperNode", &["leaf"])),
        hn("flat", 2, nodes_of("HyperNode", &["spine-a"])),
    ];
    let t = resolve(&hyper, &["n1".into()]);
    let problems = t.problems.join("\n");
    assert!(
        problems.contains("ghost, which does not exist"),
        "{problems}"
    );
    assert!(
        problems.contains("listed by both spine-a and spine-b"),
        "{problems}"
    );
    assert!(problems.contains("must be of a lower tier"), "{problems}");
    assert!(
        problems.contains("node n1 is in both leaf and other"),
        "{problems}"
    );
    assert_eq!(t.get("leaf").unwrap().parent.as_deref(), Some("spine-a"));
    assert!(t.get("spine-b").unwrap().nodes.is_empty());
    assert_eq!(t.home_of("n1"), Some("leaf"));
}

#[test]
fn a_node_that_does_not_exist_is_not_counted() {
    let hyper = vec![hn("leaf", 1, nodes_of("Node", &["n1", "gone"]))];
    let t = resolve(&hyper, &["n1".into()]);
    assert_eq!(t.get("leaf").unwrap().nodes.len(), 1);
}

#[test]
fn tier_names_name_tiers() {
    let mut h = hn("leaf", 1, nodes_of("Node", &["n1"]));
    h.tier_name = Some("nvlink".into());
    let t = resolve(&[h], &["n1".into()]);
    assert_eq!(t.tier_named("nvlink"), Some(1));
    assert_eq!(t.tier_named("spine"), None);
}
