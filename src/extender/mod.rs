//! The kube-scheduler extender protocol.

pub mod node_names;
pub mod node_object;
pub mod wire;
