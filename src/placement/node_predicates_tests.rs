use super::*;
use serde_json::{Value, json};

fn pod(spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c"}]);
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
}

fn node(labels: Value, taints: Value, unschedulable: bool) -> NodeTraits {
    let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": labels},
        "spec": {"taints": taints, "unschedulable": unschedulable}
    }))
    .unwrap();
    NodeTraits::of(&n)
}

fn plain() -> NodeTraits {
    node(json!({"pool": "a100", "rack": "7"}), json!([]), false)
}

fn check(p: &Pod, traits: &NodeTraits) -> Result<(), String> {
    let none = Resources::default();
    admits(p, "n1", traits, &none, &none, &none)
}

fn affinity(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

#[test]
fn node_selector_must_match_every_label() {
    assert!(check(&pod(json!({"nodeSelector": {"pool": "a100"}})), &plain()).is_ok());
    assert_eq!(
        check(
            &pod(json!({"nodeSelector": {"pool": "a100", "zone": "x"}})),
            &plain()
        ),
        Err("node(s) didn't match Pod's node affinity/selector".into())
    );
}

#[test]
fn affinity_terms_are_ored_and_requirements_anded() {
    let cases = [
        (
            json!([{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["h100", "a100"]}]}]),
            true,
        ),
        (
            json!([{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a100"]}]}]),
            false,
        ),
        (
            json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["x"]}]}]),
            true,
        ),
        (
            json!([{"matchExpressions": [{"key": "pool", "operator": "Exists"}]}]),
            true,
        ),
        (
            json!([{"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}]),
            false,
        ),
        (
            json!([{"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["6"]}]}]),
            true,
        ),
        (
            json!([{"matchExpressions": [{"key": "rack", "operator": "Lt", "values": ["7"]}]}]),
            false,
        ),
        (
            json!([{"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}]),
            false,
        ),
        (
            json!([{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["a100"]},
            {"key": "rack", "operator": "In", "values": ["8"]}]}]),
            false,
        ),
        (
            json!([
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["h100"]}]},
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["7"]}]}]),
            true,
        ),
        (
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]),
            true,
        ),
        (
            json!([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]),
            false,
        ),
        // An empty term matches nothing, and so does an empty list of terms.
        (json!([{}]), false),
        (json!([]), false),
    ];
    for (terms, expected) in cases {
        let result = check(&pod(affinity(terms.clone())), &plain());
        assert_eq!(result.is_ok(), expected, "{terms}: {result:?}");
    }
}

#[test]
fn taints_that_forbid_scheduling_must_be_tolerated() {
    let tainted = node(
        json!({}),
        json!([{"key": "nvidia.com/gpu", "value": "h100", "effect": "NoSchedule"},
               {"key": "spot", "effect": "PreferNoSchedule"}]),
        false,
    );
    assert_eq!(
        check(&pod(json!({})), &tainted),
        Err("node(s) had untolerated taint {nvidia.com/gpu: h100}".into())
    );
    let tolerations = [
        (
            json!([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]),
            true,
        ),
        (json!([{"key": "nvidia.com/gpu", "value": "h100"}]), true),
        (
            json!([{"key": "nvidia.com/gpu", "operator": "Exists"}]),
            true,
        ),
        (json!([{"operator": "Exists"}]), true),
        (json!([{"key": "nvidia.com/gpu", "value": "a100"}]), false),
        (
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]),
            false,
        ),
        // An empty key without Exists tolerates nothing.
        (json!([{"value": "h100"}]), false),
    ];
    for (t, expected) in tolerations {
        let result = check(&pod(json!({"tolerations": t.clone()})), &tainted);
        assert_eq!(result.is_ok(), expected, "{t}: {result:?}");
    }
    let no_execute = node(
        json!({}),
        json!([{"key": "maintenance", "effect": "NoExecute"}]),
        false,
    );
    assert!(check(&pod(json!({})), &no_execute).is_err());
}

#[test]
fn a_cordoned_node_takes_only_pods_that_tolerate_it() {
    let cordoned = node(json!({}), json!([]), true);
    assert_eq!(
        check(&pod(json!({})), &cordoned),
        Err("node(s) were unschedulable".into())
    );
    let tolerant = pod(
        json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    assert!(check(&tolerant, &cordoned).is_ok());
}

#[test]
fn cpu_and_memory_must_fit_what_the_node_has_left() {
    let p = pod(json!({}));
    let allocatable = Resources::from_units([("cpu", 8), ("memory", 64 << 30)]);
    let requested = Resources::from_units([("cpu", 6), ("memory", 16 << 30)]);
    let fits = Resources::from_units([("cpu", 2), ("memory", 48 << 30)]);
    assert!(admits(&p, "n1", &plain(), &allocatable, &requested, &fits).is_ok());
    let too_big = Resources::from_units([("cpu", 3), ("memory", 49 << 30)]);
    assert_eq!(
        admits(&p, "n1", &plain(), &allocatable, &requested, &too_big),
        Err("Insufficient cpu, Insufficient memory".into())
    );
    // A node that reports no allocatable is not judged on it.
    let none = Resources::default();
    assert!(admits(&p, "n1", &plain(), &none, &requested, &too_big).is_ok());
}
