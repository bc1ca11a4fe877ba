//! The kube-scheduler extender protocol.

pub mod format_verbs;
pub mod node_names;
pub mod node_object;
pub mod wire;
