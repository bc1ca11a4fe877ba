use super::*;
use serde_json::{Value, json};

fn pod(namespace: &str, uid: &str, labels: Value, affinity: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": namespace, "uid": uid, "labels": labels},
        "spec": {"containers": [{"name": "c"}], "affinity": affinity}
    }))
    .expect("pod")
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn anti(selector: Value, topology_key: &str) -> Value {
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": topology_key}]}})
}

fn affine(term: Value) -> Value {
    json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
}

#[test]
fn anti_affinity_refuses_the_whole_topology_domain_of_a_selected_pod() {
    let web = json!({"matchLabels": {"app": "web"}});
    let mut check = InterPodAffinity::new(&pod("ns", "new", json!({}), anti(web, "zone")));
    let on_a = AffinityPod::of(&pod("ns", "old", json!({"app": "web"}), Value::Null));
    check.add(&on_a, &labels(&[("zone", "z1"), ("host", "a")]));
    assert_eq!(
        check.admits(&labels(&[("zone", "z1"), ("host", "b")])),
        Err(ANTI_AFFINITY)
    );
    assert_eq!(check.admits(&labels(&[("zone", "z2")])), Ok(()));
    // A node without the topology label is in no domain: nothing there repels.
    assert_eq!(check.admits(&labels(&[("host", "a")])), Ok(()));
}

#[test]
fn terms_select_the_owners_namespace_unless_they_name_others() {
    let web = json!({"matchLabels": {"app": "web"}});
    let elsewhere = AffinityPod::of(&pod("other", "old", json!({"app": "web"}), Value::Null));
    let node = labels(&[("host", "a")]);

    let mut own = InterPodAffinity::new(&pod("ns", "new", json!({}), anti(web.clone(), "host")));
    own.add(&elsewhere, &node);
    assert_eq!(own.admits(&node), Ok(()));

    let named = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": web, "namespaces": ["other"], "topologyKey": "host"}]}});
    let mut named = InterPodAffinity::new(&pod("ns", "new", json!({}), named));
    named.add(&elsewhere, &node);
    assert_eq!(named.admits(&node), Err(ANTI_AFFINITY));
}

#[test]
fn an_empty_namespace_selector_selects_every_namespace_and_a_name_selector_one() {
    let term = |ns_selector: Value| {
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {}, "namespaceSelector": ns_selector, "topologyKey": "host"}]}})
    };
    let node = labels(&[("host", "a")]);
    let elsewhere = AffinityPod::of(&pod("other", "old", json!({}), Value::Null));
    let verdict = |ns_selector: Value| {
        let mut check = InterPodAffinity::new(&pod("ns", "new", json!({}), term(ns_selector)));
        check.add(&elsewhere, &node);
        check.admits(&node)
    };
    assert_eq!(verdict(json!({})), Err(ANTI_AFFINITY));
    assert_eq!(
        verdict(json!({"matchLabels": {"kubernetes.io/metadata.name": "other"}})),
        Err(ANTI_AFFINITY)
    );
    assert_eq!(
        verdict(json!({"matchLabels": {"kubernetes.io/metadata.name": "third"}})),
        Ok(())
    );
}

#[test]
fn a_namespace_selector_matches_the_labels_of_the_namespaces_watched() {
    let term = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "noisy"}},
            "namespaceSelector": {"matchLabels": {"team": "batch"}}, "topologyKey": "host"}]}});
    let node = labels(&[("host", "a")]);
    let namespace = |name: &str, team: &str| -> k8s_openapi::api::core::v1::Namespace {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}}))
            .expect("namespace")
    };
    let mut namespaces = NamespaceLabels::default();
    namespaces.set(&namespace("nightly", "batch"));
    namespaces.set(&namespace("shop", "web"));
    let namespaces = Arc::new(namespaces);
    let verdict = |other_namespace: &str| {
        let mut check = InterPodAffinity::new(&pod("ns", "new", json!({}), term.clone()))
            .in_namespaces(namespaces.clone());
        let other = pod(other_namespace, "old", json!({"app": "noisy"}), Value::Null);
        check.add(&AffinityPod::of(&other), &node);
        check.admits(&node)
    };
    assert_eq!(verdict("nightly"), Err(ANTI_AFFINITY));
    assert_eq!(verdict("shop"), Ok(()));
    // A namespace not seen yet is known by its name label alone.
    assert_eq!(verdict("unseen"), Ok(()));
}

