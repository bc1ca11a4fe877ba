//! A node's capacity and use of one resource, as the node-scoring plugins read it
//! (binpack, resource-strategy-fit), so that every plugin weighs a node by the same
//! figures.
//!
//! The vGPU dimensions come from the node's registered GPUs and what this
//! scheduler's ledger holds on them: `nvidia.com/gpu` counts vGPU slots (each GPU's
//! split count), `nvidia.com/gpumem` MiB and `nvidia.com/gpucores` percent. Any
//! other resource comes from the node's allocatable and the requests of the pods
//! bound to it.

use crate::placement::NodeFacts;
use crate::resources::VgpuDims;

/// `(capacity, used)` of `resource` on the node, in milli-units.
pub fn capacity_and_used(resource: &str, node: &NodeFacts<'_>, dims: &VgpuDims) -> (f64, f64) {
    let gpus = || node.gpus.devices.iter().zip(node.gpus.usage);
    if resource == dims.count {
        let cap: u64 = gpus().map(|(d, _)| u64::from(d.count)).sum();
        let used: u64 = gpus().map(|(_, u)| u64::from(u.used)).sum();
        (cap as f64 * 1000.0, used as f64 * 1000.0)
    } else if resource == dims.memory {
        let cap: u64 = gpus().map(|(d, _)| d.devmem).sum();
        let used: u64 = gpus().map(|(_, u)| u.usedmem).sum();
        (cap as f64 * 1000.0, used as f64 * 1000.0)
    } else if resource == dims.cores {
        let cap: u64 = gpus().map(|(d, _)| u64::from(d.devcore)).sum();
        let used: u64 = gpus().map(|(_, u)| u64::from(u.usedcores)).sum();
        (cap as f64 * 1000.0, used as f64 * 1000.0)
    } else {
        (
            node.allocatable.get(resource) as f64,
            node.requested.get(resource) as f64,
        )
    }
}
