//! What a member record keeps of its pod: its metadata but the managed fields,
//! its spec, and of its status only the start time, which topology-aware
//! preemption weighs to choose between nodes (the victims that started last lose
//! the least work).

use super::book::member_of;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn running_member(status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "w-0", "namespace": "ml", "uid": "uid-w-0",
                     "annotations": {"scheduling.k8s.io/group-name": "train"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": status
    }))
    .expect("pod")
}

#[test]
fn a_member_keeps_its_pods_start_time_and_nothing_else_of_its_status() {
    let pod = running_member(json!({
        "phase": "Running",
        "startTime": "2026-01-01T10:00:00Z",
        "conditions": [{"type": "Ready", "status": "True"}]
    }));
    let member = member_of(&pod).expect("a member");
    let status = member.pod.status.as_ref().expect("status kept");
    assert_eq!(
        status.start_time.as_ref().map(|t| t.0.to_string()),
        Some("2026-01-01T10:00:00Z".to_string())
    );
    assert_eq!(status.phase, None);
    assert_eq!(status.conditions, None);
    let not_started = member_of(&running_member(json!({"phase": "Pending"}))).expect("a member");
    assert!(not_started.pod.status.is_none());
}

#[test]
fn a_member_keeps_its_pods_metadata_and_spec_but_not_the_managed_fields() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "w-0", "namespace": "ml", "uid": "uid-w-0", "generateName": "w-",
            "generation": 3, "resourceVersion": "17", "selfLink": "/api/v1/pods/w-0",
            "creationTimestamp": "2026-01-01T09:00:00Z",
            "deletionTimestamp": "2026-01-01T11:00:00Z", "deletionGracePeriodSeconds": 30,
            "labels": {"app": "train"}, "finalizers": ["example.com/keep"],
            "annotations": {"scheduling.k8s.io/group-name": "train"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                 "uid": "uid-job", "controller": true}],
            "managedFields": [{"manager": "kubelet", "operation": "Update",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
        },
        "spec": {"nodeName": "n1", "priority": 7, "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "startTime": "2026-01-01T10:00:00Z"}
    }))
    .expect("pod");
    let member = member_of(&pod).expect("a member");
    let mut expected = pod.metadata.clone();
    expected.managed_fields = None;
    assert_eq!(member.pod.metadata, expected);
    assert_eq!(member.pod.spec, pod.spec);
}
