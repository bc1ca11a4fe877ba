//! The kube-scheduler extender protocol.

pub mod node_names;
pub mod wire;
