//! Network topology end to end against the fake kube-apiserver: HyperNodes
//! (`topology.volcano.sh`) describe two leaf switches under one spine, and a gang
//! of 8 with `networkTopology: {mode: hard, highestTierAllowed: 1}` is placed
//! inside one leaf, or waits with its PodGroup saying which HyperNodes were tried
//! until one leaf has room for all eight.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;

const NS: &str = "ml";

/// Volcano's configuration with the network-topology-aware plugin.
const CONF: &str = "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
    arguments:
      weight: 10
";

const NODES: [&str; 8] = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"];

fn hyper_node(name: &str, tier: u32, members: Value) -> Value {
    json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members}
    })
}

/// `leaf-a` holds n0..n3 by name pattern, `leaf-b` n4..n7 by name, `spine` both.
fn create_topology(api: &FakeApiServer) {
    api.create(hyper_node(
        "leaf-a",
        1,
        json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[0-3]$"}}}]),
    ));
    api.create(hyper_node(
        "leaf-b",
        1,
        json!(
            ["n4", "n5", "n6", "n7"]
                .iter()
                .map(|n| json!({"type": "Node", "selector": {"exactMatch": {"name": n}}}))
                .collect::<Vec<_>>()
        ),
    ));
    api.create(hyper_node(
        "spine",
        2,
        json!([
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-a"}}},
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-b"}}}
        ]),
    ));
}

/// A gang of eight one-GPU members that must stay inside one leaf.
fn create_gang(api: &FakeApiServer, group: &str) {
    api.create(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group, "namespace": NS},
        "spec": {"minMember": 8, "queue": "default",
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    }));
    for i in 0..8 {
        let mut p = gpu_pod(NS, &format!("{group}-{i}"), 1, 80000, 0);
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": group});
        p["spec"]["schedulerName"] = json!(SCHEDULER);
        p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
        create_pod(api, p);
    }
}

/// A pod another scheduler left running on GPU 0 of `node`.
fn occupy(api: &FakeApiServer, name: &str, node: &str) {
    let devices = format!("{},NVIDIA,81559,100:;", gpu_id(node, 0));
    create_pod(api, running_pod(NS, name, node, &devices, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_gang_of_eight_waits_for_one_leaf_and_lands_inside_it() {
    let api = FakeApiServer::start().await;
    for n in NODES {
        add_node(&api, n, 2, 1);
    }
    create_topology(&api);
    // Each leaf keeps 7 of its 8 GPUs free: 14 in all, but no leaf holds 8.
    occupy(&api, "web-a", "n0");
    occupy(&api, "web-b", "n5");
    create_gang(&api, "train");
    let conf = SchedulerConfFile::new(CONF);
    let server = LiveServer::start_planning(&api, &conf).await;

    let reason = "networkTopology hard, highestTierAllowed 1";
    wait_for(&server, "the PodGroup to name the topology", || {
        podgroup_message(&api, NS, "train").contains(reason)
    })
    .await;
    let message = podgroup_message(&api, NS, "train");
    for part in ["leaf-a: 7 of minMember 8", "leaf-b: 7 of minMember 8"] {
        assert!(message.contains(part), "{message}");
    }
    assert!((0..8).all(|i| gang_gated(&api, NS, &format!("train-{i}"))));

    // /debug/state shows the topology the planner reads.
    let (status, body) = server.get("/debug/state").await;
    assert_eq!(status, 200);
    let state: Value = serde_json::from_str(&body).expect("json");
    let topology = &state["networkTopology"];
    assert_eq!(topology["tiers"], json!([1, 2]));
    assert_eq!(topology["hyperNodes"]["leaf-a"]["parent"], "spine");
    assert_eq!(
        topology["hyperNodes"]["spine"]["nodes"]
            .as_array()
            .map(Vec::len),
        Some(8)
    );

    // The pod on leaf-b finishes: leaf-b has all eight GPUs free again.
    api.delete("Pod", Some(NS), "web-b");
    wait_for(&server, "the gang released", || {
        (0..8).all(|i| !gang_gated(&api, NS, &format!("train-{i}")))
    })
    .await;
    let leaf_b: BTreeSet<&str> = BTreeSet::from(["n4", "n5", "n6", "n7"]);
    for i in 0..8 {
        let name = format!("train-{i}");
        let planned = annotation(&api_pod(&api, NS, &name), "hami.io/vgpu-node")
            .expect("planned node")
            .to_string();
        assert!(
            leaf_b.contains(planned.as_str()),
            "{name} planned on {planned}"
        );
        let node = server.schedule(&api, NS, &name, &NODES).await;
        assert_eq!(node, planned, "{name} follows its plan");
        device_plugin_allocated(&api, NS, &name);
    }
}

/// With no HyperNode at all, Volcano's cluster-wide root is tier 1 and holds
/// every node, so a hard gang allowed tier 1 is placed anywhere rather than
/// waiting for a HyperNode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_gang_is_placed_anywhere_when_no_hyper_node_exists() {
    let api = FakeApiServer::start().await;
    for n in ["n0", "n1"] {
        add_node(&api, n, 2, 1);
    }
    api.create(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pair", "namespace": NS},
        "spec": {"minMember": 2, "queue": "default",
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    }));
    for i in 0..2 {
        let mut p = gpu_pod(NS, &format!("pair-{i}"), 2, 80000, 0);
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "pair"});
        p["spec"]["schedulerName"] = json!(SCHEDULER);
        p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
        create_pod(&api, p);
    }
    let conf = SchedulerConfFile::new(CONF);
    let server = LiveServer::start_planning(&api, &conf).await;
    wait_for(&server, "the gang released", || {
        !gang_gated(&api, NS, "pair-0") && !gang_gated(&api, NS, "pair-1")
    })
    .await;
    for name in ["pair-0", "pair-1"] {
        let planned = annotation(&api_pod(&api, NS, name), "hami.io/vgpu-node").map(str::to_string);
        let node = server.schedule(&api, NS, name, &["n0", "n1"]).await;
        assert_eq!(Some(node), planned, "{name} follows its plan");
    }
}
