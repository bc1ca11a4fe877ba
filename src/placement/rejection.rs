//! Why a node was refused for a pod: one typed value, rendered in HAMi's words
//! only where it leaves the scheduler (extender answers, events, messages).

use crate::fit::FitRejection;
use std::collections::BTreeMap;
use std::fmt;

/// Why one node cannot take the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRejection {
    /// The node's GPUs cannot be used at all (not registered, registration
    /// invalid, device plugin not ready); low-cardinality words.
    Unusable(&'static str),
    /// A plugin's predicate ruled the node out.
    Predicate(String),
    /// The pod does not fit the node's GPUs.
    Fit(FitRejection),
}

impl fmt::Display for NodeRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRejection::Unusable(reason) => f.write_str(reason),
            NodeRejection::Predicate(reason) => f.write_str(reason),
            NodeRejection::Fit(fit) => fit.fmt(f),
        }
    }
}

impl std::error::Error for NodeRejection {}

impl From<FitRejection> for NodeRejection {
    fn from(fit: FitRejection) -> Self {
        NodeRejection::Fit(fit)
    }
}

/// Why each candidate was refused: node name → reason.
pub type NodeRejections = BTreeMap<String, NodeRejection>;

/// The reasons as kube-scheduler reads them (node name → words).
pub fn in_words(rejections: NodeRejections) -> BTreeMap<String, String> {
    rejections
        .into_iter()
        .map(|(node, reason)| (node, reason.to_string()))
        .collect()
}
