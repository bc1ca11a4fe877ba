//! One Node of a `Nodes` list (kube-scheduler with `nodeCacheCapable: false`).
//!
//! kube-scheduler sends every candidate as a full object, about 3 KiB each with its
//! images, conditions and system info, and takes back the objects of the nodes
//! that pass. Scheduling reads a handful of fields. Decoding every object into a
//! complete `Node` (hundreds of strings allocated and freed per node) was most of a
//! full-object `/filter`; so the object is kept as the JSON text it came in, echoed
//! back unchanged, and only the fields scheduling reads are decoded from it.

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// A node as sent, plus what scheduling reads of it.
#[derive(Debug, Clone)]
pub struct NodeObject {
    /// The object exactly as received.
    raw: Box<RawValue>,
    /// `metadata.name`, `resourceVersion`, `annotations` and
    /// `status.allocatable`; every other field is left empty. Labels are not
    /// read: a node's labels come from the watch alone (`node_traits`).
    seen: Node,
}

impl NodeObject {
    fn from_raw(raw: Box<RawValue>) -> Result<Self, serde_json::Error> {
        let fields: SeenFields = serde_json::from_str(raw.get())?;
        Ok(Self {
            raw,
            seen: fields.into_node(),
        })
    }

    pub fn name(&self) -> Option<&str> {
        self.seen.metadata.name.as_deref()
    }

    /// The fields scheduling reads, as a `Node` (the rest left empty).
    pub fn node(&self) -> &Node {
        &self.seen
    }
}

impl PartialEq for NodeObject {
    fn eq(&self, other: &Self) -> bool {
        self.raw.get() == other.raw.get()
    }
}

impl Serialize for NodeObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for NodeObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Self::from_raw(raw).map_err(|e| D::Error::custom(format!("node object: {e}")))
    }
}

/// The part of a Node that is decoded; unknown fields are skipped without being
/// stored. `null` reads as absent, as in Kubernetes' own decoding.
#[derive(Deserialize)]
struct SeenFields {
    #[serde(default)]
    metadata: Option<SeenMetadata>,
    #[serde(default)]
    status: Option<SeenStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SeenMetadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct SeenStatus {
    #[serde(default)]
    allocatable: Option<BTreeMap<String, Quantity>>,
}

impl SeenFields {
    fn into_node(self) -> Node {
        let metadata = self
            .metadata
            .map_or_else(ObjectMeta::default, |m| ObjectMeta {
                name: m.name,
                resource_version: m.resource_version,
                annotations: m.annotations,
                ..ObjectMeta::default()
            });
        let status = self.status.map(|s| NodeStatus {
            allocatable: s.allocatable,
            ..NodeStatus::default()
        });
        Node {
            metadata,
            status,
            ..Node::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full_node() -> serde_json::Value {
        json!({
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "name": "gpu-a",
                "uid": "7c1e",
                "resourceVersion": "812",
                "labels": {"gpu": "on"},
                "annotations": {"hami.io/node-nvidia-register": "[]"},
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                "capacity": {"cpu": "64"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "images": [{"names": ["registry/x:1"], "sizeBytes": 12}],
                "nodeInfo": {"kubeletVersion": "v1.33.1", "machineID": "m"}
            }
        })
    }

    #[test]
    fn reads_what_scheduling_needs_and_echoes_the_object_unchanged() {
        let text = full_node().to_string();
        let object: NodeObject = serde_json::from_str(&text).expect("decode");
        assert_eq!(object.name(), Some("gpu-a"));
        let seen = object.node();
        assert_eq!(seen.metadata.resource_version.as_deref(), Some("812"));
        assert_eq!(
            seen.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("hami.io/node-nvidia-register"))
                .map(String::as_str),
            Some("[]")
        );
        let allocatable = seen
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .expect("allocatable");
        assert_eq!(
            allocatable.get("nvidia.com/gpu"),
            Some(&Quantity("8".into()))
        );
        assert!(
            seen.spec.is_none(),
            "fields scheduling does not read are not kept"
        );
        let echoed = serde_json::to_string(&object).expect("encode");
        assert_eq!(echoed, text);
        let whole: Node = serde_json::from_str(&echoed).expect("a whole node");
        assert_eq!(
            whole.spec.and_then(|s| s.pod_cidr).as_deref(),
            Some("10.0.0.0/24")
        );
    }

    #[test]
    fn nulls_and_missing_parts_read_as_absent() {
        for text in [
            r#"{}"#,
            r#"{"metadata":null,"status":null}"#,
            r#"{"metadata":{"name":null,"annotations":null},"status":{"allocatable":null}}"#,
        ] {
            let object: NodeObject = serde_json::from_str(text).expect(text);
            assert_eq!(object.name(), None, "{text}");
            assert!(object.node().metadata.annotations.is_none(), "{text}");
        }
    }

    #[test]
    fn a_malformed_node_is_an_error_not_a_default() {
        for text in [
            "5",
            r#"{"metadata":{"name":7}}"#,
            r#"{"metadata":{"annotations":{"a":1}}}"#,
            r#"{"status":{"allocatable":{"cpu":[]}}}"#,
        ] {
            let err = serde_json::from_str::<NodeObject>(text).expect_err(text);
            assert!(err.to_string().contains("node object"), "{text}: {err}");
        }
    }
}
