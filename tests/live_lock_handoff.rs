//! Binds of a burst racing for the node locks of a live cluster, with a stand-in
//! for HAMi's device plugin that answers each bound pod: at no moment are two
//! pods `allocating` on one node (the device plugin finds its pod by that), no
//! GPU is given more than it registered, and every bind succeeds.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const NS: &str = "burst";
const NODES: [&str; 2] = ["n1", "n2"];
const PODS: usize = 12;

/// Pods `allocating` per node, as the device plugin would find them now.
fn allocating_per_node(api: &FakeApiServer) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in api.list("Pod") {
        if annotation(&p, "hami.io/bind-phase") != Some("allocating") {
            continue;
        }
        if let Some(node) = annotation(&p, "hami.io/vgpu-node") {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            out.entry(node.to_string())
                .or_default()
                .push(name.to_string());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_binds_never_put_two_pods_allocating_on_one_node_nor_overcommit_a_gpu() {
    binds_race_for_nodes(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_turn_kept_in_pods_binds_still_put_one_pod_allocating_per_node_and_lock_no_node() {
    let api = binds_race_for_nodes(&["--node-lock", "pods"]).await;
    for node in api.list("Node") {
        assert_eq!(annotation(&node, "hami.io/mutex.lock"), None, "{node}");
    }
    let calls = api.api_calls();
    assert_eq!(calls.count("patch", "nodes"), 0, "{:?}", calls.counts);
}

/// A burst binding to two nodes while a device plugin answers: returns the
/// API server for what else the caller checks.
async fn binds_race_for_nodes(args: &[&str]) -> FakeApiServer {
    let api = FakeApiServer::start().await;
    for node in NODES {
        add_node(&api, node, 2, 4);
    }
    let server = Arc::new(LiveServer::start(&api, args).await);
    let (state, ready) = server
        .wait_state(Duration::from_secs(10), |s| s.gpus().len() == 4)
        .await;
    assert!(ready, "nodes never registered: {}", state.0);
    let names: Vec<String> = (0..PODS).map(|i| format!("p{i:02}")).collect();
    for name in &names {
        create_pod(&api, gpu_pod(NS, name, 1, 1000, 10));
    }

    // kube-scheduler: one filter at a time, each bind sent without waiting.
    let mut binds = Vec::new();
    for name in &names {
        let node = server.filter_one(&api, NS, name, &NODES).await;
        let uid = uid_of(&api_pod(&api, NS, name));
        let (server, name) = (server.clone(), name.clone());
        binds.push(tokio::spawn(async move {
            let error = server.bind(NS, &name, &uid, &node).await;
            (name, error)
        }));
    }

    // The device plugin: answers each pod bound to its node, and looks at every
    // turn for a second pod allocating on the same node.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answered = 0;
    while answered < PODS {
        assert!(
            Instant::now() < deadline,
            "only {answered} pods bound in time"
        );
        for (node, pods) in allocating_per_node(&api) {
            assert!(pods.len() <= 1, "two pods allocating on {node}: {pods:?}");
        }
        for p in api.list("Pod") {
            let bound = p["spec"]["nodeName"].is_string();
            if bound && annotation(&p, "hami.io/bind-phase") == Some("allocating") {
                let name = p["metadata"]["name"].as_str().unwrap_or_default();
                device_plugin_allocated(&api, NS, name);
                answered += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for bind in binds {
        let (name, error) = bind.await.expect("bind task");
        assert_eq!(error, "", "bind of {name} failed");
    }
    let state = server.state().await;
    assert_eq!(over_capacity(&state.gpus()), Vec::<String>::new());
    for (gpu, usage) in cluster_usage(&api) {
        assert!(
            usage.used <= 4 && usage.usedcores <= 100,
            "{gpu} given more than it has: {usage:?}"
        );
    }
    api
}

#[tokio::test]
async fn with_the_turn_kept_in_pods_a_restarted_server_waits_for_the_pod_still_allocating() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 4);
    let args = ["--node-lock", "pods", "--node-lock-retry-timeout", "1s"];
    let mut first = LiveServer::start(&api, &args).await;
    create_pod(&api, gpu_pod(NS, "early", 1, 1000, 10));
    first.schedule(&api, NS, "early", &["n1"]).await;
    // Bound and allocating; the device plugin has not answered when the
    // server dies, and nothing on the Node says the pod holds it.
    first.kill();
    assert_eq!(
        annotation(&api_pod(&api, NS, "early"), "hami.io/bind-phase"),
        Some("allocating")
    );

    let second = LiveServer::start(&api, &args).await;
    watch_barrier(&api, &second).await;
    let state = second.state().await;
    let n1 = state.0["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["name"] == "n1"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        n1["allocating"],
        serde_json::json!([format!("{NS}/early")]),
        "/debug/state names the pod holding the node: {n1}"
    );
    create_pod(&api, gpu_pod(NS, "late", 1, 1000, 10));
    let node = second.filter_one(&api, NS, "late", &["n1"]).await;
    let uid = uid_of(&api_pod(&api, NS, "late"));
    let error = second.bind(NS, "late", &uid, &node).await;
    assert!(
        error.contains(&format!("by {NS}/early: node lock contention")),
        "the bind must wait for the pod allocating there: {error:?}"
    );
    assert!(api_pod(&api, NS, "late")["spec"]["nodeName"].is_null());

    // Once the device plugin answered, the node takes the next pod.
    device_plugin_allocated(&api, NS, "early");
    watch_barrier(&api, &second).await;
    second.schedule(&api, NS, "late", &["n1"]).await;
    assert_eq!(allocating_per_node(&api).get("n1").map(Vec::len), Some(1));
}
