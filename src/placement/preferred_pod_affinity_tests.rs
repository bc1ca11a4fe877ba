use super::*;
use k8s_openapi::api::core::v1::Pod;

fn pod(uid: &str, labels: serde_json::Value, affinity: serde_json::Value) -> AffinityPod {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid, "labels": labels},
        "spec": {"containers": [], "affinity": affinity}
    }))
    .expect("pod");
    AffinityPod::of(&pod)
}

fn zone(z: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("zone".to_string(), z.to_string())])
}

#[test]
fn terms_add_their_weight_to_the_domain_of_each_pod_they_select() {
    let incoming = pod(
        "in",
        serde_json::json!({"app": "web"}),
        serde_json::json!({
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 30,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "zone"}}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 20,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "batch"}},
                    "topologyKey": "zone"}}]}}),
    );
    let mut scores = PreferredPodAffinity::new(incoming);
    scores.add(
        &pod(
            "db1",
            serde_json::json!({"app": "db"}),
            serde_json::Value::Null,
        ),
        &zone("z1"),
    );
    scores.add(
        &pod(
            "db2",
            serde_json::json!({"app": "db"}),
            serde_json::Value::Null,
        ),
        &zone("z1"),
    );
    scores.add(
        &pod(
            "b",
            serde_json::json!({"app": "batch"}),
            serde_json::Value::Null,
        ),
        &zone("z2"),
    );
    // Another namespace's pod is not selected by a term naming no namespace.
    let mut elsewhere = pod(
        "db3",
        serde_json::json!({"app": "db"}),
        serde_json::Value::Null,
    );
    elsewhere.namespace = "other".into();
    scores.add(&elsewhere, &zone("z3"));
    assert_eq!(scores.raw(&zone("z1")), 60);
    assert_eq!(scores.raw(&zone("z2")), -20);
    assert_eq!(scores.raw(&zone("z3")), 0);
    assert_eq!(scores.raw(&BTreeMap::new()), 0, "a node without the label");

    let spread = Spread::of([60, -20, 0]);
    assert_eq!(spread.normalise(60), 100.0);
    assert_eq!(spread.normalise(-20), 0.0);
    // 100 * 20 / 80, truncated as kube-scheduler keeps integers.
    assert_eq!(spread.normalise(0), 25.0);
    assert_eq!(Spread::of([7, 7]).normalise(7), 0.0, "all alike: all 0");
}

#[test]
fn a_pod_selecting_nothing_scores_nothing() {
    let incoming = pod(
        "in",
        serde_json::json!({"app": "web"}),
        serde_json::Value::Null,
    );
    let mut scores = PreferredPodAffinity::new(incoming);
    assert!(!scores.has_own_terms());
    scores.add(
        &pod(
            "x",
            serde_json::json!({"app": "db"}),
            serde_json::Value::Null,
        ),
        &zone("z1"),
    );
    assert!(scores.is_empty());
}
