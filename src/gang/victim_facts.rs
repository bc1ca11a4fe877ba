//! What a pod says about being evicted: `volcano.sh/preemptable`, its cooldown
//! (`volcano.sh/cooldown-time`), when it was bound, its preemption policy and the
//! kind of workload that owns it. Read the way Volcano reads them.

use crate::object_namespace::namespace_of;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use std::time::Duration;

/// Pod annotation or label: whether the pod may be evicted for another.
pub const PREEMPTABLE: &str = "volcano.sh/preemptable";
/// Pod label or annotation: how long after it was bound the pod is protected.
pub const COOLDOWN_TIME: &str = "volcano.sh/cooldown-time";
/// PodGroup (or pod) annotation: `inference` or `training`.
pub const SERVICE_TYPE: &str = "volcano.sh/service.type";

/// `volcano.sh/preemptable` from the annotation, then the label: absent means
/// yes; a value that is not a boolean means no (a typo must not expose a pod).
pub fn preemptable(pod: &Pod) -> bool {
    let meta = &pod.metadata;
    let value = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(PREEMPTABLE))
        .or_else(|| meta.labels.as_ref().and_then(|l| l.get(PREEMPTABLE)));
    match value.map(|v| v.trim().to_ascii_lowercase()) {
        None => true,
        Some(v) => matches!(v.as_str(), "true" | "1" | "t"),
    }
}

/// A PodGroup's `volcano.sh/preemptable` annotation: absent means yes, as for a
/// pod; a value that is not a boolean means no.
pub fn group_preemptable(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations
        .get(PREEMPTABLE)
        .map(|v| v.trim().to_ascii_lowercase())
        .is_none_or(|v| matches!(v.as_str(), "true" | "1" | "t"))
}

/// `volcano.sh/cooldown-time` from the label, then the annotation, as a Go-style
/// duration (`600s`, `10m`, `1h30m`); `None` when absent or unreadable (logged).
pub fn cooldown(pod: &Pod) -> Option<Duration> {
    let meta = &pod.metadata;
    let value = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(COOLDOWN_TIME))
        .or_else(|| meta.annotations.as_ref().and_then(|a| a.get(COOLDOWN_TIME)))?;
    match humantime::parse_duration(value.trim()) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(pod = %format!("{}/{}", namespace_of(meta), meta.name.as_deref().unwrap_or("")), value = %value, error = %e, "ignoring unreadable cooldown time");
            None
        }
    }
}

/// When the pod was bound to its node: its `PodScheduled` condition's transition
/// time, else its start time.
pub fn scheduled_at(pod: &Pod) -> Option<DateTime<Utc>> {
    let status = pod.status.as_ref()?;
    let to_chrono = |t: &k8s_openapi::jiff::Timestamp| {
        DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
    };
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .and_then(|t| to_chrono(&t.0))
        .or_else(|| status.start_time.as_ref().and_then(|t| to_chrono(&t.0)))
}

/// Whether the pod may not evict others (`preemptionPolicy: Never`).
pub fn never_preempts(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        == Some("Never")
}

/// The kind of the pod's first owner (`ReplicaSet`, `Job`, ...).
pub fn owner_kind(pod: &Pod) -> Option<String> {
    pod.metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .map(|o| o.kind.clone())
}

/// `volcano.sh/service.type` of an object's annotations.
pub fn service_type(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<String> {
    annotations
        .and_then(|a| a.get(SERVICE_TYPE))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(meta: serde_json::Value, spec: serde_json::Value, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": meta, "spec": spec, "status": status})).unwrap()
    }

    #[test]
    fn preemptable_reads_the_annotation_then_the_label() {
        let p = |annotations: serde_json::Value, labels: serde_json::Value| {
            preemptable(&pod(
                json!({"name": "p", "annotations": annotations, "labels": labels}),
                json!({"containers": []}),
                json!({}),
            ))
        };
        assert!(p(json!({}), json!({})), "absent: may be evicted");
        assert!(!p(
            json!({PREEMPTABLE: "false"}),
            json!({PREEMPTABLE: "true"})
        ));
        assert!(!p(json!({}), json!({PREEMPTABLE: "false"})));
        assert!(p(json!({PREEMPTABLE: "True"}), json!({})));
        assert!(
            !p(json!({PREEMPTABLE: "maybe"}), json!({})),
            "unparsable: no"
        );
    }

    #[test]
    fn cooldown_reads_the_label_then_the_annotation_as_a_go_duration() {
        let p = pod(
            json!({"name": "p", "labels": {COOLDOWN_TIME: "10m"}, "annotations": {COOLDOWN_TIME: "1h"}}),
            json!({"containers": []}),
            json!({}),
        );
        assert_eq!(cooldown(&p), Some(Duration::from_secs(600)));
        let p = pod(
            json!({"name": "p", "annotations": {COOLDOWN_TIME: "1h30m"}}),
            json!({"containers": []}),
            json!({}),
        );
        assert_eq!(cooldown(&p), Some(Duration::from_secs(5400)));
        let p = pod(
            json!({"name": "p", "annotations": {COOLDOWN_TIME: "soon"}}),
            json!({"containers": []}),
            json!({}),
        );
        assert_eq!(cooldown(&p), None);
    }

    #[test]
    fn scheduled_at_prefers_the_scheduled_condition() {
        let p = pod(
            json!({"name": "p", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u"}]}),
            json!({"containers": [], "preemptionPolicy": "Never"}),
            json!({"startTime": "2026-01-01T00:00:10Z", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}),
        );
        assert_eq!(
            scheduled_at(&p).map(|t| t.to_rfc3339()),
            Some("2026-01-01T00:00:05+00:00".into())
        );
        assert!(never_preempts(&p));
        assert_eq!(owner_kind(&p).as_deref(), Some("ReplicaSet"));
    }
}
