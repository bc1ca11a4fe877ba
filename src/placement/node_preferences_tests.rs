use super::*;
use serde_json::json;

fn traits(labels: serde_json::Value, taints: serde_json::Value) -> NodeTraits {
    let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": labels}, "spec": {"taints": taints}
    }))
    .unwrap();
    NodeTraits::of(&n)
}

fn pod(spec: serde_json::Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c"}]);
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
}

#[test]
fn preferred_affinity_scores_the_share_of_weights_matched() {
    let p = pod(
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 3, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["h100"]}]}},
            {"weight": 1, "preference": {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}}
        ]}}}),
    );
    let both = traits(json!({"pool": "h100", "rack": "1"}), json!([]));
    let pool = traits(json!({"pool": "h100"}), json!([]));
    let rack = traits(json!({"rack": "1"}), json!([]));
    assert_eq!(node_affinity(&p, "n1", &both), 100.0);
    assert_eq!(node_affinity(&p, "n1", &pool), 75.0);
    assert_eq!(node_affinity(&p, "n1", &rack), 25.0);
    assert_eq!(node_affinity(&pod(json!({})), "n1", &both), 0.0);
}

#[test]
fn each_untolerated_soft_taint_halves_the_score() {
    let soft = json!([{"key": "spot", "effect": "PreferNoSchedule"},
                      {"key": "old", "effect": "PreferNoSchedule"},
                      {"key": "hard", "effect": "NoSchedule"}]);
    let node = traits(json!({}), soft);
    assert_eq!(taint_toleration(&pod(json!({})), &node), 25.0);
    let tolerant = pod(json!({"tolerations": [{"key": "spot", "operator": "Exists"}]}));
    assert_eq!(taint_toleration(&tolerant, &node), 50.0);
    assert_eq!(
        taint_toleration(&pod(json!({})), &traits(json!({}), json!([]))),
        100.0
    );
}

#[test]
fn requested_scores_follow_kube_scheduler() {
    let alloc = Resources::from_units([("cpu", 10), ("memory", 100)]);
    let used = Resources::from_units([("cpu", 4), ("memory", 20)]);
    let asks = Resources::from_units([("cpu", 1), ("memory", 30)]);
    // cpu 5/10 used, memory 50/100 used.
    assert_eq!(least_requested(&alloc, &used, &asks), 50.0);
    assert_eq!(most_requested(&alloc, &used, &asks), 50.0);
    assert_eq!(balanced(&alloc, &used, &asks), 100.0);
    let cpu_heavy = Resources::from_units([("cpu", 5), ("memory", 0)]);
    // cpu 9/10, memory 20/100.
    assert!((least_requested(&alloc, &used, &cpu_heavy) - 45.0).abs() < 1e-9);
    assert!((balanced(&alloc, &used, &cpu_heavy) - 30.0).abs() < 1e-9);
    assert_eq!(least_requested(&Resources::default(), &used, &asks), 0.0);
}
