//! What a member record keeps of its pod's status: the start time, which
//! topology-aware preemption weighs to choose between nodes (the victims that
//! started last lose the least work), and nothing else.

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
