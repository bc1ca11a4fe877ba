//! A pod's `spec.schedulingGroup` (Kubernetes 1.36+), kept where the typed Pod
//! drops it.
//!
//! The typed Pod of this crate predates the field, so decoding a pod forgets which
//! native PodGroup it belongs to. Every place that decodes a pod from the API
//! (the pod watch, `/filter`'s arguments, admission reviews, the cluster file)
//! decodes through here instead: the group's name is copied into the in-memory
//! annotation [`SCHEDULING_GROUP`], which membership reads like Volcano's group
//! annotation. The annotation is never written to the API; a value a user wrote
//! there is replaced by what the spec says, so only the spec makes a member.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::borrow::Cow;

/// In-memory pod annotation: the pod's `spec.schedulingGroup.podGroupName`.
pub const SCHEDULING_GROUP: &str = "vgpu-scheduler.io/scheduling-group";

/// The native PodGroup a pod names in its raw JSON, if any.
pub fn group_name(raw: &Value) -> Option<&str> {
    raw.pointer("/spec/schedulingGroup/podGroupName")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
}

/// Copies the group the raw pod names onto the decoded pod (or clears a stale
/// copy).
pub fn keep(raw: &Value, pod: &mut Pod) {
    match group_name(raw) {
        Some(name) => {
            pod.metadata
                .annotations
                .get_or_insert_default()
                .insert(SCHEDULING_GROUP.to_owned(), name.to_owned());
        }
        None => {
            if let Some(a) = pod.metadata.annotations.as_mut() {
                a.remove(SCHEDULING_GROUP);
            }
        }
    }
}

/// Removes the in-memory copy again (and an annotation map it alone made), so a
/// pod compared with what the API sent differs only where it was changed.
pub fn strip(pod: &mut Pod) {
    if let Some(a) = pod.metadata.annotations.as_mut() {
        a.remove(SCHEDULING_GROUP);
        if a.is_empty() {
            pod.metadata.annotations = None;
        }
    }
}

/// The pod as the API shows it: its scheduling group back in
/// `spec.schedulingGroup` rather than in the in-memory annotation, so what is
/// written out (a trace) reads back through [`pod_from_value`] the same.
pub fn to_api_value(pod: &Pod) -> Result<Value, serde_json::Error> {
    let group = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SCHEDULING_GROUP))
        .cloned();
    let Some(group) = group else {
        return serde_json::to_value(pod);
    };
    let mut bare = pod.clone();
    strip(&mut bare);
    let mut value = serde_json::to_value(&bare)?;
    if let Some(object) = value.as_object_mut() {
        let spec = object
            .entry("spec")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(spec) = spec.as_object_mut() {
            spec.insert(
                "schedulingGroup".into(),
                serde_json::json!({ "podGroupName": group }),
            );
        }
    }
    Ok(value)
}

/// Decodes a pod, keeping its scheduling group.
pub fn pod_from_value(raw: &Value) -> Result<Pod, serde_json::Error> {
    let mut pod = Pod::deserialize(raw)?;
    keep(raw, &mut pod);
    Ok(pod)
}

/// `deserialize_with` for an optional pod field, keeping its scheduling group.
pub fn deserialize_optional_pod<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Pod>, D::Error> {
    let raw = Option::<Value>::deserialize(d)?;
    match raw {
        None | Some(Value::Null) => Ok(None),
        Some(raw) => pod_from_value(&raw)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// A pod as the watch decodes it: the typed pod with its scheduling group kept.
#[derive(Debug, Clone)]
pub struct WatchedPod(pub Pod);

impl<'de> Deserialize<'de> for WatchedPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        pod_from_value(&raw)
            .map(WatchedPod)
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for WatchedPod {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Resource for WatchedPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Pod::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        Pod::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        Pod::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Pod::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_spec_field_becomes_the_annotation_and_a_forged_one_is_dropped() {
        let pod = pod_from_value(&json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "train"}}
        }))
        .unwrap();
        assert_eq!(
            pod.metadata
                .annotations
                .unwrap()
                .get(SCHEDULING_GROUP)
                .map(String::as_str),
            Some("train")
        );
        let pod = pod_from_value(&json!({
            "metadata": {"name": "p", "annotations": {SCHEDULING_GROUP: "forged"}},
            "spec": {"containers": []}
        }))
        .unwrap();
        assert_eq!(
            pod.metadata.annotations.unwrap().get(SCHEDULING_GROUP),
            None
        );
    }

    #[test]
    fn a_watched_pod_keeps_its_group() {
        let w: WatchedPod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "g"}}
        }))
        .unwrap();
        assert_eq!(
            w.0.metadata
                .annotations
                .unwrap()
                .get(SCHEDULING_GROUP)
                .map(String::as_str),
            Some("g")
        );
    }
}
