//! nodegroup through the scheduler: `/filter`'s own node choice and the planner
//! judge a queue's pods by the same node-group rules, follow a Queue as soon as it
//! changes, and leave pods outside queue scheduling alone.

use super::GangConfig;
use super::gang_tests::{Cluster, gpu_node, member, podgroup, queue};
use crate::extender::node_names::NodeNames;
use crate::node_labels::NODE_GROUP;
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
