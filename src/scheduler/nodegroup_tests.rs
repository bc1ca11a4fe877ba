//! nodegroup through the scheduler: `/filter`'s own node choice and the planner
//! judge a queue's pods by the same node-group rules, follow a Queue as soon as it
//! changes, and leave pods outside queue scheduling alone.

use super::GangConfig;
use super::gang_tests::{Cluster, gpu_node, member, podgroup, queue};
use crate::extender::node_names::NodeNames;
use crate::volcano::plugins::nodegroup::NODE_GROUP;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use std::collections::BTreeMap;

const CONF: &str = "actions: enqueue, allocate
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: nodegroup
";

fn labelled(name: &str, group: &str) -> Node {
    let mut node = gpu_node(name, 2);
    node.metadata.labels = Some(BTreeMap::from([(NODE_GROUP.into(), group.into())]));
    node
}

fn requiring(group: &str) -> serde_json::Value {
    json!({"weight": 1, "affinity": {"nodeGroupAffinity":
        {"requiredDuringSchedulingIgnoredDuringExecution": [group]}}})
}

/// A pod of one whole GPU naming `queue` (`None`: outside queue scheduling).
fn pod(name: &str, queue: Option<&str>) -> Pod {
    let mut p = member(name, "unused", 0);
    p.metadata.annotations =
        queue.map(|q| BTreeMap::from([("scheduling.volcano.sh/queue-name".into(), q.to_string())]));
    p.spec.as_mut().unwrap().scheduling_gates = None;
    p
}

/// n1 in `cpu-pool`, n2 in `gpu-pool`, two GPUs each; queue `gpu-queue` requires
/// `gpu-pool`.
fn cluster() -> Cluster {
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], GangConfig::default());
    c.s.apply_node(&labelled("n1", "cpu-pool"));
    c.s.apply_node(&labelled("n2", "gpu-pool"));
    c.s.set_gang_conf(crate::volcano::load_conf(CONF).unwrap());
    c.s.apply_queue(&queue("gpu-queue", requiring("gpu-pool")));
    c
}

fn decide(c: &Cluster, pod: &Pod) -> Option<String> {
    let names: NodeNames = ["n1", "n2"].into_iter().collect();
    c.s.decide(pod, &names).unwrap().map(|(node, _)| node)
}

#[tokio::test]
async fn filter_judges_a_queue_pod_by_its_queues_current_rules() {
    let c = cluster();
    // Both nodes empty: without the rule the smaller name would win.
    assert_eq!(
        decide(&c, &pod("p", Some("gpu-queue"))).as_deref(),
        Some("n2")
    );
    assert_eq!(
        decide(&c, &pod("plain", None)).as_deref(),
        Some("n1"),
        "a pod in no queue is not judged"
    );
    // The Queue changes: the next /filter follows it.
    c.s.apply_queue(&queue("gpu-queue", requiring("cpu-pool")));
    assert_eq!(
        decide(&c, &pod("p", Some("gpu-queue"))).as_deref(),
        Some("n1")
    );
    // The rules survive a configuration reload.
    c.s.set_gang_conf(crate::volcano::load_conf(CONF).unwrap());
    assert_eq!(
        decide(&c, &pod("p", Some("gpu-queue"))).as_deref(),
        Some("n1")
    );
    c.s.forget_queue("gpu-queue");
    assert_eq!(
        decide(&c, &pod("p", Some("gpu-queue"))),
        None,
        "a queue without rules may use no labelled node (strict)"
    );
}

