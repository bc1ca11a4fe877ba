//! The one pod write of a placement. HAMi writes a pod twice (its allocation at
//! `/filter`, its bind phase at `/bind`); its device plugin reads neither before
//! the Binding exists, so both go in one merge patch at `/bind`, just before the
//! Binding: half the pod writes, and a pod that is filtered but never bound leaves
//! nothing on the API server to clean up.

use super::allocation_patch;
use crate::annotations::{BIND_PHASE, BIND_TIME, DEVICES_ALLOCATED, VGPU_NODE};
use crate::cluster::api::MetadataPatch;
use crate::device::allocation_codec::encode_pod_devices;
use crate::device::model::PodDevices;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;

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

/// The merge patch `/bind` writes before the Binding: HAMi's bind phase
/// `allocating` and bind time, and the allocation annotations unless `pod`
/// already carries exactly this placement (a gang member the planner placed
/// keeps its plan's annotations, deadline included, untouched).
pub(super) fn bind_patch(
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
