//! One node choice for `/filter` and the planner: a plugin that scores nodes
//! moves single pods and gang members alike.

use super::GangConfig;
use super::gang_tests::{Cluster, member, podgroup};
use crate::extender::wire::ExtenderArgs;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// Binpack weighted on CPU: the node whose CPU the pod fills most wins.
const BINPACK_ON_CPU: &str = "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: proportion\n  - name: binpack\n    arguments:\n      binpack.weight: 5\n      binpack.cpu: 10\n      binpack.memory: 0\n";

/// Two nodes with the same free GPUs; n2's CPUs are mostly taken by a pod
/// without GPUs (kube-scheduler placed it).
fn cluster() -> Cluster {
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], GangConfig::default());
    let busy: Pod = serde_json::from_value(json!({
        "metadata": {"name": "etl", "namespace": "ml", "uid": "uid-etl"},
        "spec": {"nodeName": "n2", "containers": [{"name": "c", "resources": {
            "requests": {"cpu": "60", "memory": "8Gi"}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("pod");
    c.add(&busy);
    c
}

async fn filter_plain(c: &Cluster) -> String {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "infer", "namespace": "ml", "uid": "uid-infer"},
        "spec": {"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "2", "memory": "1Gi"},
            "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "80000"}}}]}
    }))
    .expect("pod");
    c.add(&pod);
    let r =
        c.s.filter(ExtenderArgs {
            pod: Some(pod),
            nodes: None,
            node_names: Some(c.nodes.iter().collect()),
        })
        .await;
    assert!(r.error.is_empty(), "{}", r.error);
    r.node_names.expect("a node").remove(0)
}

async fn planned_node(c: &Cluster) -> String {
    c.s.apply_podgroup(&podgroup("solo", 1, "default", json!({})));
    c.add(&member("m0", "solo", 0));
    assert_eq!(c.s.run_gang_cycle().await, 1);
    c.s.with_ledger(|l| l.pod("uid-m0").expect("planned").node.clone())
}

#[tokio::test]
async fn without_node_scores_the_gpu_policy_decides_and_ties_go_by_name() {
    let c = cluster();
    assert_eq!(filter_plain(&c).await, "n1");
    let c = cluster();
    assert_eq!(planned_node(&c).await, "n1");
}

#[tokio::test]
async fn binpack_moves_single_pods_and_gang_members_alike() {
    let c = cluster();
    c.s.set_gang_conf(crate::volcano::load_conf(BINPACK_ON_CPU).expect("conf"));
    assert_eq!(filter_plain(&c).await, "n2");
    let c = cluster();
    c.s.set_gang_conf(crate::volcano::load_conf(BINPACK_ON_CPU).expect("conf"));
    assert_eq!(planned_node(&c).await, "n2");
}
