//! What a node says about who may run on it: its labels, taints and cordon. This
//! is the one place a node's labels and taints are kept. The node's entry in the
//! load book holds it, set from each Node event, so every reader (kube-scheduler's
//! node filters and scores in the planner, nodegroup in `/filter` and in the
//! planner, inter-pod affinity's topology domains, HyperNode label selectors,
//! broken pins) sees the same labels after one update.
//!
//! Held behind an `Arc`: a planning session takes every node's traits by
//! reference count, and an unchanged Node event keeps the same `Arc` (so sessions
//! and queueing hints see the node as unchanged). A node with no labels, no taints
//! and no cordon shares one empty value instead of allocating its own.

use k8s_openapi::api::core::v1::{Node, Taint};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

/// A node's labels, taints and cordon.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeTraits {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
}

/// The labels of a node that has none, or that was never seen.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// The traits every node without labels, taints or cordon shares.
static PLAIN: LazyLock<Arc<NodeTraits>> = LazyLock::new(|| Arc::new(NodeTraits::default()));

impl NodeTraits {
    /// The traits of a Node object.
    pub fn of(node: &Node) -> Self {
        let spec = node.spec.as_ref();
        Self {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        }
    }

    /// The traits of a Node object, shared: `current` again when the node still
    /// says the same (most Node events change only its status), the one shared
    /// empty value when it has no labels, taints or cordon, and a new value only
    /// when something changed. Nothing is copied to find out.
    pub fn shared(node: &Node, current: Option<&Arc<NodeTraits>>) -> Arc<NodeTraits> {
        if let Some(current) = current
            && current.describes(node)
        {
            return current.clone();
        }
        if PLAIN.describes(node) {
            return PLAIN.clone();
        }
        Arc::new(Self::of(node))
    }

    /// Whether these are the traits of `node`.
    fn describes(&self, node: &Node) -> bool {
        let spec = node.spec.as_ref();
        let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        let taints = spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
        let unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.labels == *labels && self.taints == taints && self.unschedulable == unschedulable
    }

    /// A label's value; `None` when the node does not have it (an empty value is
    /// a value: label selectors read a label's presence).
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// The labels of a node's traits, or none for a node never seen (topology
    /// domains and label selectors treat both as a node without labels).
    pub fn labels_of(traits: Option<&NodeTraits>) -> &BTreeMap<String, String> {
        traits.map_or(&NO_LABELS, |t| &t.labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_unchanged_node_keeps_its_traits_and_a_changed_one_gets_new_ones() {
        let labelled = node(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
        }));
        let first = NodeTraits::shared(&labelled, None);
        assert_eq!(*first, NodeTraits::of(&labelled));
        assert!(Arc::ptr_eq(
            &first,
            &NodeTraits::shared(&labelled, Some(&first))
        ));
        for changed in [
            serde_json::json!({"metadata": {"name": "n1", "labels": {"zone": "b"}},
                "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
            serde_json::json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}}),
            serde_json::json!({"metadata": {"name": "n1", "labels": {"zone": "a"}},
                "spec": {"unschedulable": true,
                    "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
        ] {
            let changed = node(changed);
            let next = NodeTraits::shared(&changed, Some(&first));
            assert_eq!(*next, NodeTraits::of(&changed));
        }
    }

    #[test]
    fn nodes_without_labels_taints_or_cordon_share_one_value() {
        let a = NodeTraits::shared(&node(serde_json::json!({"metadata": {"name": "a"}})), None);
        let b = NodeTraits::shared(
            &node(serde_json::json!({"metadata": {"name": "b", "labels": {}}, "spec": {}})),
            None,
        );
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(*a, NodeTraits::default());
        let cordoned = NodeTraits::shared(
            &node(serde_json::json!({"metadata": {"name": "c"}, "spec": {"unschedulable": true}})),
            None,
        );
        assert!(cordoned.unschedulable);
        assert!(NodeTraits::labels_of(None).is_empty());
        assert_eq!(cordoned.label("zone"), None);
    }
}
