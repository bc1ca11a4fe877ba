//! The one pod write of a placement. HAMi writes a pod three times (its
//! allocation at `/filter`, its bind phase at `/bind`, then the Binding); its
//! device plugin reads none of it before the Binding exists, and the API server
//! copies a Binding's annotations onto the pod in the same write as its node. So
//! the allocation and the bind phase ride on the Binding: one write per pod, a
//! pod that is filtered but never bound leaves nothing on the API server to clean
//! up, and the device plugin can never see the pod bound without them.
//!
//! A Binding only sets keys. What a placement removes from a pod that carries it
//! (an earlier placement's MIG instances or plan deadline, a label of a longer
//! node name) still needs a merge patch before the Binding, written only then.

use super::allocation_patch;
use crate::annotations::{BIND_PHASE, BIND_TIME, DEVICES_ALLOCATED, VGPU_NODE};
use crate::cluster::api::{BindingMetadata, MetadataPatch};
use crate::device::allocation_codec::encode_pod_devices;
use crate::device::model::PodDevices;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// Where the bind places the pod's GPUs.
pub(super) struct Held<'a> {
    /// The node.
    pub node: &'a str,
    /// The GPUs per container.
    pub devices: &'a PodDevices,
}

/// Whether the pod already carries an allocation of ours or HAMi's (a gang
/// member's plan, a placement from before an upgrade): one to clear if the bind
/// fails.
pub(super) fn carries_allocation(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(VGPU_NODE))
}

/// What `/bind` writes on the pod: the metadata its Binding carries, and the
/// keys to remove from it before (empty unless the pod carries any of them).
pub(super) struct BindWrites {
    /// Set on the pod by the Binding.
    pub binding: BindingMetadata,
    /// Removed by a merge patch before the Binding.
    pub removals: MetadataPatch,
}

/// [`bind_patch`] split into what the Binding carries and what a patch must
/// remove: a removal of a key the pod does not carry is left out, as it would
/// change nothing.
pub(super) fn bind_writes(
    pod: &Pod,
    held: Option<Held<'_>>,
    clear_plan_deadline: bool,
    now: DateTime<Utc>,
) -> BindWrites {
    let patch = bind_patch(pod, held, clear_plan_deadline, now);
    let mut writes = BindWrites {
        binding: BindingMetadata::default(),
        removals: MetadataPatch::default(),
    };
    split(
        patch.annotations,
        pod.metadata.annotations.as_ref(),
        &mut writes.binding.annotations,
        &mut writes.removals.annotations,
    );
    split(
        patch.labels,
        pod.metadata.labels.as_ref(),
        &mut writes.binding.labels,
        &mut writes.removals.labels,
    );
    writes
}

/// Sorts `changes` into keys to set and removals of keys `carried` holds.
fn split(
    changes: BTreeMap<String, Option<String>>,
    carried: Option<&BTreeMap<String, String>>,
    set: &mut BTreeMap<String, String>,
    remove: &mut BTreeMap<String, Option<String>>,
) {
    for (key, value) in changes {
        match value {
            Some(value) => {
                set.insert(key, value);
            }
            None if carried.is_some_and(|c| c.contains_key(&key)) => {
                remove.insert(key, None);
            }
            None => {}
        }
    }
}

/// The metadata `/bind` writes on the pod with the Binding: HAMi's bind phase
/// `allocating` and bind time, and the allocation annotations unless `pod`
/// already carries exactly this placement (a gang member the planner placed
/// keeps its plan's annotations, deadline included, untouched).
fn bind_patch(
    pod: &Pod,
    held: Option<Held<'_>>,
    clear_plan_deadline: bool,
    now: DateTime<Utc>,
) -> MetadataPatch {
    let mut patch = match held {
        Some(held) if !already_carries(pod, &held) => {
            let mut patch = allocation_patch(held.node, held.devices, now);
            // A member placed again outside its gang plan keeps no plan deadline.
            if clear_plan_deadline {
                patch
                    .annotations
                    .insert(crate::gang::PLAN_DEADLINE.to_string(), None);
            }
            patch
        }
        _ => MetadataPatch::default(),
    };
    patch
        .annotations
        .insert(BIND_PHASE.to_string(), Some("allocating".into()));
    patch
        .annotations
        .insert(BIND_TIME.to_string(), Some(now.timestamp().to_string()));
    patch
}

fn already_carries(pod: &Pod, held: &Held<'_>) -> bool {
    let Some(annotations) = pod.metadata.annotations.as_ref() else {
        return false;
    };
    annotations.get(VGPU_NODE).map(String::as_str) == Some(held.node)
        && annotations.get(DEVICES_ALLOCATED) == Some(&encode_pod_devices(held.devices))
}
