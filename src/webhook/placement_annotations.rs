//! Who may write the annotations that hand a placement to HAMi's device plugin.
//!
//! `hami.io/vgpu-node` and `hami.io/vgpu-devices-allocated` tell the ledger which
//! GPUs a pod holds; `hami.io/vgpu-devices-to-allocate` and
//! `hami.io/vgpu-mig-allocations` tell the device plugin which GPUs to hand a
//! container; `hami.io/bind-phase` tells it which pod is being bound; the gang
//! planner's plan deadline and pipelined plan promise a pod GPUs across a restart
//! (a pipelined plan becomes the pod's placement once its victims are gone). A
//! tenant who sets them could block other tenants' GPUs or ask the device plugin
//! for a GPU nobody placed the pod on. So:
//!
//! * a pod created with any of them is refused, unless the request comes from the
//!   scheduler's own identity (`--scheduler-users`);
//! * an update that changes any of them is refused, unless it comes from the
//!   scheduler, or from HAMi's device plugin (`--device-plugin-users`) changing
//!   only what the device plugin writes: the bind phase, the containers still to
//!   allocate, and the runtime ids of MIG placements.
//!
//! The user is the AdmissionReview's `userInfo.username`, which the API server
//! fills in from the authenticated request (`system:serviceaccount:NS:NAME` for
//! service accounts).

use crate::annotations::{
    BIND_PHASE, DEVICES_ALLOCATED, DEVICES_TO_ALLOCATE, MIG_ALLOCATIONS, VGPU_NODE,
};
use crate::gang::PLAN_DEADLINE;
use crate::gang::pipelined_plan::PIPELINED_PLAN;
use serde_json::Value;

/// The annotations only the scheduler (and, in part, the device plugin) write.
pub const PLACEMENT_ANNOTATIONS: [&str; 7] = [
    VGPU_NODE,
    DEVICES_TO_ALLOCATE,
    DEVICES_ALLOCATED,
    BIND_PHASE,
    MIG_ALLOCATIONS,
    PLAN_DEADLINE,
    PIPELINED_PLAN,
];

/// The placement annotations HAMi's device plugin changes after the scheduler
/// wrote them (it never moves a pod or changes what it holds).
const DEVICE_PLUGIN_WRITES: [&str; 3] = [BIND_PHASE, DEVICES_TO_ALLOCATE, MIG_ALLOCATIONS];

/// The users allowed to write placement annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnotationWriters {
    /// This scheduler's own users: may write all of them.
    pub scheduler: Vec<String>,
    /// HAMi's device plugin: may change what it writes.
    pub device_plugin: Vec<String>,
}

impl AnnotationWriters {
    fn is_scheduler(&self, user: &str) -> bool {
        self.scheduler.iter().any(|u| u == user)
    }

    fn is_device_plugin(&self, user: &str) -> bool {
        self.device_plugin.iter().any(|u| u == user)
    }
}

/// A pod being created: refused when it sets placement annotations and the user
/// is not the scheduler.
pub(crate) fn check_create(
    object: &Value,
    user: &str,
    writers: &AnnotationWriters,
) -> Result<(), String> {
    let set: Vec<&str> = PLACEMENT_ANNOTATIONS
        .into_iter()
        .filter(|k| annotation(object, k).is_some())
        .collect();
    if set.is_empty() || writers.is_scheduler(user) {
        return Ok(());
    }
    Err(format!(
        "pod sets {}: only the scheduler writes these annotations; remove them",
        set.join(", ")
    ))
}

/// A pod being updated: refused when a placement annotation changes and the user
/// may not change it.
pub(crate) fn check_update(
    object: &Value,
    old_object: &Value,
    user: &str,
    writers: &AnnotationWriters,
) -> Result<(), String> {
    if writers.is_scheduler(user) {
        return Ok(());
    }
    let device_plugin = writers.is_device_plugin(user);
    let refused: Vec<&str> = PLACEMENT_ANNOTATIONS
        .into_iter()
        .filter(|k| annotation(object, k) != annotation(old_object, k))
        .filter(|k| !(device_plugin && DEVICE_PLUGIN_WRITES.contains(k)))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err(format!(
        "user {user:?} may not change {}: only the scheduler and HAMi's device plugin write these annotations",
        refused.join(", ")
    ))
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(key)?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SCHEDULER: &str = "system:serviceaccount:vgpu-system:vgpu-scheduler";
    const DEVICE_PLUGIN: &str = "system:serviceaccount:kube-system:hami-device-plugin";

    fn writers() -> AnnotationWriters {
        AnnotationWriters {
            scheduler: vec![SCHEDULER.into()],
            device_plugin: vec![DEVICE_PLUGIN.into()],
        }
    }

    fn pod(annotations: Value) -> Value {
        json!({"metadata": {"name": "p", "annotations": annotations}})
    }

    #[test]
    fn a_tenant_cannot_create_a_pod_with_placement_annotations() {
        let forged = pod(json!({VGPU_NODE: "gpu-a", DEVICES_ALLOCATED: "GPU-1,NVIDIA,1000,10:;"}));
        let err = check_create(&forged, "alice", &writers()).unwrap_err();
        assert_eq!(
            err,
            "pod sets hami.io/vgpu-node, hami.io/vgpu-devices-allocated: only the scheduler writes these annotations; remove them"
        );
        assert!(check_create(&forged, DEVICE_PLUGIN, &writers()).is_err());
        assert!(check_create(&forged, SCHEDULER, &writers()).is_ok());
        assert!(check_create(&pod(json!({"team": "a"})), "alice", &writers()).is_ok());
        assert!(check_create(&json!({"metadata": {}}), "alice", &writers()).is_ok());
    }

    #[test]
    fn updates_may_change_placement_annotations_only_as_their_writers_do() {
        let placed =
            pod(json!({VGPU_NODE: "gpu-a", DEVICES_TO_ALLOCATE: "x;", BIND_PHASE: "allocating"}));
        let allocated =
            pod(json!({VGPU_NODE: "gpu-a", DEVICES_TO_ALLOCATE: ";", BIND_PHASE: "success"}));
        let moved =
            pod(json!({VGPU_NODE: "gpu-b", DEVICES_TO_ALLOCATE: "x;", BIND_PHASE: "allocating"}));
        let relabelled = {
            let mut p = placed.clone();
            p["metadata"]["labels"] = json!({"team": "b"});
            p
        };
        let w = writers();
        assert!(check_update(&allocated, &placed, DEVICE_PLUGIN, &w).is_ok());
        assert!(check_update(&allocated, &placed, SCHEDULER, &w).is_ok());
        assert!(check_update(&moved, &placed, SCHEDULER, &w).is_ok());
        assert!(check_update(&relabelled, &placed, "alice", &w).is_ok());
        let err = check_update(&allocated, &placed, "alice", &w).unwrap_err();
        assert!(
            err.contains("hami.io/vgpu-devices-to-allocate, hami.io/bind-phase"),
            "{err}"
        );
        let err = check_update(&moved, &placed, DEVICE_PLUGIN, &w).unwrap_err();
        assert!(err.contains("may not change hami.io/vgpu-node"), "{err}");
        let removed = pod(json!({}));
        assert!(check_update(&removed, &placed, "alice", &w).is_err());
    }
}
