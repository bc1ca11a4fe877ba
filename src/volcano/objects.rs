//! The scheduler's model of Volcano's `scheduling.volcano.sh/v1beta1` Queue and
//! PodGroup objects, read from JSON.
//!
//! The live watcher and the cluster file both hand over plain JSON. It is first read
//! into the typed resources of [`super::crd`], which refuse a value of the wrong type
//! with the path of the field, and then converted here: Volcano's defaults apply
//! (weight 1, queue `default`, reclaimable when unset, state Open when the controller
//! has not written a status yet), weights are clamped and quantities parsed. Garbage
//! never panics; it becomes an [`ObjectError`] that names the object and the field.

use super::crd;
use super::resources::Resources;
use super::topology::TopologyConstraint;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use thiserror::Error;

/// Queue annotation holding the per-card-type quota of the capacity-card plugin, a
/// JSON object such as `{"NVIDIA-H200": 8}`.
pub const CARD_QUOTA_ANNOTATION: &str = "volcano.sh/card.quota";

/// Queue annotation: the queue's path in the hierarchical DRF tree.
pub const HIERARCHY_ANNOTATION: &str = "volcano.sh/hierarchy";

/// Queue annotation: the weights along that path.
pub const HIERARCHY_WEIGHTS_ANNOTATION: &str = "volcano.sh/hierarchy-weights";

/// The queue every hierarchy hangs from; `parent: root` means "top level".
pub const ROOT_QUEUE: &str = "root";

/// Queue used when a PodGroup names none.
pub const DEFAULT_QUEUE: &str = "default";

/// Namespace of a PodGroup that names none (hand-written cluster files).
use crate::object_namespace::DEFAULT_NAMESPACE;

/// Why a Volcano object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ObjectError {
    /// The document is not a JSON object.
    #[error("{kind}: expected a JSON object")]
    NotAnObject {
        /// `Queue` or `PodGroup`.
        kind: &'static str,
    },
    /// `metadata.name` is missing, empty or not a string.
    #[error("{kind}: metadata.name is missing or not a string")]
    MissingName {
        /// `Queue` or `PodGroup`.
        kind: &'static str,
    },
    /// One field has the wrong type or an invalid value.
    #[error("{kind} {name:?}: {field}: {reason}")]
    Field {
        /// `Queue` or `PodGroup`.
        kind: &'static str,
        /// The object's name (`namespace/name` for PodGroups).
        name: String,
        /// The JSON path of the field, e.g. `spec.capability`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// `status.state` of a Queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum QueueState {
    /// Accepts and schedules jobs.
    Open,
    /// Accepts no new jobs; running ones continue.
    Closed,
    /// Being closed: still has running jobs.
    Closing,
    /// Any other value the controller wrote.
    Unknown,
}

impl QueueState {
    /// Reads the status string; absent means Open (a queue the controller has not
    /// reconciled yet is usable, as in Volcano).
    pub fn parse(state: Option<&str>) -> Self {
        match state {
            None | Some("") | Some("Open") => Self::Open,
            Some("Closed") => Self::Closed,
            Some("Closing") => Self::Closing,
            Some(_) => Self::Unknown,
        }
    }

    /// The status string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "Open",
            Self::Closed => "Closed",
            Self::Closing => "Closing",
            Self::Unknown => "Unknown",
        }
    }
}

