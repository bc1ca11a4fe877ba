//! vgpu-scheduler: a kube-scheduler HTTP extender and mutating admission webhook that
//! places shared-GPU (vGPU) pods on nodes and on specific GPUs, wire-compatible with
//! HAMi's device plugin and annotations.

pub mod device;
pub mod node_lock;
pub mod quantity;
pub mod server;
