//! `simulate --from-cluster`: a read-only snapshot of a live cluster to replay
//! against — its GPU nodes and what runs on them, quotas, priorities, disruption
//! budgets, Volcano's Queues, PodGroups and HyperNodes, Kubernetes' own PodGroups
//! and Workloads, and nodes' measured usage.
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

/// Versions of Kubernetes' own gang API (`scheduling.k8s.io` PodGroups and
/// Workloads) tried in turn: the first the cluster serves is listed, so a
/// cluster serving both is not read twice.
const NATIVE_GANG_VERSIONS: [&str; 2] = ["v1beta1", "v1alpha2"];

/// Lists the cluster's objects and reads them as a cluster file.
pub async fn snapshot(client: Client) -> anyhow::Result<Vec<ClusterObject>> {
    let mut items: Vec<Value> = Vec::new();
    for (group, version, kind, plural, optional) in LISTED {
        match list(&client, group, version, kind, plural).await {
            Ok(listed) => items.extend(listed),
            Err(e) if optional => tracing::info!(kind, error = %e, "not in the snapshot"),
            Err(e) => return Err(e).with_context(|| format!("list {plural}")),
        }
    }
    items.extend(native_gangs(&client).await);
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))?;
    let mut objects = Vec::new();
    visit(&text, |o| objects.push(o)).context("read the snapshot")?;
    Ok(objects)
}

/// Kubernetes' own PodGroups and Workloads, in the first version of their API
/// the cluster serves; none when it serves neither.
async fn native_gangs(client: &Client) -> Vec<Value> {
    for version in NATIVE_GANG_VERSIONS {
        let Ok(mut items) = list(
            client,
            "scheduling.k8s.io",
            version,
            "PodGroup",
            "podgroups",
        )
        .await
        else {
            continue;
        };
        match list(
            client,
            "scheduling.k8s.io",
            version,
            "Workload",
            "workloads",
        )
        .await
        {
            Ok(workloads) => items.extend(workloads),
            Err(e) => tracing::info!(version, error = %e, "Workloads not in the snapshot"),
        }
        return items;
    }
    tracing::info!("scheduling.k8s.io PodGroups not served: none in the snapshot");
    Vec::new()
}

/// One kind's objects as a cluster file would hold them (kind and apiVersion
/// set); pods still waiting are left out.
async fn list(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Result<Vec<Value>, kube::Error> {
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
    let list = api.list(&ListParams::default()).await?;
    let mut items = Vec::with_capacity(list.items.len());
    for object in list.items {
        let Ok(mut value) = serde_json::to_value(&object) else {
            continue;
        };
        if kind == "Pod" && !holds_a_node(&value) {
            // Pods still waiting are the live scheduler's; the replay brings
            // its own.
            continue;
        }
        value["kind"] = json!(kind);
        value["apiVersion"] = json!(api_version);
        items.push(value);
    }
    Ok(items)
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
