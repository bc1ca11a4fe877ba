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

use super::spec_group_tap::{Key, SpecWithGroup};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::{Error as _, IgnoredAny, MapAccess, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::borrow::Cow;

/// In-memory pod annotation: the pod's `spec.schedulingGroup.podGroupName`.
pub const SCHEDULING_GROUP: &str = "vgpu-scheduler.io/scheduling-group";

/// The native PodGroup a pod names in its raw JSON, if any.
pub fn group_name(raw: &Value) -> Option<&str> {
    raw.pointer("/spec/schedulingGroup")
        .and_then(group_named_by)
}

/// The PodGroup a `spec.schedulingGroup` value names (a blank name names none).
pub(super) fn group_named_by(scheduling_group: &Value) -> Option<&str> {
    scheduling_group
        .get("podGroupName")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
}

/// Copies the group the raw pod names onto the decoded pod (or clears a stale
/// copy).
pub fn keep(raw: &Value, pod: &mut Pod) {
    keep_named(group_name(raw), pod);
}

/// Puts `group` on the decoded pod as the in-memory annotation (or clears a
/// stale copy when it names none).
fn keep_named(group: Option<&str>, pod: &mut Pod) {
    match group {
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
    Ok(Option::<WatchedPod>::deserialize(d)?.map(|w| w.0))
}

/// A pod as the watch and `/filter` decode it: the typed pod with its
/// scheduling group kept.
#[derive(Debug, Clone)]
pub struct WatchedPod(pub Pod);

/// Decodes the pod as it streams by, as the typed Pod does (an `apiVersion` or
/// `kind` other than a Pod's is refused; unknown fields are skipped), noting the
/// scheduling group on the way (`spec_group_tap`): no JSON tree of the pod is
/// built first, for the watch's every change of every pod nor for `/filter`.
impl<'de> Deserialize<'de> for WatchedPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PodVisitor).map(WatchedPod)
    }
}

struct PodVisitor;

