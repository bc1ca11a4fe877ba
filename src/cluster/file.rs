//! Loading a cluster from a file: a multi-document YAML (or JSON) of ordinary
//! Kubernetes objects, or a `v1 List` of them.

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::Deserialize;
use std::path::Path;

/// The objects a cluster file holds.
#[derive(Debug, Default, Clone)]
pub struct ClusterObjects {
    /// Nodes, with HAMi register annotations on GPU nodes.
    pub nodes: Vec<Node>,
    /// Pods, with or without HAMi annotations.
    pub pods: Vec<Pod>,
    /// ResourceQuotas limiting vGPU memory and cores per namespace.
    pub quotas: Vec<ResourceQuota>,
    /// PodGroups, Volcano's (`scheduling.volcano.sh`) and Kubernetes' own
    /// (`scheduling.k8s.io`), as JSON.
    pub podgroups: Vec<serde_json::Value>,
    /// Workloads (`scheduling.k8s.io`), as JSON: what their PodGroups leave
    /// unsaid is taken from their templates.
    pub workloads: Vec<serde_json::Value>,
    /// Volcano Queues (`scheduling.volcano.sh`), as JSON.
    pub queues: Vec<serde_json::Value>,
    /// PriorityClasses (`scheduling.k8s.io`): job and pod priorities.
    pub priority_classes: Vec<PriorityClass>,
    /// PodDisruptionBudgets (`policy/v1`): what preemption and reclaim may evict.
    pub budgets: Vec<PodDisruptionBudget>,
    /// Volcano HyperNodes (`topology.volcano.sh`), as JSON.
    pub hyper_nodes: Vec<serde_json::Value>,
    /// NodeMetrics (`metrics.k8s.io`): nodes' measured usage, as JSON.
    pub node_metrics: Vec<serde_json::Value>,
    /// Namespaces: their labels, for pod affinity's namespace selectors.
    pub namespaces: Vec<Namespace>,
}

/// Why a cluster file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ClusterFileError {
    #[error("cannot read cluster file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cluster file document {document}: {problem}")]
    Invalid { document: usize, problem: String },
}

/// One object of a cluster file.
#[derive(Debug, Clone)]
pub enum ClusterObject {
    /// A Node.
    Node(Box<Node>),
    /// A Pod.
    Pod(Box<Pod>),
    /// A ResourceQuota.
    Quota(Box<ResourceQuota>),
    /// A PodGroup, Volcano's or Kubernetes' own.
    PodGroup(Box<serde_json::Value>),
    /// A Workload (`scheduling.k8s.io`), the template of Kubernetes' own PodGroups.
    Workload(Box<serde_json::Value>),
    /// A Volcano Queue.
    Queue(Box<serde_json::Value>),
    /// A PriorityClass.
    PriorityClass(Box<PriorityClass>),
    /// A PodDisruptionBudget.
    DisruptionBudget(Box<PodDisruptionBudget>),
    /// A Volcano HyperNode.
    HyperNode(Box<serde_json::Value>),
    /// A node's measured usage (what metrics-server serves).
    NodeMetrics(Box<serde_json::Value>),
    /// A Namespace.
    Namespace(Box<Namespace>),
}

/// Reads a cluster file and hands each object to `sink` as soon as it is decoded,
/// so a file with tens of thousands of pods never exists as typed objects all at
/// once (a typed Pod takes several KiB).
pub fn visit_file(path: &Path, sink: impl FnMut(ClusterObject)) -> Result<(), ClusterFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ClusterFileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    visit(&text, sink)
}

/// [`visit_file`] over text.
pub fn visit(text: &str, mut sink: impl FnMut(ClusterObject)) -> Result<(), ClusterFileError> {
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let invalid = |problem: String| ClusterFileError::Invalid {
            document: i + 1,
            problem,
        };
        let value = serde_json::Value::deserialize(document)
            .map_err(|e| invalid(format!("not valid YAML: {e}")))?;
        if value.is_null() {
            continue;
        }
        decode(value, &mut sink).map_err(invalid)?;
    }
    Ok(())
}

