//! API calls per placed pod, counted by the fake kube-apiserver as a real one's
//! request metrics count them. HAMi's protocol needs, per pod: the pod's create
//! and kube-scheduler's `Scheduled` event (kube-scheduler), the allocation with
//! `hami.io/bind-phase: allocating`, the node lock and the Binding (this
//! extender), then `success` on the pod and the lock's release (the device
//! plugin): 7 writes, as the allocation rides on the Binding (the API server
//! copies a Binding's annotations onto the pod, and on 1.35+ its labels), so
//! this server writes 2 per pod. Reading is what the watches are for: this server reads
//! nothing while placing them (the lock is taken from the watch's copy of the
//! node, and a lock write that met a changed node waits for the watch to show
//! the change rather than reading it). HAMi's device plugin as shipped costs
//! more than the protocol needs (see `benches/loadgen/device_plugin.rs`); this
//! test answers for it without counting. With `--node-lock pods` no lock is
//! written or released, and this server's one write per pod is the Binding.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const NS: &str = "burst";
const NODES: usize = 3;
const PODS: usize = 18;

/// Writes per pod of the others in the protocol: kube-scheduler's pod create and
/// `Scheduled` event, the device plugin's `success` and lock release.
const OTHERS_WRITES_PER_POD: usize = 4;

/// Plays HAMi's device plugin on every node: a pod holding its node's lock is
/// handed its GPUs (`success`) and the lock released. Returns how many it answered.
fn answer_locked_pods(api: &FakeApiServer) -> usize {
    let mut answered = 0;
    for mut node in api.list("Node") {
        let Some(lock) = annotation(&node, "hami.io/mutex.lock").map(str::to_string) else {
            continue;
        };
        let (_, ns, name) = parse_lock(&lock);
        if let Some(mut pod) = api.get("Pod", Some(&ns), &name) {
            pod["metadata"]["annotations"]["hami.io/bind-phase"] = json!("success");
            api.update(pod);
        }
        if let Some(a) = node["metadata"]["annotations"].as_object_mut() {
            a.remove("hami.io/mutex.lock");
        }
        api.update(node);
        answered += 1;
    }
    answered
}

#[tokio::test]
async fn a_burst_of_pods_costs_seven_writes_two_of_them_this_servers_and_no_read_per_pod() {
    let (api, answered) = place_a_burst(&[], answer_locked_pods).await;
    assert_eq!(
        answered, PODS,
        "every pod took and handed over its node's lock"
    );
    let calls = api.api_calls();
    let ours_per_pod = calls.writes() as f64 / PODS as f64;
    let reads_per_pod = calls.reads() as f64 / PODS as f64;
    let writes_per_pod = ours_per_pod + OTHERS_WRITES_PER_POD as f64;
    assert!(
        writes_per_pod <= 7.0,
        "{writes_per_pod:.2} writes per pod ({ours_per_pod:.2} by this server): {:?}",
        calls.counts
    );
    assert_eq!(
        calls.reads(),
        0,
        "{reads_per_pod:.2} reads per pod: {:?}",
        calls.counts
    );
    // The writes are the protocol's own, one each per pod: the node lock and
    // the Binding carrying the allocation; no pod patch.
    assert_eq!(calls.writes(), 2 * PODS, "{:?}", calls.counts);
    assert_eq!(calls.count("patch", "pods"), 0, "{:?}", calls.counts);
    assert_eq!(calls.count("patch", "nodes"), PODS, "{:?}", calls.counts);
    assert_eq!(calls.count("create", "pods/binding"), PODS);
    assert_eq!(calls.count("create", "events"), 0, "{:?}", calls.counts);
}

#[tokio::test]
async fn with_the_turn_kept_in_pods_a_placed_pod_costs_this_server_one_write_the_binding() {
    let (api, answered) = place_a_burst(&["--node-lock", "pods"], answer_allocating_pods).await;
    assert_eq!(answered, PODS, "every pod was handed its GPUs");
    let calls = api.api_calls();
    // No lock to take or release: kube-scheduler's create and event, the
    // Binding, the device plugin's `success`: 4 writes per pod.
    assert_eq!(calls.writes(), PODS, "{:?}", calls.counts);
    assert_eq!(calls.count("create", "pods/binding"), PODS);
    assert_eq!(calls.count("patch", "nodes"), 0, "{:?}", calls.counts);
    assert_eq!(calls.reads(), 0, "{:?}", calls.counts);
}

/// Plays HAMi's device plugin with no lock to go by: the one pod bound to a
/// node in bind phase `allocating` is handed its GPUs. Returns how many it
/// answered; two pods allocating on one node would be a pod given another's GPUs.
fn answer_allocating_pods(api: &FakeApiServer) -> usize {
    let mut per_node: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for pod in api.list("Pod") {
        if let Some(node) = pod["spec"]["nodeName"].as_str()
            && annotation(&pod, "hami.io/bind-phase") == Some("allocating")
        {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            per_node
                .entry(node.to_string())
                .or_default()
                .push(name.to_string());
        }
    }
    for (node, pods) in &per_node {
        assert_eq!(pods.len(), 1, "two pods allocating on {node}: {pods:?}");
        device_plugin_allocated(api, NS, &pods[0]);
    }
    per_node.len()
}

/// Places `PODS` pods on `NODES` nodes through a server started with `args`,
/// `answer` playing the device plugin meanwhile; the request log then holds
/// only what placing them cost. Returns the API server and how many pods the
/// device plugin answered.
async fn place_a_burst(
    args: &[&str],
    answer: fn(&FakeApiServer) -> usize,
) -> (FakeApiServer, usize) {
    let api = FakeApiServer::start().await;
    let nodes: Vec<String> = (0..NODES).map(|i| format!("gpu-{i}")).collect();
    for n in &nodes {
        add_node(&api, n, 8, 10);
    }
    let server = LiveServer::start(&api, args).await;
    let pods: Vec<Value> = (0..PODS)
        .map(|i| create_pod(&api, gpu_pod(NS, &format!("worker-{i}"), 1, 10_000, 10)))
        .collect();
    // Only what placing the pods costs from here on.
    api.clear_request_log();

    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let done = AtomicBool::new(false);
    let placing = async {
        let binds = pods.iter().map(|p| async {
            let name = p["metadata"]["name"].as_str().expect("name").to_string();
            let answer = server.filter(p, &names).await;
            let node = answer["NodeNames"][0]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: no node: {answer}"))
                .to_string();
            let error = server.bind(NS, &name, &uid_of(p), &node).await;
            assert_eq!(
                error,
                "",
                "{name}: bind failed; log:\n{}",
                server.log_tail(30)
            );
        });
        futures::future::join_all(binds).await;
        done.store(true, Ordering::Release);
    };
    let device_plugin = async {
        let mut answered = 0;
        loop {
            // Read before answering: pods bound before the binds ended are
            // answered in this pass.
            let binds_over = done.load(Ordering::Acquire);
            answered += answer(&api);
            if binds_over {
                break answered;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let ((), answered) = tokio::join!(placing, device_plugin);
    for p in &pods {
        let name = p["metadata"]["name"].as_str().expect("name");
        let stored = api_pod(&api, NS, name);
        assert!(stored["spec"]["nodeName"].is_string(), "{stored}");
        assert!(
            annotation(&stored, "hami.io/vgpu-devices-allocated").is_some(),
            "{stored}"
        );
        assert_eq!(
            label(&stored, "hami.io/vgpu-node"),
            stored["spec"]["nodeName"].as_str(),
            "{stored}"
        );
    }
    (api, answered)
}
