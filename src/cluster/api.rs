//! The writes and point reads the scheduler makes against a cluster. Implemented by
//! the in-memory cluster (`--cluster-file`) and by the live Kubernetes client.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Serialize;
use std::collections::BTreeMap;

/// Why a cluster call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The object does not exist.
    #[error("{kind} {name:?} not found")]
    NotFound { kind: &'static str, name: String },
    /// A precondition (resourceVersion, UID, already bound) failed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The API server refused for now (429): an eviction a PodDisruptionBudget
    /// does not allow.
    #[error("refused: {0}")]
    Refused(String),
    /// Anything else (transport, server error).
    #[error("{0}")]
    Other(String),
}

/// A merge patch of annotations and labels: `Some` sets a key, `None` deletes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataPatch {
    /// Annotation changes.
    pub annotations: BTreeMap<String, Option<String>>,
    /// Label changes.
    pub labels: BTreeMap<String, Option<String>>,
}

/// How to lift a scheduling gate.
#[derive(Debug, Clone, Copy)]
pub struct GateLift<'a> {
    /// The gate.
    pub gate: &'a str,
    /// A node to pin the pod to: the same update narrows the pod's required
    /// node affinity to it (see `gang::pin`), the only moment Kubernetes still
    /// accepts that.
    pub pin: Option<&'a str>,
    /// Written in the same update (a gang of one is released with its plan in
    /// one write), or alone when the gate is gone already.
    pub metadata: &'a MetadataPatch,
    /// The pod as the watch last showed it: the update is tried against that
    /// version first, and the pod is read only when it changed since.
    pub seen: Option<&'a k8s_openapi::api::core::v1::Pod>,
}

impl<'a> GateLift<'a> {
    /// Lifts `gate` and nothing more, reading the pod first.
    pub fn only(gate: &'a str) -> Self {
        static NOTHING: std::sync::OnceLock<MetadataPatch> = std::sync::OnceLock::new();
        Self {
            gate,
            pin: None,
            metadata: NOTHING.get_or_init(MetadataPatch::default),
            seen: None,
        }
    }
}

/// Metadata a Binding carries onto the pod it binds, in the same write as the
/// node: the API server sets each annotation (and, with the
/// `PodTopologyLabelsAdmission` gate of 1.35+, each label) on the pod. It can
/// only set keys, never remove them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindingMetadata {
    /// Annotations to set on the pod.
    pub annotations: BTreeMap<String, String>,
    /// Labels to set on the pod where the API server copies them.
    pub labels: BTreeMap<String, String>,
}

/// Severity of an event, as Kubernetes names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventType {
    Normal,
    Warning,
}

/// An event about a pod, reported with the scheduler name as source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerEvent {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Pod UID (empty when unknown): `kubectl describe` finds a pod's events by it.
    pub uid: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// `FilteringSucceed`, `FilteringFailed`, `BindingSucceed`, `BindingFailed`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// When it happened.
    pub time: DateTime<Utc>,
}

/// Cluster operations the scheduler needs.
#[async_trait]
pub trait ClusterApi: Send + Sync {
    /// Makes the pod known to the store if it keeps pods itself (file mode keeps the
    /// pods kube-scheduler shows it; a live cluster already has them).
    async fn remember_pod(&self, pod: &Pod);
    /// Lets go of a pod [`ClusterApi::remember_pod`] kept, once it holds nothing
    /// (it never fitted, or its reservation expired), so a store that keeps pods
    /// itself does not grow with every pod ever filtered. Pods the store had from
    /// elsewhere, and pods already bound, stay. A live cluster keeps nothing.
    async fn forget_pod(&self, _namespace: &str, _name: &str) {}
    /// Reads a pod.
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError>;
    /// Merge-patches a pod's annotations and labels.
    async fn patch_pod_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: &MetadataPatch,
    ) -> Result<(), ApiError>;
    /// Creates the pod's Binding to `node`, with the pod UID as precondition,
    /// carrying `metadata` onto the pod.
    async fn bind_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        metadata: &BindingMetadata,
    ) -> Result<(), ApiError>;
    /// Reads a node.
    async fn get_node(&self, name: &str) -> Result<Option<Node>, ApiError>;
    /// Merge-patches a node's annotations, failing with `Conflict` when its
    /// resourceVersion is no longer `resource_version`.
    async fn patch_node_annotations(
        &self,
        name: &str,
        annotations: &BTreeMap<String, Option<String>>,
        resource_version: Option<&str>,
    ) -> Result<(), ApiError>;
    /// Records an event.
    async fn record_event(&self, event: SchedulerEvent);
    /// Removes one scheduling gate from a pod (no-op when it is not there), so
    /// kube-scheduler starts scheduling it (see [`GateLift`]).
    async fn remove_scheduling_gate(
        &self,
        namespace: &str,
        name: &str,
        lift: &GateLift<'_>,
    ) -> Result<(), ApiError>;
    /// Whether the scheduler hears of changes through watches (a live cluster).
    /// When it does not (a cluster file), it applies its own writes itself.
    fn reports_changes(&self) -> bool {
        true
    }
    /// Evicts a pod through the Eviction API (respects PodDisruptionBudgets).
    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError>;
    /// Merge-patches the status of a Volcano PodGroup or Queue.
    async fn patch_volcano_status(
        &self,
        object: &VolcanoObject,
        status: &serde_json::Value,
    ) -> Result<(), ApiError>;
}

/// A Volcano object whose status the planner writes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VolcanoObject {
    /// `scheduling.volcano.sh/v1beta1` PodGroup.
    PodGroup { namespace: String, name: String },
    /// `scheduling.volcano.sh/v1beta1` Queue (cluster-scoped).
    Queue { name: String },
}

impl std::fmt::Display for VolcanoObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VolcanoObject::PodGroup { namespace, name } => write!(f, "PodGroup {namespace}/{name}"),
            VolcanoObject::Queue { name } => write!(f, "Queue {name}"),
        }
    }
}
