//! `/prioritize` leaves preferred pod affinity to kube-scheduler: it scores a pod
//! it asks the extender about itself (its InterPodAffinity plugin), so counting
//! it here too would count it twice. Only the planner, which places gang members
//! before kube-scheduler sees them, scores it (nodeorder's `podaffinity.weight`).

use super::GangConfig;
use super::gang_tests::{Cluster, hostname_gpu_node};
use crate::extender::wire::{ExtenderArgs, HostPriority};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

const HOSTNAME: &str = "kubernetes.io/hostname";

/// A vGPU pod of no gang, with `affinity`.
fn vgpu_pod(affinity: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "solo", "namespace": "ml", "uid": "uid-solo"},
        "spec": {"schedulerName": "vgpu-scheduler", "affinity": affinity,
            "containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}}}]}
    }))
    .expect("pod")
}

fn scores(c: &Cluster, pod: Pod) -> Vec<HostPriority> {
    c.s.prioritize(ExtenderArgs {
        pod: Some(pod),
        nodes: None,
        node_names: Some(c.nodes.iter().collect()),
    })
    .expect("prioritize")
}

#[tokio::test]
async fn prioritize_leaves_preferred_pod_affinity_to_kube_scheduler() {
    let nodes = ["n1", "n2"]
        .into_iter()
        .map(|name| hostname_gpu_node(name, 1))
        .collect();
    let c = Cluster::from_nodes(nodes, GangConfig::default());
    c.s.set_gang_conf(
        crate::volcano::load_conf(
            "actions: allocate
tiers:
- plugins:
  - name: predicates
  - name: nodeorder
    arguments:
      podaffinity.weight: 2
      leastrequested.weight: 1
",
        )
        .expect("conf"),
    );
    c.add(
        &serde_json::from_value(json!({
            "metadata": {"name": "cache", "namespace": "ml", "uid": "uid-cache",
                "labels": {"app": "cache"}},
            "spec": {"nodeName": "n2", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}
        }))
        .expect("cache"),
    );
    let prefers_cache = json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": HOSTNAME}}]}});
    assert_eq!(
        scores(&c, vgpu_pod(prefers_cache)),
        scores(&c, vgpu_pod(Value::Null))
    );
}