/// What the scheduler needs from a Queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueSpec {
    /// `metadata.name` (queues are cluster-scoped).
    pub name: String,
    /// `spec.weight`, default 1, clamped to 1..=65535 as the CRD validation does.
    pub weight: u32,
    /// `spec.capability`: hard cap; absent dimensions are unlimited.
    pub capability: Option<Resources>,
    /// `spec.deserved`: the capacity plugin's fair amount.
    pub deserved: Option<Resources>,
    /// `spec.guarantee.resource`: reserved for this queue.
    pub guarantee: Option<Resources>,
    /// `spec.reclaimable`, absent means true.
    pub reclaimable: bool,
    /// `spec.priority`, higher is served first.
    pub priority: i32,
    /// `spec.parent`; `None` for the root level (absent, empty or `root`).
    pub parent: Option<String>,
    /// `status.state`.
    pub state: QueueState,
    /// Annotation `volcano.sh/card.quota`: card name → number of cards.
    pub card_quota: BTreeMap<String, i64>,
    /// Annotation `volcano.sh/hierarchy` (`root/eng/prod`): the queue's place in the
    /// tree hierarchical DRF shares by.
    pub hierarchy: Option<String>,
    /// Annotation `volcano.sh/hierarchy-weights` (`1/2/8`): a weight per level.
    pub hierarchy_weights: Option<String>,
    /// `spec.affinity`: the node groups the queue's pods go to or avoid; `None`
    /// when the queue has no `affinity` at all (it may then inherit its ancestor's).
    pub affinity: Option<NodeGroupAffinity>,
}

/// A Queue's `spec.affinity`: node groups (values of the node label
/// `volcano.sh/nodegroup-name`) its pods must, should, must not or should not use.
/// Lists are kept as written; the nodegroup plugin reads them as sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeGroupAffinity {
    /// `nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: Vec<String>,
    /// `nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution`, in the
    /// order written (`enablePreferredOrder` scores earlier entries higher).
    pub preferred: Vec<String>,
    /// `nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub anti_required: Vec<String>,
    /// `nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution`.
    pub anti_preferred: Vec<String>,
}

impl NodeGroupAffinity {
    /// Reads `spec.affinity` (both parts optional, as in Volcano).
    fn from_crd(affinity: crd::Affinity) -> Self {
        let lists = |terms: Option<crd::NodeGroupTerms>| {
            let terms = terms.unwrap_or_default();
            (
                terms
                    .required_during_scheduling_ignored_during_execution
                    .unwrap_or_default(),
                terms
                    .preferred_during_scheduling_ignored_during_execution
                    .unwrap_or_default(),
            )
        };
        let (required, preferred) = lists(affinity.node_group_affinity);
        let (anti_required, anti_preferred) = lists(affinity.node_group_anti_affinity);
        Self {
            required,
            preferred,
            anti_required,
            anti_preferred,
        }
    }

    /// Whether no list names a group (an `affinity: {}` with nothing in it).
    pub fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.preferred.is_empty()
            && self.anti_required.is_empty()
            && self.anti_preferred.is_empty()
    }
}

impl QueueSpec {
    /// An Open queue with Volcano's defaults and no limits.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            weight: 1,
            capability: None,
            deserved: None,
            guarantee: None,
            reclaimable: true,
            priority: 0,
            parent: None,
            state: QueueState::Open,
            card_quota: BTreeMap::new(),
            hierarchy: None,
            hierarchy_weights: None,
            affinity: None,
        }
    }

    /// Reads a Queue object.
    pub fn from_json(value: &Value) -> Result<Self, ObjectError> {
        const KIND: &str = "Queue";
        let name = object_name(value, KIND)?;
        let r = Reader {
            kind: KIND,
            name: name.clone(),
        };
        let queue: crd::Queue = crd::read(value).map_err(|e| r.field(e))?;
        let spec = queue.spec;
        let mut annotations = queue.metadata.annotations.unwrap_or_default();

        // Unset (or 0, Go's empty value) is Volcano's default 1. Out-of-range weights
        // are clamped rather than rejected: the CRD would have refused them, and a
        // clamp keeps one bad queue from stopping the whole queue set.
        let weight = spec.weight.map_or(1, |w| w.clamp(1, 65_535).unsigned_abs());
        let guarantee = r.resources(
            spec.guarantee.and_then(|g| g.resource),
            "spec.guarantee.resource",
        )?;
        let card_quota = match annotations.get(CARD_QUOTA_ANNOTATION) {
            None => BTreeMap::new(),
            Some(text) => parse_card_counts(text).map_err(|reason| {
                r.err(
                    &format!("metadata.annotations[{CARD_QUOTA_ANNOTATION}]"),
                    reason,
                )
            })?,
        };

        Ok(Self {
            weight,
            capability: r.resources(spec.capability, "spec.capability")?,
            deserved: r.resources(spec.deserved, "spec.deserved")?,
            guarantee,
            reclaimable: spec.reclaimable.unwrap_or(true),
            priority: spec.priority.unwrap_or(0),
            parent: spec.parent.filter(|p| !p.is_empty() && p != ROOT_QUEUE),
            state: QueueState::parse(queue.status.as_ref().and_then(|s| s.state.as_deref())),
            card_quota,
            hierarchy: annotations.remove(HIERARCHY_ANNOTATION),
            hierarchy_weights: annotations.remove(HIERARCHY_WEIGHTS_ANNOTATION),
            affinity: spec.affinity.map(NodeGroupAffinity::from_crd),
            name,
        })
    }
}