#[test]
fn a_term_without_a_label_selector_selects_no_pod() {
    let term = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "host"}]}});
    let mut check = InterPodAffinity::new(&pod("ns", "new", json!({}), term));
    let node = labels(&[("host", "a")]);
    check.add(
        &AffinityPod::of(&pod("ns", "old", json!({}), Value::Null)),
        &node,
    );
    assert_eq!(check.admits(&node), Ok(()));
}

#[test]
fn a_running_pods_anti_affinity_refuses_the_pod_it_selects() {
    let repels_web = anti(json!({"matchLabels": {"app": "web"}}), "host");
    let old = AffinityPod::of(&pod("ns", "old", json!({}), repels_web));
    let node_a = labels(&[("host", "a")]);
    let mut web = InterPodAffinity::new(&pod("ns", "new", json!({"app": "web"}), Value::Null));
    web.add(&old, &node_a);
    assert_eq!(web.admits(&node_a), Err(EXISTING_ANTI_AFFINITY));
    assert_eq!(web.admits(&labels(&[("host", "b")])), Ok(()));
    let mut db = InterPodAffinity::new(&pod("ns", "new", json!({"app": "db"}), Value::Null));
    db.add(&old, &node_a);
    assert_eq!(db.admits(&node_a), Ok(()));
}

#[test]
fn affinity_needs_a_selected_pod_in_the_nodes_domain() {
    let term = affine(
        json!({"labelSelector": {"matchLabels": {"role": "launcher"}},
        "topologyKey": "zone"}),
    );
    let mut check = InterPodAffinity::new(&pod("ns", "new", json!({"role": "worker"}), term));
    let launcher = AffinityPod::of(&pod("ns", "l", json!({"role": "launcher"}), Value::Null));
    check.add(&launcher, &labels(&[("zone", "z2"), ("host", "b")]));
    assert_eq!(
        check.admits(&labels(&[("zone", "z2"), ("host", "c")])),
        Ok(())
    );
    assert_eq!(check.admits(&labels(&[("zone", "z1")])), Err(AFFINITY));
    // Every topology label must be on the node.
    assert_eq!(check.admits(&labels(&[("host", "b")])), Err(AFFINITY));
}

#[test]
fn affinity_matching_no_pod_anywhere_admits_only_a_pod_matching_its_own_terms() {
    let term = affine(json!({"labelSelector": {"matchLabels": {"app": "cache"}},
        "topologyKey": "zone"}));
    let node = labels(&[("zone", "z1")]);
    let first = InterPodAffinity::new(&pod("ns", "new", json!({"app": "cache"}), term.clone()));
    assert_eq!(first.admits(&node), Ok(()));
    // Still only onto nodes that have the topology label.
    assert_eq!(first.admits(&labels(&[("host", "a")])), Err(AFFINITY));
    let stranger = InterPodAffinity::new(&pod("ns", "new", json!({"app": "web"}), term));
    assert_eq!(stranger.admits(&node), Err(AFFINITY));
}

#[test]
fn a_pod_is_not_judged_against_itself() {
    let term = anti(json!({"matchLabels": {"app": "web"}}), "host");
    let me = pod("ns", "me", json!({"app": "web"}), term);
    let mut check = InterPodAffinity::new(&me);
    let node = labels(&[("host", "a")]);
    check.add(&AffinityPod::of(&me), &node);
    assert_eq!(check.admits(&node), Ok(()));
}
