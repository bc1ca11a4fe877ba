//! resource-strategy-fit end to end against the fake kube-apiserver: the configured
//! strategy for `nvidia.com/gpu` decides which node `/prioritize` ranks first and
//! `/filter` chooses for a vGPU pod, and where the planner places a gang member; a
//! pod's own annotations override the configuration.
//!
//! The cluster: two nodes of two H100s of four vGPU slots each; three vGPU pods
//! already run on `n1`, none on `n2`. MostAllocated packs onto `n1`,
//! LeastAllocated spreads to `n2`. Each placement shifts usage by one slot (125 of
//! the plugin's score), more than the node policy's whole range (100), so every
//! answer below is the plugin's.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NS: &str = "ml";
const NODES: [&str; 2] = ["n1", "n2"];

/// Volcano's default tiers plus resource-strategy-fit scoring only the vGPU count.
fn conf(strategy: &str) -> SchedulerConfFile {
    let text = format!(
        "actions: enqueue, allocate, backfill
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: proportion
  - name: resource-strategy-fit
    arguments:
      resourceStrategyFitWeight: 10
      resources:
        nvidia.com/gpu:
          type: {strategy}
          weight: 1
"
    );
    SchedulerConfFile::new(&text)
}

/// The two nodes and the three pods already running on `n1`.
fn cluster(api: &FakeApiServer) -> Vec<String> {
    add_node(api, "n1", 2, 4);
    add_node(api, "n2", 2, 4);
    [0, 0, 1]
        .iter()
        .enumerate()
        .map(|(i, gpu)| {
            let devices = format!("{},NVIDIA,20000,25:;", gpu_id("n1", *gpu));
            let p = create_pod(
                api,
                running_pod(NS, &format!("resident-{i}"), "n1", &devices, 1),
            );
            uid_of(&p)
        })
        .collect()
}

/// A vGPU pod of 20000 MiB, as kube-scheduler sends it to the extender.
fn vgpu_pod(api: &FakeApiServer, name: &str, annotations: Value) -> Value {
    let mut p = gpu_pod(NS, name, 1, 20000, 0);
    p["metadata"]["annotations"] = annotations;
    p["spec"]["schedulerName"] = json!(SCHEDULER);
    create_pod(api, p)
}

/// `/prioritize` scores by node.
async fn prioritize(server: &LiveServer, pod: &Value) -> BTreeMap<String, i64> {
    let args = json!({"Pod": pod, "Nodes": null, "NodeNames": NODES});
    let (status, answer) = server.post_json("/prioritize", &args).await;
    assert_eq!(status, 200, "/prioritize: {answer}");
    answer
        .as_array()
        .unwrap_or_else(|| panic!("/prioritize answers a list: {answer}"))
        .iter()
        .map(|h| {
            let host = h["Host"].as_str().expect("Host").to_string();
            (host, h["Score"].as_i64().expect("Score"))
        })
        .collect()
}

/// Creates a one-member gang, gated as the webhook leaves it, and returns the
/// node the planner gives it.
async fn planned_member(api: &FakeApiServer, server: &LiveServer) -> String {
    api.create(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": NS},
        "spec": {"minMember": 1, "queue": "default"}
    }));
    let mut p = gpu_pod(NS, "worker", 1, 20000, 0);
    p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "train"});
    p["spec"]["schedulerName"] = json!(SCHEDULER);
    p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
    create_pod(api, p);
    let deadline = Instant::now() + Duration::from_secs(15);
    while gang_gated(api, NS, "worker") {
        assert!(
            Instant::now() < deadline,
            "the gang was never planned; log:\n{}",
            server.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    annotation(&api_pod(api, NS, "worker"), "hami.io/vgpu-node")
        .expect("the planned node is written on the member")
        .to_string()
}

/// One configured strategy, with the pod-level override of the other.
async fn placements(strategy: &str, override_strategy: &str) -> [String; 4] {
    let api = FakeApiServer::start().await;
    let residents = cluster(&api);
    let conf = conf(strategy);
    let server = LiveServer::start_planning(&api, &conf).await;
    let (state, known) = server
        .wait_state(Duration::from_secs(10), |s| {
            residents.iter().all(|uid| s.pod(uid).is_some())
        })
        .await;
    assert!(known, "the running pods are in the ledger: {}", state.0);

    // /prioritize ranks the strategy's node first.
    let solo = vgpu_pod(&api, "solo", json!({}));
    let scores = prioritize(&server, &solo).await;
    let best = scores
        .iter()
        .max_by_key(|(_, s)| **s)
        .map(|(n, _)| n.clone())
        .expect("scores");
    assert_eq!(scores[&best], 10, "{scores:?}");
    assert!(
        scores.values().filter(|s| **s == 10).count() == 1,
        "{scores:?}"
    );

    // A pod's own annotations override the configuration.
    let own = vgpu_pod(
        &api,
        "own",
        json!({
            "volcano.sh/resource-strategy-scoring-type": override_strategy,
            "volcano.sh/resource-strategy-weight": r#"{"nvidia.com/gpu": 1}"#,
        }),
    );
    let overridden = chosen(&server.filter(&own, &NODES).await);
    // The configured strategy again, and then for a gang member the planner places.
    let filtered = chosen(&server.filter(&solo, &NODES).await);
    let planned = planned_member(&api, &server).await;
    [best, overridden, filtered, planned]
}

fn chosen(answer: &Value) -> String {
    let names = answer["NodeNames"]
        .as_array()
        .unwrap_or_else(|| panic!("/filter chose no node: {answer}"));
    assert_eq!(names.len(), 1, "{answer}");
    names[0].as_str().expect("node name").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn most_allocated_packs_vgpu_pods_onto_the_busy_node() {
    // n1 holds 3 of 8 slots. The override spreads one pod to n2 (1 of 8); packing
    // still prefers n1 (4 of 8) for the next pod and for the gang member.
    assert_eq!(
        placements("MostAllocated", "LeastAllocated").await,
        ["n1", "n2", "n1", "n1"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_allocated_spreads_vgpu_pods_to_the_idle_node() {
    // The override packs one pod onto n1 (4 of 8); spreading prefers n2 for the
    // next pod (1 of 8) and for the gang member (n2 2 of 8 against n1 4 of 8).
    assert_eq!(
        placements("LeastAllocated", "MostAllocated").await,
        ["n2", "n1", "n2", "n2"]
    );
}
