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
    let api = FakeApiServer::start().await;
    for node in NODES {
        add_node(&api, node, 2, 4);
    }
    let server = Arc::new(LiveServer::start(&api, &[]).await);
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
}
