//! A member pinned to a node that stays full is evicted once it has waited the
//! gang timeout there, for its controller to recreate it and have it planned
//! again; room coming back before then keeps it, and restarts the wait.

use crate::gang::book::GANG_GATE;
use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::{Cluster, gpu_node, podgroup};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;
use std::time::Duration;

/// A gated member of PodGroup `web` asking 8 CPUs and no vGPU, owned by a Job.
fn cpu_member(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"scheduling.k8s.io/group-name": "web"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "web",
                "uid": "job-web", "controller": true}]},
        "spec": {"schedulerName": "vgpu-scheduler",
            "schedulingGates": [{"name": GANG_GATE}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]}
    }))
    .expect("member")
}

/// A pod someone else started on `node`, asking `cpu` CPUs.
fn running(name: &str, node: &str, cpu: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "other", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("pod")
}

#[tokio::test]
async fn a_member_pinned_to_a_node_that_stays_full_is_evicted_after_the_gang_timeout() {
    let mut node = gpu_node("n1", 1);
    if let Some(allocatable) = node.status.as_mut().and_then(|s| s.allocatable.as_mut()) {
        allocatable.insert("pods".into(), Quantity("110".into()));
    }
    let c = Cluster::from_nodes(vec![node], GangConfig::default());
    let timeout = GangConfig::default().timeout;
    c.s.apply_podgroup(&podgroup("web", 1, "default", json!({})));
    c.add(&cpu_member("web-0"));
    c.s.run_gang_cycle().await;
    assert!(!c.gated("web-0").await, "planned and released onto n1");
    // The watch brings the pod back as the update left it: ungated, pinned.
    let released = c.pod("web-0").await.expect("web-0");
    c.s.apply_pod(&released);

    // Before kube-scheduler binds it, another pod takes n1's room (64 CPUs).
    c.add(&running("hog", "n1", 60));
    c.s.run_gang_cycle().await;
    c.clock.advance(timeout - Duration::from_secs(1));
    c.s.run_gang_cycle().await;
    assert!(
        c.memory.take_evicted().is_empty(),
        "a full node may free up"
    );

    // Room comes back for a while: the wait starts again once it is gone.
    c.s.forget_pod("uid-hog");
    c.s.run_gang_cycle().await;
    c.add(&running("hog-2", "n1", 60));
    c.s.run_gang_cycle().await;
    c.clock.advance(timeout - Duration::from_secs(1));
    c.s.run_gang_cycle().await;
    assert!(c.memory.take_evicted().is_empty());

    c.clock.advance(Duration::from_secs(2));
    c.s.run_gang_cycle().await;
    assert_eq!(c.evicted(), vec!["ml/web-0".to_string()]);
}
