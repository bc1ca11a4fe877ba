//! The node labels plugins read, kept with each node's registration so that the
//! predicates and node scores of `/filter` and of planning sessions see the same
//! labels.
//!
//! Only the labels some plugin reads are kept. A node carries dozens of labels
//! (topology, GPU feature discovery, cloud provider), every full-Node `/filter`
//! refreshes each candidate's registration, and a planning session shares the
//! registrations of thousands of nodes: keeping all of them would cost memory and
//! copies for labels nobody reads. A plugin that reads another label adds it to
//! [`KEPT`].

use k8s_openapi::api::core::v1::Node;

/// Volcano's node-group label: the nodegroup plugin matches its value against a
/// Queue's `spec.affinity`.
pub const NODE_GROUP: &str = "volcano.sh/nodegroup-name";

/// The labels kept, in key order.
pub const KEPT: &[&str] = &[NODE_GROUP];

/// A node's labels among [`KEPT`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLabels(Vec<(&'static str, Box<str>)>);

/// No labels.
pub static NO_LABELS: NodeLabels = NodeLabels(Vec::new());

impl NodeLabels {
    /// The kept labels of a Node object.
    pub fn of(node: &Node) -> Self {
        let Some(labels) = node.metadata.labels.as_ref() else {
            return Self::default();
        };
        Self::from_pairs(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// The kept labels among `pairs` (others are dropped).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut kept: Vec<(&'static str, Box<str>)> = pairs
            .into_iter()
            .filter_map(|(k, v)| {
                let key = KEPT.iter().find(|kept| **kept == k)?;
                Some((*key, Box::from(v)))
            })
            .collect();
        kept.sort();
        kept.dedup_by(|a, b| a.0 == b.0);
        Self(kept)
    }

    /// A label's value; `None` when the node does not have it (or it is not kept).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| &**v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_labels_plugins_read() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {
                "kubernetes.io/hostname": "n1",
                "volcano.sh/nodegroup-name": "gpu-pool",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
        }))
        .unwrap();
        let labels = NodeLabels::of(&node);
        assert_eq!(labels.get(NODE_GROUP), Some("gpu-pool"));
        assert_eq!(labels.get("kubernetes.io/hostname"), None);
        assert_eq!(labels, NodeLabels::from_pairs([(NODE_GROUP, "gpu-pool")]));
        // An empty value is a value (Volcano reads the label's presence).
        let empty = NodeLabels::from_pairs([(NODE_GROUP, "")]);
        assert_eq!(empty.get(NODE_GROUP), Some(""));
        assert_eq!(NodeLabels::of(&Node::default()).get(NODE_GROUP), None);
    }
}