/// What the scheduler needs from a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodGroupSpec {
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty when absent, e.g. in a hand-written cluster file).
    pub uid: String,
    /// `spec.minMember`, default 0.
    pub min_member: i32,
    /// `spec.minTaskMember`: role → minimum.
    pub min_task_member: BTreeMap<String, i32>,
    /// `spec.queue`, default `default`.
    pub queue: String,
    /// `spec.priorityClassName`.
    pub priority_class_name: Option<String>,
    /// `spec.minResources`; `None` when absent or empty.
    pub min_resources: Option<Resources>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<DateTime<Utc>>,
    /// `status.phase` (`Pending`, `Inqueue`, `Running`, ...).
    pub phase: Option<String>,
    /// `spec.networkTopology`: how far apart on the network its members may be.
    pub network_topology: Option<TopologyConstraint>,
    /// Set when the group is Kubernetes' own PodGroup (`scheduling.k8s.io`), not
    /// Volcano's: kube-scheduler owns its status, and it names no queue itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native: Option<crate::gang::native_group::NativeGroup>,
}

impl PodGroupSpec {
    /// Reads a PodGroup object.
    pub fn from_json(value: &Value) -> Result<Self, ObjectError> {
        const KIND: &str = "PodGroup";
        let name = object_name(value, KIND)?;
        // Errors name the group `namespace/name`; when the namespace is not text, that
        // is the error, and the name alone identifies the group.
        let shown = match value.pointer("/metadata/namespace") {
            Some(Value::String(ns)) if !ns.is_empty() => format!("{ns}/{name}"),
            None | Some(Value::Null | Value::String(_)) => format!("{DEFAULT_NAMESPACE}/{name}"),
            Some(_) => name.clone(),
        };
        let r = Reader {
            kind: KIND,
            name: shown,
        };
        let group: crd::PodGroup = crd::read(value).map_err(|e| r.field(e))?;
        let meta = group.metadata;
        let spec = group.spec;

        let creation_timestamp = meta
            .creation_timestamp
            .map(|t| {
                to_chrono(&t.0).ok_or_else(|| {
                    r.err(
                        "metadata.creationTimestamp",
                        format!("{} is out of range", t.0),
                    )
                })
            })
            .transpose()?;
        let min_member = spec
            .min_member
            .map(|n| r.non_negative("spec.minMember", n))
            .transpose()?
            .unwrap_or(0);
        let min_task_member = spec
            .min_task_member
            .unwrap_or_default()
            .into_iter()
            .map(|(role, n)| {
                let n = r.non_negative(&format!("spec.minTaskMember[{role}]"), n)?;
                Ok((role, n))
            })
            .collect::<Result<BTreeMap<_, _>, ObjectError>>()?;
        let network_topology = spec
            .network_topology
            .as_ref()
            .map(TopologyConstraint::of)
            .transpose()
            .map_err(|(field, reason)| r.err(field, reason))?;

        Ok(Self {
            namespace: meta
                .namespace
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
            uid: meta.uid.unwrap_or_default(),
            min_member,
            min_task_member,
            queue: spec
                .queue
                .filter(|q| !q.is_empty())
                .unwrap_or_else(|| DEFAULT_QUEUE.to_owned()),
            priority_class_name: spec.priority_class_name.filter(|p| !p.is_empty()),
            min_resources: r.resources(spec.min_resources, "spec.minResources")?,
            annotations: meta.annotations.unwrap_or_default(),
            creation_timestamp,
            phase: group.status.and_then(|s| s.phase).filter(|p| !p.is_empty()),
            network_topology,
            native: None,
            name,
        })
    }
}

