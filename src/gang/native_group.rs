//! Kubernetes' own PodGroups (`scheduling.k8s.io`, KEP-4671), read as one more
//! source of gangs.
//!
//! A native PodGroup says how many members must start together
//! (`spec.schedulingPolicy.gang.minCount`), its priority and how it may be
//! disrupted; it names no queue. The planner treats it like a Volcano PodGroup so
//! that native gangs get the same all-or-nothing placement, queues and reclaim, and
//! so that a gang that cannot be placed whole holds no GPU while it waits.
//!
//! Two served shapes are read: `v1alpha2` (Kubernetes 1.36: `disruptionMode` is the
//! text `Pod` or `PodGroup`, the template is referenced by `podGroupTemplateRef`)
//! and `v1beta1` (1.37: `disruptionMode` is `{single: {}}` or `{all: {}}`, the
//! template by `workloadRef`).

use super::membership::QUEUE_NAME;
use crate::object_namespace::namespace_in;
use crate::volcano::crd;
use crate::volcano::objects::{DEFAULT_QUEUE, ObjectError, PodGroupSpec};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The API group of Kubernetes' own PodGroups and Workloads.
pub const API_GROUP: &str = "scheduling.k8s.io";

/// The versions of [`API_GROUP`] that carry PodGroups, newest first: the first
/// one the API server serves is watched.
pub const VERSIONS: [&str; 2] = ["v1beta1", "v1alpha2"];

/// What a native PodGroup adds to the Volcano-shaped group the planner reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NativeGroup {
    /// The `apiVersion` it was read from, e.g. `scheduling.k8s.io/v1alpha2`.
    pub api_version: String,
    /// The Workload whose template the group was made from, if any.
    pub workload: Option<String>,
    /// `Pod` (members may be disrupted one by one) or `PodGroup` (all together).
    pub disruption_mode: String,
    /// `spec.priority`, resolved by admission from `priorityClassName`.
    pub priority: Option<i32>,
    /// Whether the group names its queue itself (annotation
    /// `scheduling.volcano.sh/queue-name`); otherwise its members' queue applies.
    pub queue_named: bool,
}

impl NativeGroup {
    /// Whether the group may only be disrupted as a whole: Kubernetes'
    /// `DisruptionModePodGroup`, "the whole PodGroup needs to be disrupted or
    /// preempted together".
    pub fn disrupted_whole(&self) -> bool {
        self.disruption_mode == "PodGroup"
    }
}

/// `spec` of a native PodGroup, in both served shapes (unknown fields ignored).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    scheduling_policy: Option<SchedulingPolicy>,
    #[serde(default)]
    disruption_mode: Option<Value>,
    #[serde(default)]
    priority_class_name: Option<String>,
    #[serde(default)]
    priority: Option<i32>,
    /// v1alpha2.
    #[serde(default)]
    pod_group_template_ref: Option<TemplateRef>,
    /// v1beta1.
    #[serde(default)]
    workload_ref: Option<WorkloadRef>,
}

