//! Which pods hold GPUs: a pod counts once it carries `hami.io/vgpu-node` and
//! `hami.io/vgpu-devices-allocated`, until it finishes or is deleted. The MIG
//! instances among its devices come from `hami.io/vgpu-mig-allocations`.

use crate::annotations::{DEVICES_ALLOCATED, MIG_ALLOCATIONS, VGPU_NODE, VGPU_TIME};
use crate::device::allocation_codec::decode_pod_devices;
use crate::device::mig_allocations::{attach_mig_allocations, decode_mig_allocations};
use crate::ledger::{PodEntry, PodPhase};
use crate::object_namespace::namespace_of;
use k8s_openapi::api::core::v1::Pod;
use std::time::Duration;

/// Whether the pod has finished (Succeeded or Failed): it holds nothing any
/// more, and its end is recorded however long its object stays.
pub fn pod_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Reads a pod's hold on GPUs from its annotations. `Ok(None)` for pods that hold
/// nothing (no annotations, or finished); `Err` for malformed annotations, which the
/// caller logs (the pod is then ignored, as HAMi does).
pub fn pod_entry(
    pod: &Pod,
    reservation_ttl: Duration,
    clock: &dyn crate::clock::Clock,
) -> Result<Option<PodEntry>, String> {
    if pod_finished(pod) {
        return Ok(None);
    }
    let Some(annotations) = pod.metadata.annotations.as_ref() else {
        return Ok(None);
    };
    let (Some(node), Some(allocated)) = (
        annotations.get(VGPU_NODE),
        annotations.get(DEVICES_ALLOCATED),
    ) else {
        return Ok(None);
    };
    let Some(uid) = pod.metadata.uid.clone() else {
        return Err("pod has no uid".into());
    };
    let mut devices = decode_pod_devices(allocated).map_err(|e| e.to_string())?;
    if let Some(raw) = annotations.get(MIG_ALLOCATIONS) {
        let shown = || {
            format!(
                "{}/{}",
                namespace_of(&pod.metadata),
                pod.metadata.name.as_deref().unwrap_or_default()
            )
        };
        // A MIG annotation that cannot be read leaves the pod's MIG devices
        // without known slices; the ledger then keeps their GPUs whole for it
        // (see `mig_claims`) rather than ignore what it holds.
        match decode_mig_allocations(raw) {
            Ok(records) => {
                let extra = attach_mig_allocations(&mut devices, records);
                if extra > 0 {
                    tracing::info!(pod = %shown(), reservations = extra, "restored MIG reservations that match no device of the pod");
                }
            }
            Err(e) => {
                tracing::warn!(pod = %shown(), error = %e, "unreadable {MIG_ALLOCATIONS} annotation");
            }
        }
    }
    let init_count = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some();
    let pod_phase = if bound {
        PodPhase::Bound
    } else {
        // Filtered but not bound: the reservation lives until its TTL counted from
        // the filter time, so a restart neither frees it early nor keeps it forever.
        // A gang plan carries its own deadline.
        if let Some(deadline) = annotations
            .get(crate::gang::PLAN_DEADLINE)
            .and_then(|t| t.parse::<i64>().ok())
        {
            let left = (deadline - clock.wall().timestamp()).max(0) as u64;
            return Ok(Some(PodEntry::new(
                uid,
                namespace_of(&pod.metadata).to_owned(),
                pod.metadata.name.clone().unwrap_or_default(),
                node.clone(),
                devices,
                init_count,
                PodPhase::Reserved {
                    deadline: clock.now() + Duration::from_secs(left),
                },
            )));
        }
        let age = annotations
            .get(VGPU_TIME)
            .and_then(|t| t.parse::<i64>().ok())
            .map(|t| (clock.wall().timestamp() - t).max(0) as u64)
            .unwrap_or(0);
        let left = reservation_ttl.saturating_sub(Duration::from_secs(age));
        PodPhase::Reserved {
            deadline: clock.now() + left,
        }
    };
    Ok(Some(PodEntry::new(
        uid,
        namespace_of(&pod.metadata).to_owned(),
        pod.metadata.name.clone().unwrap_or_default(),
        node.clone(),
        devices,
        init_count,
        pod_phase,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn in_phase(phase: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"phase": phase}}))
            .unwrap()
    }

    #[test]
    fn only_succeeded_and_failed_pods_are_finished() {
        assert!(pod_finished(&in_phase("Succeeded")));
        assert!(pod_finished(&in_phase("Failed")));
        assert!(!pod_finished(&in_phase("Running")));
        assert!(!pod_finished(&in_phase("Pending")));
        assert!(!pod_finished(&serde_json::from_value(json!({})).unwrap()));
    }
}
