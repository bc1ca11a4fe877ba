//! MIG holds read back from a pod's annotations, checked against what its node
//! registered before they are booked.
//!
//! The device list says which GPUs a pod holds; only `hami.io/vgpu-mig-allocations`
//! says which slices of a MIG GPU. When the two disagree with the node:
//!
//! * a device on a MIG GPU with no instance (the annotation is missing, unreadable
//!   or silent about it) is booked as holding the whole GPU: its slices are
//!   unknown, so nothing new is placed on that GPU until the pod is gone. HAMi
//!   marks such a GPU unhealthy for the same reason; here the GPU comes back by
//!   itself when the pod leaves.
//! * an instance on a GPU that is not in MIG mode has no slices to hold: the
//!   device is booked as an ordinary shared one.
//!
//! Either way the pod is reported (see `claims`), never double-booked.

use crate::device::mig::MigHold;
use crate::ledger::{NodeEntry, PodEntry};

/// Brings `entry`'s MIG holds in line with `node`'s registration; returns what
/// had to change, in words, for the report. A node not registered (yet) has
/// nothing to check against.
pub(crate) fn reconcile(node: Option<&NodeEntry>, entry: &mut PodEntry) -> Vec<String> {
    let Some(node) = node else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for device in entry.devices.iter_mut().flatten() {
        let Some(gpu) = node.devices.iter().find(|d| d.id == device.uuid) else {
            continue;
        };
        match (gpu.is_mig(), device.mig.is_some()) {
            (true, false) => {
                device.mig = Some(Box::new(MigHold::Unplaced));
                problems.push(format!(
                    "GPU {} is in MIG mode but no MIG instance is reserved for the pod on it; the whole GPU is kept for the pod",
                    gpu.id
                ));
            }
            (false, true) => {
                device.mig = None;
                problems.push(format!(
                    "a MIG instance is reserved on GPU {}, which is not in MIG mode; booked as a shared GPU",
                    gpu.id
                ));
            }
            _ => {}
        }
    }
    if !problems.is_empty() {
        problems.dedup();
        entry.recompute_usage();
    }
    problems
}