#[tokio::test]
async fn a_gang_is_planned_in_its_group_and_an_extra_member_is_refused_elsewhere() {
    let c = cluster();
    c.s.apply_podgroup(&podgroup("duo", 2, "gpu-queue", json!({})));
    for i in 0..2 {
        c.add(&member(&format!("d{i}"), "duo", i));
    }
    assert_eq!(c.s.run_gang_cycle().await, 1);
    for i in 0..2 {
        let name = format!("d{i}");
        assert_eq!(c.filter(&name).await.unwrap(), ["n2"], "{name}");
        c.bind(&name, "n2").await.unwrap();
    }
    // A third member arrives ungated: n2 is full and n1 is not its queue's.
    let mut extra = member("d2", "duo", 2);
    extra.spec.as_mut().unwrap().scheduling_gates = None;
    c.add(&extra);
    let reason = c.filter("d2").await.unwrap_err();
    assert!(
        reason.contains(
            "queue \"gpu-queue\": node group \"cpu-pool\" is not in its node-group affinity (gpu-pool) (nodegroup)"
        ),
        "{reason}"
    );
}

/// `name` with two GPUs in `group`, with `taints`.
fn tainted(name: &str, group: &str, taints: serde_json::Value) -> Node {
    let mut node = serde_json::to_value(labelled(name, group)).unwrap();
    node["spec"] = json!({"taints": taints});
    serde_json::from_value(node).unwrap()
}

/// A one-member gang in `gpu-queue` whose pod has `tolerations`.
fn gang_of_one(c: &Cluster, name: &str, tolerations: serde_json::Value) {
    c.s.apply_podgroup(&podgroup(name, 1, "gpu-queue", json!({})));
    let mut p = serde_json::to_value(member(&format!("{name}-0"), name, 0)).unwrap();
    p["spec"]["tolerations"] = tolerations;
    c.add(&serde_json::from_value(p).unwrap());
}

#[tokio::test]
async fn one_node_update_moves_the_node_for_nodegroup_and_predicates_in_the_same_cycle() {
    let c = cluster();
    let with_predicates = format!("{CONF}  - name: predicates\n");
    c.s.set_gang_conf(crate::volcano::load_conf(&with_predicates).unwrap());
    // One update each: n1 joins the queue's group and is tainted for it; n2 leaves.
    let taint = json!([{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]);
    c.s.apply_node(&tainted("n1", "gpu-pool", taint));
    c.s.apply_node(&labelled("n2", "cpu-pool"));
    let tolerates = json!([{"key": "dedicated", "operator": "Equal", "value": "ml",
        "effect": "NoSchedule"}]);
    gang_of_one(&c, "tolerant", tolerates);
    gang_of_one(&c, "plain", json!([]));
    c.s.run_gang_cycle().await;
    assert_eq!(
        c.filter("tolerant-0").await.unwrap(),
        ["n1"],
        "nodegroup sees n1's new group"
    );
    assert!(c.gated("plain-0").await);
    let message = c.verdict("ml/plain").message.unwrap_or_default();
    assert!(
        message.contains("untolerated taint {dedicated: ml}")
            && message.contains("node group \"cpu-pool\" is not in its node-group affinity"),
        "predicates see n1's new taint and nodegroup n2's new group: {message}"
    );
}

#[tokio::test]
async fn a_newer_node_object_in_a_full_node_filter_keeps_the_nodes_group() {
    let c = cluster();
    let versioned = |name: &str, group: &str, version: &str| {
        let mut node = labelled(name, group);
        node.metadata.resource_version = Some(version.into());
        node
    };
    c.s.apply_node(&versioned("n1", "cpu-pool", "5"));
    c.s.apply_node(&versioned("n2", "gpu-pool", "5"));
    let p = pod("p", Some("gpu-queue"));
    c.add(&p);
    // kube-scheduler's cache is a step ahead of the watch: its objects are newer.
    let objects =
        json!({"items": [versioned("n1", "cpu-pool", "6"), versioned("n2", "gpu-pool", "6")]});
    let answer =
        c.s.filter(crate::extender::wire::ExtenderArgs {
            pod: Some(p),
            nodes: Some(serde_json::from_value(objects).unwrap()),
            node_names: None,
        })
        .await;
    let chosen: Vec<&str> = answer
        .nodes
        .iter()
        .flat_map(|n| &n.items)
        .filter_map(|o| o.name())
        .collect();
    assert_eq!(chosen, ["n2"], "{answer:?}");
}