fn decode(
    mut value: serde_json::Value,
    sink: &mut impl FnMut(ClusterObject),
) -> Result<(), String> {
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .ok_or("object has no kind")?
        .to_string();
    let named = |v: &serde_json::Value| {
        v.pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("<unnamed>")
            .to_string()
    };
    match kind.as_str() {
        "Node" => {
            let name = named(&value);
            sink(ClusterObject::Node(
                serde_json::from_value(value).map_err(|e| format!("Node {name}: {e}"))?,
            ));
        }
        "Pod" => {
            let name = named(&value);
            let pod = crate::gang::scheduling_group::pod_from_value(&value)
                .map_err(|e| format!("Pod {name}: {e}"))?;
            sink(ClusterObject::Pod(Box::new(pod)));
        }
        "ResourceQuota" => {
            let name = named(&value);
            sink(ClusterObject::Quota(
                serde_json::from_value(value).map_err(|e| format!("ResourceQuota {name}: {e}"))?,
            ));
        }
        "PriorityClass" if in_group(&value, "scheduling.k8s.io/") => {
            let name = named(&value);
            sink(ClusterObject::PriorityClass(
                serde_json::from_value(value).map_err(|e| format!("PriorityClass {name}: {e}"))?,
            ));
        }
        "PodDisruptionBudget" if in_group(&value, "policy/") => {
            let name = named(&value);
            sink(ClusterObject::DisruptionBudget(
                serde_json::from_value(value)
                    .map_err(|e| format!("PodDisruptionBudget {name}: {e}"))?,
            ));
        }
        // Kubernetes' own PodGroups travel with Volcano's; the apiVersion tells
        // them apart when they are applied.
        "PodGroup" if in_group(&value, "scheduling.k8s.io/") => {
            sink(ClusterObject::PodGroup(Box::new(value)));
        }
        "Workload" if in_group(&value, "scheduling.k8s.io/") => {
            sink(ClusterObject::Workload(Box::new(value)));
        }
        "PodGroup" | "Queue" if in_group(&value, "scheduling.volcano.sh/") => {
            if kind == "PodGroup" {
                sink(ClusterObject::PodGroup(Box::new(value)));
            } else {
                sink(ClusterObject::Queue(Box::new(value)));
            }
        }
        "HyperNode" if in_group(&value, "topology.volcano.sh/") => {
            sink(ClusterObject::HyperNode(Box::new(value)));
        }
        "NodeMetrics" if in_group(&value, "metrics.k8s.io/") => {
            sink(ClusterObject::NodeMetrics(Box::new(value)));
        }
        "Namespace" if value.get("apiVersion").and_then(|v| v.as_str()) == Some("v1") => {
            let name = named(&value);
            sink(ClusterObject::Namespace(
                serde_json::from_value(value).map_err(|e| format!("Namespace {name}: {e}"))?,
            ));
        }
        k if k == "List" || k.ends_with("List") => {
            let items = match value.get_mut("items").map(serde_json::Value::take) {
                Some(serde_json::Value::Array(items)) => items,
                _ => Vec::new(),
            };
            let list_version = value.get("apiVersion").cloned();
            for mut item in items {
                // Items of a typed list (NodeList, NodeMetricsList) may omit their
                // own kind and apiVersion: they are the list's.
                if k != "List"
                    && let Some(obj) = item.as_object_mut()
                {
                    if !obj.contains_key("kind") {
                        obj.insert(
                            "kind".into(),
                            serde_json::Value::String(k.trim_end_matches("List").into()),
                        );
                    }
                    if let Some(version) = &list_version
                        && !obj.contains_key("apiVersion")
                    {
                        obj.insert("apiVersion".into(), version.clone());
                    }
                }
                decode(item, sink)?;
            }
        }
        // Other objects (Deployments, Services...) may sit in the same file.
        _ => {}
    }
    Ok(())
}

/// Whether an object's `apiVersion` is in this API group (`group/`): other
/// groups may have kinds with the same names.
fn in_group(value: &serde_json::Value, group: &str) -> bool {
    value
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .is_some_and(|v| v.starts_with(group))
}

