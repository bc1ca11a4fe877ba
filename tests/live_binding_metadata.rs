//! The placement rides on the Binding: the API server copies a Binding's
//! annotations onto the pod in the same write as its node (and its labels with
//! the `PodTopologyLabelsAdmission` gate, on by default since Kubernetes 1.35).
//! What a Binding cannot do, a patch still does: remove what an earlier
//! placement left on the pod, and set the `hami.io/vgpu-node` label on a server
//! that does not copy a Binding's labels.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::json;
use std::time::Duration;

const NS: &str = "ml";

#[tokio::test]
async fn on_a_server_that_copies_no_binding_labels_the_vgpu_node_label_follows_the_bind() {
    let api = FakeApiServer::start().await;
    api.set_pod_topology_labels(false);
    add_node(&api, "gpu-a", 2, 10);
    let server = LiveServer::start(&api, &[]).await;
    create_pod(&api, gpu_pod(NS, "train", 1, 1000, 10));
    api.clear_request_log();

    let node = server.schedule(&api, NS, "train", &["gpu-a"]).await;
    assert_eq!(node, "gpu-a");
    let p = api_pod(&api, NS, "train");
    assert_eq!(annotation(&p, "hami.io/vgpu-node"), Some("gpu-a"), "{p}");
    assert_eq!(
        annotation(&p, "hami.io/bind-phase"),
        Some("allocating"),
        "{p}"
    );
    assert!(
        // The fake logs a request once its answer is built, just after the
        // store holds the change: wait for both.
        api.wait_until(Duration::from_secs(5), |a| {
            label(&api_pod(a, NS, "train"), "hami.io/vgpu-node") == Some("gpu-a")
                && a.api_calls().count("patch", "pods") >= 1
        })
        .await,
        "label never set: {}\nlog:\n{}",
        api_pod(&api, NS, "train"),
        server.log_tail(20)
    );
    // The label's own patch, after the Binding, and nothing else on the pod.
    let calls = api.api_calls();
    assert_eq!(calls.count("patch", "pods"), 1, "{:?}", calls.counts);
    assert_eq!(
        calls.count("create", "pods/binding"),
        1,
        "{:?}",
        calls.counts
    );
}

#[tokio::test]
async fn a_server_that_copies_binding_labels_needs_no_pod_patch_and_adds_the_node_topology() {
    let api = FakeApiServer::start().await;
    let mut node = gpu_node("gpu-a", 2, 10);
    node["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("zone-1");
    api.create(node);
    let server = LiveServer::start(&api, &[]).await;
    create_pod(&api, gpu_pod(NS, "train", 1, 1000, 10));
    api.clear_request_log();

    server.schedule(&api, NS, "train", &["gpu-a"]).await;
    let p = api_pod(&api, NS, "train");
    assert_eq!(label(&p, "hami.io/vgpu-node"), Some("gpu-a"), "{p}");
    assert_eq!(
        label(&p, "topology.kubernetes.io/zone"),
        Some("zone-1"),
        "{p}"
    );
    assert_eq!(
        annotation(&p, "hami.io/vgpu-devices-to-allocate"),
        annotation(&p, "hami.io/vgpu-devices-allocated"),
        "{p}"
    );
    let calls = api.api_calls();
    assert_eq!(calls.count("patch", "pods"), 0, "{:?}", calls.counts);
}

#[tokio::test]
async fn what_an_earlier_placement_left_on_the_pod_is_removed_before_the_binding() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 2, 10);
    let server = LiveServer::start(&api, &[]).await;
    // MIG instances of a placement that never bound: this one has none.
    let mut pod = gpu_pod(NS, "train", 1, 1000, 10);
    pod["metadata"]["annotations"] = json!({
        "hami.io/vgpu-mig-allocations": "[{\"uuid\":\"GPU-old\",\"profile\":\"1g.10gb\",\"index\":0}]"
    });
    create_pod(&api, pod);
    api.clear_request_log();

    server.schedule(&api, NS, "train", &["gpu-a"]).await;
    let p = api_pod(&api, NS, "train");
    assert_eq!(p["spec"]["nodeName"], "gpu-a", "{p}");
    assert_eq!(annotation(&p, "hami.io/vgpu-mig-allocations"), None, "{p}");
    assert_eq!(annotation(&p, "hami.io/vgpu-node"), Some("gpu-a"), "{p}");
    let calls = api.api_calls();
    assert_eq!(calls.count("patch", "pods"), 1, "{:?}", calls.counts);
    let log = api.request_log();
    let patch = log
        .iter()
        .position(|(m, p, _)| m == "PATCH" && p.contains("/pods/train"));
    let binding = log
        .iter()
        .position(|(m, p, _)| m == "POST" && p.contains("/pods/train/binding"));
    assert!(patch < binding, "removal before the Binding: {log:?}");
}
