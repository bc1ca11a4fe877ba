//! A pod as its controller created it, from a copy the scheduler saw later: what
//! placement wrote onto it (our annotations and label, `nodeName`, the gang gate
//! our webhook adds) and what the API server and kubelet keep on it
//! (`resourceVersion`, `managedFields`, status) are left out, so that a replay
//! creates the pod afresh and places it by its own decisions.

use crate::annotations::{BIND_PHASE, BIND_TIME};
use crate::gang::book::GANG_GATE;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

/// The pod as created: identity, labels, annotations, owners and spec, without
/// placement and status.
pub fn as_created(pod: &Pod) -> Pod {
    let placement = crate::scheduler::clear_allocation_patch();
    let meta = &pod.metadata;
    let annotations = meta.annotations.as_ref().map(|a| {
        a.iter()
            .filter(|(k, _)| {
                !placement.annotations.contains_key(k.as_str())
                    && k.as_str() != BIND_PHASE
                    && k.as_str() != BIND_TIME
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    let labels = meta.labels.as_ref().map(|l| {
        l.iter()
            .filter(|(k, _)| !placement.labels.contains_key(k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    let mut spec = pod.spec.clone();
    if let Some(spec) = spec.as_mut() {
        spec.node_name = None;
        if let Some(gates) = spec.scheduling_gates.as_mut() {
            gates.retain(|g| g.name != GANG_GATE);
            if gates.is_empty() {
                spec.scheduling_gates = None;
            }
        }
    }
    Pod {
        metadata: ObjectMeta {
            name: meta.name.clone(),
            generate_name: meta.generate_name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            labels,
            annotations,
            owner_references: meta.owner_references.clone(),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// A PodGroup as created: without status and the API server's bookkeeping.
pub fn podgroup_as_created(group: &Value) -> Value {
    let mut group = group.clone();
    if let Some(object) = group.as_object_mut() {
        object.remove("status");
    }
    if let Some(meta) = group.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "managedFields", "generation"] {
            meta.remove(field);
        }
    }
    group
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placement_and_status_are_left_out_and_the_rest_kept() {
        let seen: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "w0", "namespace": "ml", "uid": "u-1", "resourceVersion": "42",
                "labels": {"app": "train", "hami.io/vgpu-node": "n1"},
                "annotations": {
                    "scheduling.k8s.io/group-name": "train",
                    "hami.io/node-scheduler-policy": "spread",
                    "hami.io/vgpu-node": "n1",
                    "hami.io/vgpu-time": "1750000000",
                    "hami.io/vgpu-devices-to-allocate": "GPU-a,NVIDIA,1000,0:;",
                    "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1000,0:;",
                    "hami.io/bind-phase": "allocating",
                    "hami.io/bind-time": "1750000001",
                    "vgpu-scheduler.io/gang-plan-deadline": "1750000300"
                },
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1"}]
            },
            "spec": {
                "schedulerName": "vgpu-scheduler",
                "nodeName": "n1",
                "priorityClassName": "training",
                "schedulingGates": [{"name": "vgpu-scheduler.io/gang"}, {"name": "example.com/quota"}],
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
            },
            "status": {"phase": "Running"}
        }))
        .unwrap();
        let created = serde_json::to_value(as_created(&seen)).unwrap();
        assert_eq!(
            created["metadata"]["annotations"],
            json!({"scheduling.k8s.io/group-name": "train", "hami.io/node-scheduler-policy": "spread"})
        );
        assert_eq!(created["metadata"]["labels"], json!({"app": "train"}));
        assert_eq!(created["metadata"]["uid"], "u-1");
        assert_eq!(created["metadata"]["ownerReferences"][0]["kind"], "Job");
        assert!(created["metadata"].get("resourceVersion").is_none());
        assert!(created.get("status").is_none());
        assert!(created["spec"].get("nodeName").is_none());
        assert_eq!(
            created["spec"]["schedulingGates"],
            json!([{"name": "example.com/quota"}])
        );
        assert_eq!(created["spec"]["priorityClassName"], "training");
        assert_eq!(
            created["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "1"
        );
    }

    #[test]
    fn a_podgroup_keeps_its_spec_and_loses_its_status() {
        let group = json!({
            "metadata": {"name": "g", "namespace": "ml", "resourceVersion": "7"},
            "spec": {"minMember": 2, "queue": "training"},
            "status": {"phase": "Running"}
        });
        assert_eq!(
            podgroup_as_created(&group),
            json!({"metadata": {"name": "g", "namespace": "ml"},
                   "spec": {"minMember": 2, "queue": "training"}})
        );
    }
}