/// Reads a JSON object of card name → count (the value of `volcano.sh/card.quota` or
/// `volcano.sh/card.request`). Counts are non-negative integers, as JSON numbers or
/// numeric strings.
pub fn parse_card_counts(text: &str) -> Result<BTreeMap<String, i64>, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("{text:?} is not valid JSON: {e}"))?;
    let object = value
        .as_object()
        .ok_or_else(|| format!("expected a JSON object of card name to count, got {value}"))?;
    let mut out = BTreeMap::new();
    for (card, v) in object {
        if card.is_empty() {
            return Err("empty card name".to_owned());
        }
        let count = match v {
            Value::String(s) => s.trim().parse::<i64>().ok(),
            other => whole_number(other),
        }
        .filter(|n| *n >= 0)
        .ok_or_else(|| format!("card {card:?}: expected a non-negative integer, got {v}"))?;
        out.insert(card.clone(), count);
    }
    Ok(out)
}

/// An integer JSON number (`4` or `4.0`), or `None`.
fn whole_number(v: &Value) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let f = v.as_f64()?;
    // Only exact whole numbers well inside i64 qualify; the cast is then lossless.
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

/// The object's name, checked before anything else so that every later error can
/// name the object.
fn object_name(value: &Value, kind: &'static str) -> Result<String, ObjectError> {
    if !value.is_object() {
        return Err(ObjectError::NotAnObject { kind });
    }
    value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .ok_or(ObjectError::MissingName { kind })
}

/// A Kubernetes timestamp as chrono's; `None` only past chrono's range.
fn to_chrono(t: &k8s_openapi::jiff::Timestamp) -> Option<DateTime<Utc>> {
    // Before 1970 both parts are negative, which adding them handles.
    DateTime::from_timestamp(t.as_second(), 0)?
        .checked_add_signed(TimeDelta::nanoseconds(i64::from(t.subsec_nanosecond())))
}

/// Errors that name the object and the field.
struct Reader {
    kind: &'static str,
    name: String,
}

impl Reader {
    fn err(&self, field: &str, reason: String) -> ObjectError {
        ObjectError::Field {
            kind: self.kind,
            name: self.name.clone(),
            field: field.to_owned(),
            reason,
        }
    }

    /// A field whose value does not fit its type.
    fn field(&self, e: crd::FieldError) -> ObjectError {
        self.err(&e.field, e.reason)
    }

    /// A member count, which Volcano types as `int32` but never means negative.
    fn non_negative(&self, field: &str, n: i32) -> Result<i32, ObjectError> {
        if n < 0 {
            return Err(self.err(field, format!("must not be negative, got {n}")));
        }
        Ok(n)
    }

