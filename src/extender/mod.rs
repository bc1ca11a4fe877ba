//! The kube-scheduler extender protocol.

pub mod wire;
