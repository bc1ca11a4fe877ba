//! kube-scheduler extender wire types (`k8s.io/kube-scheduler/extender/v1`).
//!
//! The Go structs carry no JSON tags, so kube-scheduler sends PascalCase keys; Go's
//! decoder is case-insensitive, so HAMi's tests send lowercase. We accept PascalCase,
//! camelCase and lowercase, treat `null` like a missing field, and answer PascalCase.

use super::format_verbs;
use super::node_names::NodeNames;
use super::node_object::NodeObject;
use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// A list of nodes as kube-scheduler sends it (a NodeList whose type fields may be
/// empty).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeItems {
    /// The nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub items: Vec<NodeObject>,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Arguments of `/filter` and `/prioritize`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ExtenderArgs {
    /// The pod being scheduled.
    #[serde(
        default,
        rename = "Pod",
        alias = "pod",
        deserialize_with = "crate::gang::scheduling_group::deserialize_optional_pod"
    )]
    pub pod: Option<Pod>,
    /// Candidate nodes as full objects (`nodeCacheCapable: false`).
    #[serde(default, rename = "Nodes", alias = "nodes")]
    pub nodes: Option<NodeItems>,
    /// Candidate node names (`nodeCacheCapable: true`).
    #[serde(
        default,
        rename = "NodeNames",
        alias = "nodenames",
        alias = "nodeNames"
    )]
    pub node_names: Option<NodeNames>,
}

impl ExtenderArgs {
    /// Names of the candidate nodes, from `NodeNames` or else from `Nodes`.
    pub fn candidate_names(&self) -> Cow<'_, NodeNames> {
        match (&self.node_names, &self.nodes) {
            (Some(names), _) => Cow::Borrowed(names),
            (None, Some(nodes)) => {
                Cow::Owned(nodes.items.iter().filter_map(NodeObject::name).collect())
            }
            (None, None) => Cow::Owned(NodeNames::default()),
        }
    }
}

/// Answer of `/filter`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExtenderFilterResult {
    /// Surviving nodes as objects (when the request carried objects).
    #[serde(
        rename = "Nodes",
        alias = "nodes",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub nodes: Option<NodeItems>,
    /// Surviving node names (when the request carried names).
    #[serde(
        rename = "NodeNames",
        alias = "nodenames",
        alias = "nodeNames",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub node_names: Option<Vec<String>>,
    /// Rejected nodes and why (preemption may help).
    #[serde(
        rename = "FailedNodes",
        alias = "failedNodes",
        alias = "failednodes",
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "format_verbs::serialize_reasons",
        default
    )]
    pub failed_nodes: BTreeMap<String, String>,
    /// Rejected nodes preemption cannot help.
    #[serde(
        rename = "FailedAndUnresolvableNodes",
        alias = "failedAndUnresolvableNodes",
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "format_verbs::serialize_reasons",
        default
    )]
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// Non-empty when the call itself failed.
    #[serde(
        rename = "Error",
        alias = "error",
        skip_serializing_if = "String::is_empty",
        serialize_with = "format_verbs::serialize_text",
        default
    )]
    pub error: String,
}

impl PartialEq for NodeItems {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl ExtenderFilterResult {
    /// A failed call.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
            ..Default::default()
        }
    }
}

/// The answer of a verb whose call failed, `{"Error": "..."}` with HTTP 200: the
/// shape `/filter` and `/bind` answer their errors in, so `/prioritize` (whose
/// success is a bare array) answers its errors the same way. kube-scheduler
/// ignores a failed prioritize call either way; a client reads one shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtenderError {
    /// What went wrong.
    #[serde(
        rename = "Error",
        alias = "error",
        serialize_with = "format_verbs::serialize_text"
    )]
    pub error: String,
}

impl ExtenderError {
    /// A failed call.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
        }
    }
}

/// One node's score in a `/prioritize` answer (a bare JSON array of these).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostPriority {
    /// Node name.
    #[serde(rename = "Host", alias = "host")]
    pub host: String,
    /// 0..=10, higher is preferred.
    #[serde(rename = "Score", alias = "score")]
    pub score: i64,
}

/// Arguments of `/bind`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ExtenderBindingArgs {
    /// Pod name.
    #[serde(default, rename = "PodName", alias = "podName", alias = "podname")]
    pub pod_name: Option<String>,
    /// Pod namespace.
    #[serde(
        default,
        rename = "PodNamespace",
        alias = "podNamespace",
        alias = "podnamespace"
    )]
    pub pod_namespace: Option<String>,
    /// Pod UID (precondition of the Binding).
    #[serde(
        default,
        rename = "PodUID",
        alias = "podUID",
        alias = "poduid",
        alias = "podUid"
    )]
    pub pod_uid: Option<String>,
    /// Target node.
    #[serde(default, rename = "Node", alias = "node")]
    pub node: Option<String>,
}

/// Answer of `/bind`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtenderBindingResult {
    /// Non-empty when binding failed.
    #[serde(
        rename = "Error",
        alias = "error",
        skip_serializing_if = "String::is_empty",
        serialize_with = "format_verbs::serialize_text",
        default
    )]
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pascal_and_lower_case_requests_decode() {
        let pascal = r#"{"Pod":{"metadata":{"name":"p","uid":"u"},"spec":{"containers":[]}},"Nodes":null,"NodeNames":["a","b"]}"#;
        let args: ExtenderArgs = serde_json::from_str(pascal).unwrap();
        assert_eq!(args.node_names.unwrap().to_vec(), vec!["a", "b"]);
        assert_eq!(args.pod.unwrap().metadata.name.as_deref(), Some("p"));
        let lower = r#"{"pod":{"metadata":{"name":"p"}},"nodenames":["a"]}"#;
        let args: ExtenderArgs = serde_json::from_str(lower).unwrap();
        assert_eq!(args.node_names.unwrap().to_vec(), vec!["a"]);
        let nodes = r#"{"Pod":null,"Nodes":{"metadata":{},"items":[{"metadata":{"name":"n"}}]}}"#;
        let args: ExtenderArgs = serde_json::from_str(nodes).unwrap();
        assert!(args.pod.is_none());
        assert_eq!(args.nodes.unwrap().items.len(), 1);
        let bind = r#"{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"}"#;
        let b: ExtenderBindingArgs = serde_json::from_str(bind).unwrap();
        assert_eq!(b.pod_uid.as_deref(), Some("u"));
        let b: ExtenderBindingArgs =
            serde_json::from_str(r#"{"podName":"p","podNamespace":"ns","podUID":"u","node":"n"}"#)
                .unwrap();
        assert_eq!(b.node.as_deref(), Some("n"));
    }

    #[test]
    fn answers_are_pascal_case_without_empty_fields() {
        let r = ExtenderFilterResult {
            node_names: Some(vec!["a".into()]),
            ..Default::default()
        };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"NodeNames":["a"]}"#);
        assert_eq!(
            serde_json::to_string(&ExtenderBindingResult::default()).unwrap(),
            "{}"
        );
        let p = vec![HostPriority {
            host: "a".into(),
            score: 3,
        }];
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"[{"Host":"a","Score":3}]"#
        );
    }
}
