//! `simulate --from-cluster`: a read-only snapshot of a live cluster to replay
//! against — its GPU nodes and what runs on them, quotas, priorities, disruption
//! budgets, Volcano's Queues, PodGroups and HyperNodes, and nodes' measured usage.
//! Only `list` calls are made; nothing is written.
//!
//! The objects go through the cluster-file reader, so a snapshot is read exactly
//! as a cluster file holding the same objects would be.

use crate::cluster::file::{ClusterObject, visit};
use anyhow::Context;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

/// What is listed: group, version, kind, plural; and whether the cluster may
/// lack it (an API not installed: Volcano's CRDs, metrics-server).
const LISTED: [(&str, &str, &str, &str, bool); 9] = [
    ("", "v1", "Node", "nodes", false),
    ("", "v1", "Pod", "pods", false),
    ("", "v1", "ResourceQuota", "resourcequotas", false),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        true,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    ("scheduling.volcano.sh", "v1beta1", "Queue", "queues", true),
    (
        "scheduling.volcano.sh",
        "v1beta1",
        "PodGroup",
        "podgroups",
        true,
    ),
    (
        "topology.volcano.sh",
        "v1alpha1",
        "HyperNode",
        "hypernodes",
        true,
    ),
    ("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", true),
];

/// Lists the cluster's objects and reads them as a cluster file.
pub async fn snapshot(client: Client) -> anyhow::Result<Vec<ClusterObject>> {
    let mut items: Vec<Value> = Vec::new();
    for (group, version, kind, plural, optional) in LISTED {
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        let resource = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.clone(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(e) if optional => {
                tracing::info!(kind, error = %e, "not in the snapshot");
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("list {plural}")),
        };
        for object in list.items {
            let mut value = serde_json::to_value(&object).context("encode a listed object")?;
            if kind == "Pod" && !holds_a_node(&value) {
                // Pods still waiting are the live scheduler's; the replay brings
                // its own.
                continue;
            }
            value["kind"] = json!(kind);
            value["apiVersion"] = json!(api_version);
            items.push(value);
        }
    }
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))?;
    let mut objects = Vec::new();
    visit(&text, |o| objects.push(o)).context("read the snapshot")?;
    Ok(objects)
}

/// Whether the pod is bound and not finished: it holds what it was given.
fn holds_a_node(pod: &Value) -> bool {
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    bound && !finished
}