#[derive(Deserialize, Default)]
struct SchedulingPolicy {
    #[serde(default)]
    gang: Option<GangPolicy>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GangPolicy {
    #[serde(default)]
    min_count: Option<i32>,
}

#[derive(Deserialize, Default)]
struct TemplateRef {
    #[serde(default)]
    workload: Option<WorkloadRef>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WorkloadRef {
    #[serde(default)]
    workload_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Object {
    #[serde(default)]
    api_version: Option<String>,
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    spec: Spec,
}

/// Whether `object` is one of Kubernetes' own PodGroups rather than Volcano's,
/// by its `apiVersion` (a cluster file or a trace holds both).
pub fn is_native(object: &Value) -> bool {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v.starts_with("scheduling.k8s.io/"))
}

/// Reads a PodGroup of either API, told apart by [`is_native`].
pub fn any_podgroup_from_json(value: &Value) -> Result<PodGroupSpec, ObjectError> {
    if is_native(value) {
        podgroup_from_json(value)
    } else {
        PodGroupSpec::from_json(value)
    }
}

/// Reads a native PodGroup as the planner's group: minMember is the gang's
/// `minCount` (1 for a `basic` group, whose pods are scheduled one by one), the
/// queue comes from the Volcano queue annotation when the group has one.
pub fn podgroup_from_json(value: &Value) -> Result<PodGroupSpec, ObjectError> {
    const KIND: &str = "PodGroup";
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .ok_or(ObjectError::MissingName { kind: KIND })?;
    if !value.is_object() {
        return Err(ObjectError::NotAnObject { kind: KIND });
    }
    let namespace = namespace_in(value).to_owned();
    let error = |field: &str, reason: String| ObjectError::Field {
        kind: KIND,
        name: format!("{namespace}/{name}"),
        field: field.to_owned(),
        reason,
    };
    let object: Object = crd::read(value).map_err(|e| error(&e.field, e.reason))?;
    let spec = object.spec;
    let min_count = match spec.scheduling_policy.and_then(|p| p.gang) {
        Some(gang) => {
            let n = gang.min_count.unwrap_or(1);
            if n < 1 {
                return Err(error(
                    "spec.schedulingPolicy.gang.minCount",
                    format!("must be at least 1, got {n}"),
                ));
            }
            n
        }
        None => 1,
    };
    let disruption_mode = disruption_mode(spec.disruption_mode.as_ref())
        .map_err(|reason| error("spec.disruptionMode", reason))?;
    let meta = object.metadata;
    let annotations = meta.annotations.unwrap_or_default();
    let named_queue = annotations
        .get(QUEUE_NAME)
        .filter(|q| !q.trim().is_empty())
        .cloned();
    let workload = spec
        .pod_group_template_ref
        .and_then(|r| r.workload)
        .or(spec.workload_ref)
        .and_then(|w| w.workload_name)
        .filter(|w| !w.is_empty());
    Ok(PodGroupSpec {
        namespace,
        uid: meta.uid.unwrap_or_default(),
        min_member: min_count,
        min_task_member: BTreeMap::new(),
        queue: named_queue
            .clone()
            .unwrap_or_else(|| DEFAULT_QUEUE.to_owned()),
        priority_class_name: spec.priority_class_name.filter(|p| !p.is_empty()),
        min_resources: None,
        annotations,
        creation_timestamp: meta.creation_timestamp.and_then(|t| {
            DateTime::<Utc>::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        }),
        phase: None,
        network_topology: None,
        native: Some(NativeGroup {
            api_version: object
                .api_version
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| format!("{API_GROUP}/v1alpha2")),
            workload,
            disruption_mode,
            priority: spec.priority,
            queue_named: named_queue.is_some(),
        }),
        name,
    })
}

/// `spec.disruptionMode` in either shape, as `Pod` or `PodGroup` (default `Pod`).
fn disruption_mode(value: Option<&Value>) -> Result<String, String> {
    match value {
        None | Some(Value::Null) => Ok("Pod".into()),
        Some(Value::String(s)) if s == "Pod" || s == "PodGroup" => Ok(s.clone()),
        Some(Value::Object(o)) if o.contains_key("all") => Ok("PodGroup".into()),
        Some(Value::Object(o)) if o.contains_key("single") || o.is_empty() => Ok("Pod".into()),
        Some(other) => Err(format!(
            "expected \"Pod\", \"PodGroup\", {{\"single\": {{}}}} or {{\"all\": {{}}}}, got {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_v1alpha2_gang() {
        let g = podgroup_from_json(&json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u1",
                         "annotations": {"scheduling.volcano.sh/queue-name": "team-a"}},
            "spec": {
                "podGroupTemplateRef": {"workload": {"workloadName": "job", "podGroupTemplateName": "workers"}},
                "schedulingPolicy": {"gang": {"minCount": 3}},
                "disruptionMode": "PodGroup",
                "priorityClassName": "high", "priority": 1000
            }
        }))
        .unwrap();
        assert_eq!((g.namespace.as_str(), g.name.as_str()), ("ml", "train"));
        assert_eq!(g.min_member, 3);
        assert_eq!(g.queue, "team-a");
        assert_eq!(g.priority_class_name.as_deref(), Some("high"));
        let native = g.native.unwrap();
        assert_eq!(native.workload.as_deref(), Some("job"));
        assert_eq!(native.disruption_mode, "PodGroup");
        assert_eq!(native.priority, Some(1000));
        assert!(native.queue_named);
    }

    #[test]
    fn reads_a_v1beta1_group_and_a_basic_policy_is_a_gang_of_one() {
        let g = podgroup_from_json(&json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "web"},
            "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
                     "schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}}
        }))
        .unwrap();
        assert_eq!(g.namespace, "default");
        assert_eq!(g.min_member, 1);
        assert_eq!(g.queue, DEFAULT_QUEUE);
        let native = g.native.unwrap();
        assert_eq!(native.api_version, "scheduling.k8s.io/v1beta1");
        assert_eq!(native.workload.as_deref(), Some("w"));
        assert_eq!(native.disruption_mode, "PodGroup");
        assert!(!native.queue_named);
    }

    #[test]
    fn bad_fields_are_named() {
        let e = podgroup_from_json(&json!({"metadata": {"name": "g", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}))
        .unwrap_err()
        .to_string();
        assert!(e.contains("ml/g") && e.contains("minCount"), "{e}");
        let e = podgroup_from_json(&json!({"metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": "three"}}}}))
        .unwrap_err()
        .to_string();
        assert!(e.contains("minCount"), "{e}");
        let e = podgroup_from_json(&json!({"metadata": {"name": "g"},
            "spec": {"disruptionMode": "Sometimes"}}))
        .unwrap_err()
        .to_string();
        assert!(e.contains("spec.disruptionMode"), "{e}");
        assert!(podgroup_from_json(&json!([1])).is_err());
    }
}