    /// An optional resource list; an empty list reads as `None` because it limits or
    /// reserves nothing.
    fn resources(
        &self,
        list: Option<crd::ResourceList>,
        field: &str,
    ) -> Result<Option<Resources>, ObjectError> {
        let Some(list) = list else {
            return Ok(None);
        };
        let r = Resources::from_quantities(&list).map_err(|e| self.err(field, e.to_string()))?;
        Ok((r.dimension_count() > 0).then_some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_full_queue() {
        let q = QueueSpec::from_json(&json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "team-a", "annotations": {
                "volcano.sh/card.quota": "{\"NVIDIA-H200\": 8, \"NVIDIA-GeForce-RTX-4090\": \"4\"}"}},
            "spec": {
                "weight": 3, "priority": 80000, "reclaimable": false, "parent": "org",
                "capability": {"cpu": "64", "nvidia.com/gpu": 16},
                "deserved": {"nvidia.com/gpu": "8"},
                "guarantee": {"resource": {"nvidia.com/gpu": "2"}}
            },
            "status": {"state": "Closing"}
        }))
        .unwrap();
        assert_eq!(q.name, "team-a");
        assert_eq!(q.weight, 3);
        assert_eq!(q.priority, 80000);
        assert!(!q.reclaimable);
        assert_eq!(q.parent.as_deref(), Some("org"));
        assert_eq!(q.state, QueueState::Closing);
        assert_eq!(q.capability.as_ref().unwrap().get("nvidia.com/gpu"), 16_000);
        assert_eq!(q.capability.as_ref().unwrap().get("cpu"), 64_000);
        assert_eq!(q.deserved.as_ref().unwrap().get("nvidia.com/gpu"), 8_000);
        assert_eq!(q.guarantee.as_ref().unwrap().get("nvidia.com/gpu"), 2_000);
        assert_eq!(q.card_quota.get("NVIDIA-H200"), Some(&8));
        assert_eq!(q.card_quota.get("NVIDIA-GeForce-RTX-4090"), Some(&4));
    }

    #[test]
    fn queue_defaults_follow_volcano() {
        let q = QueueSpec::from_json(&json!({"metadata": {"name": "default"},
            "spec": {"guarantee": {}, "parent": "root"}}))
        .unwrap();
        assert_eq!(q, QueueSpec::new("default"));
        let q = QueueSpec::from_json(&json!({"metadata": {"name": "q"},
            "spec": {"weight": 0, "parent": ""}, "status": {"state": "Weird"}}))
        .unwrap();
        assert_eq!(q.weight, 1);
        assert_eq!(q.parent, None);
        assert_eq!(q.state, QueueState::Unknown);
        let q = QueueSpec::from_json(&json!({"metadata": {"name": "q"},
            "spec": {"weight": 1_000_000, "capability": {}}}))
        .unwrap();
        assert_eq!(q.weight, 65_535);
        assert_eq!(q.capability, None);
    }

    #[test]
    fn queue_garbage_names_queue_and_field() {
        let cases = [
            (
                json!({"metadata": {"name": "a", "annotations": {"volcano.sh/card.quota": "8"}}}),
                "metadata.annotations[volcano.sh/card.quota]",
            ),
            (
                json!({"metadata": {"name": "a", "annotations": {"volcano.sh/card.quota": "{\"X\": -1}"}}}),
                "metadata.annotations[volcano.sh/card.quota]",
            ),
            (
                json!({"metadata": {"name": "a", "annotations": {"volcano.sh/card.quota": "{oops"}}}),
                "metadata.annotations[volcano.sh/card.quota]",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"weight": "3"}}),
                "spec.weight",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"priority": 1e12}}),
                "spec.priority",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"reclaimable": "yes"}}),
                "spec.reclaimable",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"parent": 7}}),
                "spec.parent",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"capability": {"cpu": "lots"}}}),
                "spec.capability",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"guarantee": {"resource": []}}}),
                "spec.guarantee.resource",
            ),
            (json!({"metadata": {"name": "a"}, "spec": []}), "spec"),
            (
                json!({"metadata": {"name": "a"}, "status": {"state": 1}}),
                "status.state",
            ),
        ];
        for (doc, field) in cases {
            let e = QueueSpec::from_json(&doc).unwrap_err();
            let text = e.to_string();
            assert!(text.starts_with("Queue \"a\": "), "{text}");
            assert!(text.contains(field), "{field} not in {text}");
        }
        assert_eq!(
            QueueSpec::from_json(&json!({"spec": {}})).unwrap_err(),
            ObjectError::MissingName { kind: "Queue" }
        );
        assert!(QueueSpec::from_json(&json!("queue")).is_err());
    }

    #[test]
    fn reads_a_podgroup() {
        let pg = PodGroupSpec::from_json(&json!({
            "metadata": {"name": "job-1", "namespace": "ml", "uid": "u-1",
                "creationTimestamp": "2025-07-26T02:38:24Z",
                "annotations": {"volcano.sh/card.request": "{\"NVIDIA-H200\":2}"}},
            "spec": {"minMember": 4, "minTaskMember": {"worker": 3, "ps": 1}, "queue": "team-a",
                "priorityClassName": "pc-high",
                "minResources": {"cpu": "4", "nvidia.com/gpu": "4"}},
            "status": {"phase": "Inqueue"}
        }))
        .unwrap();
        assert_eq!(pg.namespace, "ml");
        assert_eq!(pg.name, "job-1");
        assert_eq!(pg.uid, "u-1");
        assert_eq!(pg.min_member, 4);
        assert_eq!(pg.min_task_member.get("worker"), Some(&3));
        assert_eq!(pg.queue, "team-a");
        assert_eq!(pg.priority_class_name.as_deref(), Some("pc-high"));
        assert_eq!(
            pg.min_resources.as_ref().unwrap().get("nvidia.com/gpu"),
            4000
        );
        assert_eq!(pg.phase.as_deref(), Some("Inqueue"));
        assert_eq!(
            pg.creation_timestamp.unwrap().to_rfc3339(),
            "2025-07-26T02:38:24+00:00"
        );
        assert_eq!(
            pg.annotations
                .get("volcano.sh/card.request")
                .map(String::as_str),
            Some("{\"NVIDIA-H200\":2}")
        );
    }

    #[test]
    fn podgroup_defaults_and_garbage() {
        let pg = PodGroupSpec::from_json(&json!({"metadata": {"name": "pg"}})).unwrap();
        assert_eq!(pg.namespace, "default");
        assert_eq!(pg.queue, "default");
        assert_eq!(pg.min_member, 0);
        assert_eq!(pg.min_resources, None);
        assert_eq!(pg.phase, None);

        let cases = [
            (
                json!({"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": -1}}),
                "spec.minMember",
            ),
            (
                json!({"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": "2"}}),
                "spec.minMember",
            ),
            (
                json!({"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minTaskMember": {"w": 1.5}}}),
                "spec.minTaskMember[w]",
            ),
            (
                json!({"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minResources": {"cpu": "x"}}}),
                "spec.minResources",
            ),
            (
                json!({"metadata": {"name": "pg", "namespace": "ml", "creationTimestamp": "yesterday"}}),
                "metadata.creationTimestamp",
            ),
            (
                json!({"metadata": {"name": "pg", "namespace": "ml", "annotations": {"a": 1}}}),
                "metadata.annotations[a]",
            ),
            (
                json!({"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"queue": 5}}),
                "spec.queue",
            ),
            (
                json!({"metadata": {"name": "pg", "namespace": "ml"}, "status": {"phase": {}}}),
                "status.phase",
            ),
        ];
        for (doc, field) in cases {
            let text = PodGroupSpec::from_json(&doc).unwrap_err().to_string();
            assert!(text.starts_with("PodGroup \"ml/pg\": "), "{text}");
            assert!(text.contains(field), "{field} not in {text}");
        }
    }

    #[test]
    fn card_counts_accept_numbers_and_numeric_strings() {
        let m = parse_card_counts(r#"{"A": 2, "B": "3", "C": 4.0}"#).unwrap();
        assert_eq!(
            m,
            BTreeMap::from([("A".into(), 2), ("B".into(), 3), ("C".into(), 4)])
        );
        assert!(parse_card_counts(r#"{"A": 1.5}"#).is_err());
        assert!(parse_card_counts(r#"{"": 1}"#).is_err());
        assert!(parse_card_counts("[]").is_err());
    }
}

#[cfg(test)]
#[path = "objects_crd_tests.rs"]
mod crd_tests;