impl ClusterObjects {
    /// Loads a cluster file into memory as typed objects.
    pub fn load(path: &Path) -> Result<Self, ClusterFileError> {
        let mut objects = ClusterObjects::default();
        visit_file(path, |o| objects.push(o))?;
        Ok(objects)
    }

    /// Parses cluster file text.
    pub fn parse(text: &str) -> Result<Self, ClusterFileError> {
        let mut objects = ClusterObjects::default();
        visit(text, |o| objects.push(o))?;
        Ok(objects)
    }

    fn push(&mut self, object: ClusterObject) {
        match object {
            ClusterObject::Node(n) => self.nodes.push(*n),
            ClusterObject::Pod(p) => self.pods.push(*p),
            ClusterObject::Quota(q) => self.quotas.push(*q),
            ClusterObject::PodGroup(g) => self.podgroups.push(*g),
            ClusterObject::Workload(w) => self.workloads.push(*w),
            ClusterObject::Queue(q) => self.queues.push(*q),
            ClusterObject::PriorityClass(c) => self.priority_classes.push(*c),
            ClusterObject::DisruptionBudget(b) => self.budgets.push(*b),
            ClusterObject::HyperNode(h) => self.hyper_nodes.push(*h),
            ClusterObject::NodeMetrics(m) => self.node_metrics.push(*m),
            ClusterObject::Namespace(n) => self.namespaces.push(*n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists_load() {
        let text = r#"
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p1, namespace: default, uid: u1}
  spec: {containers: [{name: c}]}
- apiVersion: v1
  kind: ResourceQuota
  metadata: {name: q, namespace: team}
  spec: {hard: {limits.nvidia.com/gpumem: "1000"}}
---
apiVersion: v1
kind: NodeList
items:
- metadata: {name: n2}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
"#;
        let objects = ClusterObjects::parse(text).unwrap();
        assert_eq!(objects.nodes.len(), 2);
        assert_eq!(objects.pods.len(), 1);
        assert_eq!(objects.quotas.len(), 1);
        assert_eq!(objects.namespaces.len(), 1);
        assert_eq!(objects.namespaces[0].metadata.name.as_deref(), Some("team"));
    }

    #[test]
    fn hyper_nodes_load_as_volcano_writes_them() {
        let text = r#"
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-a}
spec:
  tier: 1
  members:
  - {type: Node, selector: {regexMatch: {pattern: "^gpu-a"}}}
---
apiVersion: example.com/v1
kind: HyperNode
metadata: {name: someone-elses}
"#;
        let objects = ClusterObjects::parse(text).unwrap();
        assert_eq!(objects.hyper_nodes.len(), 1);
        assert_eq!(objects.hyper_nodes[0]["metadata"]["name"], "leaf-a");
    }

    #[test]
    fn node_metrics_load_alone_or_as_metrics_servers_list() {
        let text = r#"
apiVersion: metrics.k8s.io/v1beta1
kind: NodeMetrics
metadata: {name: n1}
usage: {cpu: "60", memory: 100Gi}
---
apiVersion: metrics.k8s.io/v1beta1
kind: NodeMetricsList
metadata: {}
items:
- metadata: {name: n2}
  timestamp: "2025-06-01T10:00:03Z"
  window: 20.05s
  usage: {cpu: 3250123456n, memory: 83886080Ki}
---
apiVersion: example.com/v1
kind: NodeMetrics
metadata: {name: someone-elses}
"#;
        let objects = ClusterObjects::parse(text).unwrap();
        let names: Vec<&str> = objects
            .node_metrics
            .iter()
            .filter_map(|m| m.pointer("/metadata/name")?.as_str())
            .collect();
        assert_eq!(names, ["n1", "n2"]);
    }

    #[test]
    fn errors_name_the_document() {
        let err =
            ClusterObjects::parse("kind: Node\nmetadata: {name: a}\n---\nfoo: [").unwrap_err();
        assert!(
            err.to_string().starts_with("cluster file document 2"),
            "{err}"
        );
        let err = ClusterObjects::parse("kind: Pod\nmetadata: {name: p}\nspec: 3\n").unwrap_err();
        assert!(err.to_string().contains("Pod p"), "{err}");
    }
}
