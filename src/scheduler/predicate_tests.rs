//! The planner runs kube-scheduler's node filters and preferences (the
//! `predicates` and `nodeorder` plugins, both in Volcano's default
//! configuration): gang members are planned only onto nodes kube-scheduler would
//! accept, preferring the nodes they prefer, and a gang no node accepts waits with
//! kube-scheduler's reason. `/filter` does not repeat them.

use super::GangConfig;
use super::gang_tests::{Cluster, gpu_node, member};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// `name` with `gpus` GPUs, labels and taints.
fn node(name: &str, gpus: usize, labels: Value, taints: Value) -> k8s_openapi::api::core::v1::Node {
    let mut n = serde_json::to_value(gpu_node(name, gpus)).unwrap();
    n["metadata"]["labels"] = labels;
    n["spec"] = json!({"taints": taints});
    serde_json::from_value(n).unwrap()
}

/// Three one-GPU nodes: n1 in pool "infer", n2 and n3 in pool "train", n3
/// tainted for maintenance.
fn cluster() -> Cluster {
    let c = Cluster::new(&[("n1", 1), ("n2", 1), ("n3", 1)], GangConfig::default());
    c.s.apply_node(&node("n1", 1, json!({"pool": "infer"}), json!([])));
    c.s.apply_node(&node("n2", 1, json!({"pool": "train"}), json!([])));
    c.s.apply_node(&node(
        "n3",
        1,
        json!({"pool": "train"}),
        json!([{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]),
    ));
    c
}

/// A gang member with extra pod spec fields.
fn member_with(name: &str, group: &str, i: u32, spec: Value) -> Pod {
    let mut p = serde_json::to_value(member(name, group, i)).unwrap();
    for (k, v) in spec.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    serde_json::from_value(p).unwrap()
}

fn gang(c: &Cluster, group: &str, n: u32, spec: Value) {
    c.s.apply_podgroup(&super::gang_tests::podgroup(group, n, "default", json!({})));
    for i in 0..n {
        c.add(&member_with(
            &format!("{group}-{i}"),
            group,
            i,
            spec.clone(),
        ));
    }
}

async fn planned_node(c: &Cluster, name: &str) -> Option<String> {
    c.pod(name)
        .await
        .and_then(|p| p.metadata.annotations)
        .and_then(|a| a.get("hami.io/vgpu-node").cloned())
}

#[tokio::test]
async fn members_go_only_where_their_selector_and_tolerations_allow() {
    let c = cluster();
    let tolerate = json!([{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]);
    gang(
        &c,
        "train",
        2,
        json!({"nodeSelector": {"pool": "train"}, "tolerations": tolerate}),
    );
    c.s.run_gang_cycle().await;
    let mut nodes = vec![
        planned_node(&c, "train-0").await,
        planned_node(&c, "train-1").await,
    ];
    nodes.sort();
    assert_eq!(nodes, [Some("n2".to_string()), Some("n3".to_string())]);
}

#[tokio::test]
async fn an_untolerated_taint_keeps_a_gang_waiting_with_kube_schedulers_reason() {
    let c = cluster();
    gang(&c, "train", 2, json!({"nodeSelector": {"pool": "train"}}));
    c.s.run_gang_cycle().await;
    assert_eq!(planned_node(&c, "train-0").await, None);
    assert!(c.gated("train-0").await);
    let view = c.s.gang_view();
    let message = view
        .gangs
        .iter()
        .find(|g| g.gang == "ml/train")
        .and_then(|g| g.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("untolerated taint {maintenance: true}")
            && message.contains("didn't match Pod's node affinity/selector"),
        "{message}"
    );
}

#[tokio::test]
async fn a_member_that_fits_elsewhere_avoids_the_tainted_node() {
    let c = cluster();
    gang(&c, "one", 1, json!({"nodeSelector": {"pool": "train"}}));
    c.s.run_gang_cycle().await;
    assert_eq!(planned_node(&c, "one-0").await.as_deref(), Some("n2"));
}

#[tokio::test]
async fn filter_leaves_kube_schedulers_filters_to_kube_scheduler() {
    // kube-scheduler offers only the tainted n3 (it found the pod tolerates the
    // taint, say, or runs with other filters): /filter does not second-guess it.
    let c = cluster();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "solo", "namespace": "ml", "uid": "uid-solo"},
        "spec": {"schedulerName": "vgpu-scheduler", "containers": [{"name": "c",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    }))
    .unwrap();
    c.add(&pod);
    let answer =
        c.s.filter(crate::extender::wire::ExtenderArgs {
            pod: Some(pod),
            nodes: None,
            node_names: Some(["n3".to_string()].iter().collect()),
        })
        .await;
    assert_eq!(
        answer.node_names,
        Some(vec!["n3".to_string()]),
        "{answer:?}"
    );
}

#[tokio::test]
async fn with_node_scores_too_members_go_only_where_kube_scheduler_would_accept() {
    // binpack scores every node, so predicates are judged before ranking rather
    // than best first: the same nodes are ruled out.
    let c = cluster();
    c.s.set_gang_conf(
        crate::volcano::load_conf(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: binpack\n",
        )
        .unwrap(),
    );
    gang(&c, "one", 1, json!({"nodeSelector": {"pool": "train"}}));
    c.s.run_gang_cycle().await;
    assert_eq!(planned_node(&c, "one-0").await.as_deref(), Some("n2"));
}

#[tokio::test]
async fn preferred_node_affinity_orders_the_planners_nodes() {
    // n1 and n2 are equally empty: by name n1 would be chosen; the member
    // prefers pool "train" (n2, n3), and n3's hard taint is not tolerated.
    let c = cluster();
    let prefers = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["train"]}]}}
    ]}});
    gang(&c, "one", 1, json!({"affinity": prefers}));
    c.s.run_gang_cycle().await;
    assert_eq!(planned_node(&c, "one-0").await.as_deref(), Some("n2"));
}

#[tokio::test]
async fn a_soft_taint_is_avoided_when_another_node_is_as_good() {
    let c = Cluster::new(&[("n1", 1), ("n2", 1)], GangConfig::default());
    c.s.apply_node(&node(
        "n1",
        1,
        json!({}),
        json!([{"key": "spot", "effect": "PreferNoSchedule"}]),
    ));
    c.s.apply_node(&node("n2", 1, json!({}), json!([])));
    gang(&c, "one", 1, json!({}));
    c.s.run_gang_cycle().await;
    assert_eq!(planned_node(&c, "one-0").await.as_deref(), Some("n2"));
}