impl<'de> Visitor<'de> for PodVisitor {
    type Value = Pod;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Pod")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pod, A::Error> {
        let mut pod = Pod::default();
        let mut group = None;
        while let Some(Key(key)) = map.next_key()? {
            match &*key {
                "apiVersion" => expect_text(&mut map, <Pod as k8s_openapi::Resource>::API_VERSION)?,
                "kind" => expect_text(&mut map, <Pod as k8s_openapi::Resource>::KIND)?,
                "metadata" => pod.metadata = map.next_value::<Option<_>>()?.unwrap_or_default(),
                "spec" => {
                    let spec = map.next_value::<Option<SpecWithGroup>>()?;
                    (pod.spec, group) = match spec {
                        Some(SpecWithGroup { spec, group }) => (Some(spec), group),
                        None => (None, None),
                    };
                }
                "status" => pod.status = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        keep_named(group.as_deref(), &mut pod);
        Ok(pod)
    }
}

/// Reads the next value as text and refuses it unless it is `expected`.
fn expect_text<'de, A: MapAccess<'de>>(map: &mut A, expected: &str) -> Result<(), A::Error> {
    let found: Cow<'de, str> = map.next_value()?;
    if found != expected {
        return Err(A::Error::invalid_value(Unexpected::Str(&found), &expected));
    }
    Ok(())
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

    /// The in-memory group annotation a decoded pod carries.
    fn group_annotation(pod: &Pod) -> Option<&str> {
        pod.metadata
            .annotations
            .as_ref()?
            .get(SCHEDULING_GROUP)
            .map(String::as_str)
    }

    #[test]
    fn the_spec_field_becomes_the_annotation_and_a_forged_one_is_dropped() {
        let pod = pod_from_value(&json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "train"}}
        }))
        .unwrap();
        assert_eq!(group_annotation(&pod), Some("train"));
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
        assert_eq!(group_annotation(&w.0), Some("g"));
    }

    /// Pods as the API server and kube-scheduler send them, odd ones included.
    fn samples() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "namespace": "ml", "uid": "u1",
                                "annotations": {"a": "b"},
                                "managedFields": [{"manager": "kubectl", "operation": "Update",
                                                   "fieldsType": "FieldsV1",
                                                   "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
                   "spec": {"schedulerName": "vgpu-scheduler", "nodeName": "n1",
                            "containers": [{"name": "c", "image": "i",
                                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                            "schedulingGroup": {"podGroupName": "train"}},
                   "status": {"phase": "Running",
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"metadata": {"name": "p", "annotations": {SCHEDULING_GROUP: "forged"}},
                   "spec": {"containers": []}}),
            json!({"metadata": {"name": "p"},
                   "spec": {"containers": [], "schedulingGroup": {"podGroupName": "  "}}}),
            json!({"metadata": {"name": "p"},
                   "spec": {"containers": [], "schedulingGroup": {"podGroupName": 7}}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": [], "schedulingGroup": "x"}}),
            json!({"metadata": null, "spec": null, "status": null, "extra": [1, {"x": 2}]}),
            json!({}),
        ]
    }

    #[test]
    fn a_pod_decoded_as_it_streams_is_the_pod_decoded_from_its_tree() {
        for sample in samples() {
            let text = sample.to_string();
            let streamed: WatchedPod = serde_json::from_str(&text).unwrap();
            let from_tree = pod_from_value(&sample).unwrap();
            assert_eq!(streamed.0, from_tree, "{text}");
            let from_value: WatchedPod = serde_json::from_value(sample.clone()).unwrap();
            assert_eq!(from_value.0, from_tree, "{text}");
        }
    }

    #[test]
    fn the_group_is_found_wherever_the_spec_names_it_and_however_its_key_is_written() {
        for text in [
            // Before the containers; the key spelled with an escape (read as owned text).
            r#"{"spec":{"schedulingGroup":{"podGroupName":"g"},"containers":[{"name":"c"}]}}"#,
            r#"{"spec":{"containers":[{"name":"c"}],"scheduling\u0047roup":{"podGroupName":"g"}}}"#,
            // Named twice: the last one counts, as in the tree.
            r#"{"spec":{"schedulingGroup":{"podGroupName":"f"},"containers":[],"schedulingGroup":{"podGroupName":"g"}}}"#,
        ] {
            let streamed: WatchedPod = serde_json::from_str(text).unwrap();
            let from_tree = pod_from_value(&serde_json::from_str(text).unwrap()).unwrap();
            assert_eq!(streamed.0, from_tree, "{text}");
            assert_eq!(group_annotation(&streamed.0), Some("g"), "{text}");
            assert_eq!(
                streamed.0.spec.unwrap().containers.len(),
                usize::from(text.contains("\"c\""))
            );
        }
    }

    #[test]
    fn a_pod_of_another_kind_or_version_is_refused_as_the_typed_pod_refuses_it() {
        for wrong in [
            json!({"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "p"}}),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "p"}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": "none"}}),
            json!(["not", "an", "object"]),
        ] {
            let text = wrong.to_string();
            assert!(serde_json::from_str::<Pod>(&text).is_err(), "{text}");
            assert!(serde_json::from_str::<WatchedPod>(&text).is_err(), "{text}");
        }
    }

    #[test]
    fn an_absent_or_null_pod_in_the_extender_arguments_is_none() {
        #[derive(Deserialize)]
        struct Args {
            #[serde(default, deserialize_with = "deserialize_optional_pod")]
            pod: Option<Pod>,
        }
        let args: Args = serde_json::from_str(r#"{"pod": null}"#).unwrap();
        assert!(args.pod.is_none());
        let args: Args = serde_json::from_str("{}").unwrap();
        assert!(args.pod.is_none());
        let args: Args = serde_json::from_str(
            r#"{"pod": {"metadata": {"name": "p"}, "spec": {"containers": [], "schedulingGroup": {"podGroupName": "g"}}}}"#,
        )
        .unwrap();
        let pod = args.pod.unwrap();
        assert_eq!(group_annotation(&pod), Some("g"));
    }
}
