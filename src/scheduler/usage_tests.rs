//! usage through the scheduler: `/filter` and the planner keep pods off a node
//! whose measured usage is above a threshold and prefer the idlest node, and once
//! the measurement is too old the node is judged as if the plugin had no opinion,
//! with `/debug/state` saying why. Time is the scheduler's manual clock.

use super::GangConfig;
use super::gang_tests::{Cluster, member};
use crate::extender::wire::ExtenderArgs;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use std::time::Duration;

const CONF: &str = "actions: enqueue, allocate
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: usage
    arguments:
      usage.weight: 5
      thresholds: {cpu: 80, mem: 80}
";

/// A node's NodeMetrics as a cluster file gives it (the nodes offer 64 CPUs and
/// 512 GiB).
fn node_metrics(node: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
        "metadata": {"name": node},
        "window": "20s",
        "usage": {"cpu": cpu, "memory": memory}
    })
}

/// n1 busy (60 of 64 CPUs), n2 idle, two whole GPUs each.
fn cluster() -> Cluster {
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], GangConfig::default());
    c.s.set_gang_conf(crate::volcano::load_conf(CONF).unwrap());
    c.s.node_metrics_from_cluster_file();
    c.s.apply_node_metrics(&node_metrics("n1", "60", "128Gi"));
    c.s.apply_node_metrics(&node_metrics("n2", "4", "64Gi"));
    c
}

/// A pod of one whole GPU outside any gang.
fn plain_pod(name: &str) -> Pod {
    let mut p = member(name, "unused", 0);
    p.metadata.annotations = None;
    p.spec.as_mut().unwrap().scheduling_gates = None;
    p
}

/// `/filter` of the pod on `nodes`: the chosen nodes and the refusals.
async fn filter(c: &Cluster, pod: &Pod, nodes: &[&str]) -> (Vec<String>, Value) {
    c.add(pod);
    let answer =
        c.s.filter(ExtenderArgs {
            pod: Some(pod.clone()),
            nodes: None,
            node_names: Some(nodes.iter().map(|n| n.to_string()).collect()),
        })
        .await;
    assert_eq!(answer.error, "", "{answer:?}");
    (
        answer.node_names.unwrap_or_default(),
        serde_json::to_value(&answer.failed_nodes).unwrap(),
    )
}

fn measured(c: &Cluster, node: &str) -> Value {
    let state = c.s.debug_state();
    state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == node)
        .map(|n| n["measuredUsage"].clone())
        .unwrap()
}

#[tokio::test]
async fn filter_refuses_a_busy_node_until_its_measurement_is_too_old() {
    let c = cluster();
    let (chosen, failed) = filter(&c, &plain_pod("alone"), &["n1"]).await;
    assert!(chosen.is_empty());
    assert_eq!(
        failed["n1"],
        "node CPU usage is above the 80 percent threshold (usage)"
    );
    // Both offered: the idle one, though without the plugin the smaller name wins.
    let (chosen, _) = filter(&c, &plain_pod("both"), &["n1", "n2"]).await;
    assert_eq!(chosen, ["n2"]);
    assert_eq!(
        measured(&c, "n1"),
        json!({"used": true, "cpuPercent": 93.75, "memoryPercent": 25.0,
               "timestamp": measured(&c, "n1")["timestamp"], "ageSeconds": 0,
               "windowSeconds": 20.0})
    );

    c.clock.advance(Duration::from_secs(6 * 60));
    let (chosen, _) = filter(&c, &plain_pod("later"), &["n1"]).await;
    assert_eq!(chosen, ["n1"], "a stale measurement refuses nothing");
    let n1 = measured(&c, "n1");
    assert_eq!(n1["used"], false);
    assert_eq!(n1["reason"], "metrics 6m old (used up to 5m)");
    assert_eq!(n1["ageSeconds"], 360);
    assert_eq!(c.s.debug_state()["nodeMetrics"]["source"], "cluster file");
}

#[tokio::test]
async fn a_node_without_a_usable_measurement_is_not_refused_and_says_why() {
    let c = cluster();
    c.s.apply_node_metrics(&node_metrics("n1", "a lot", "128Gi"));
    let (chosen, _) = filter(&c, &plain_pod("p"), &["n1"]).await;
    assert_eq!(chosen, ["n1"]);
    let n1 = measured(&c, "n1");
    assert_eq!(n1["used"], false);
    let reason = n1["reason"].as_str().unwrap();
    assert!(reason.starts_with("usage.cpu: "), "{reason}");

    let c = Cluster::new(&[("n1", 2), ("n2", 2)], GangConfig::default());
    c.s.set_gang_conf(crate::volcano::load_conf(CONF).unwrap());
    c.s.node_metrics_from_cluster_file();
    assert_eq!(
        measured(&c, "n1"),
        json!({"used": false, "reason": "the cluster file has no NodeMetrics for this node"})
    );
}

#[tokio::test]
async fn the_planner_places_a_gang_on_the_idle_node() {
    let c = cluster();
    c.gang("duo", 2, "default", "d", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    for name in ["d0", "d1"] {
        let pod = c.pod(name).await.unwrap();
        let node = pod.metadata.annotations.unwrap()["hami.io/vgpu-node"].clone();
        assert_eq!(node, "n2", "{name}");
    }
}

#[tokio::test]
async fn without_the_plugin_nothing_is_shown_or_judged() {
    let c = cluster();
    c.s.set_gang_conf(crate::volcano::conf::SchedulerConf::default());
    let (chosen, _) = filter(&c, &plain_pod("p"), &["n1", "n2"]).await;
    assert_eq!(chosen, ["n1"]);
    let state = c.s.debug_state();
    assert!(state.get("nodeMetrics").is_none());
    assert!(state["nodes"][0].get("measuredUsage").is_none());
}
