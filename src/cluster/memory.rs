//! An in-memory cluster: the store behind `--cluster-file`. It behaves like the API
//! server for the calls the scheduler makes (resourceVersion preconditions, UID
//! preconditions on binding, 409 when already bound) and, optionally, like HAMi's
//! device plugin after a bind (marks the pod allocated and releases the node lock),
//! so a local cluster keeps scheduling without kubelets.

use super::api::{
    ApiError, BindingMetadata, ClusterApi, GateLift, MetadataPatch, SchedulerEvent, VolcanoObject,
};
use crate::annotations::{BIND_PHASE, NODE_LOCK};
use crate::object_namespace::namespace_of;
use async_trait::async_trait;
use gate_lifts::GateLifts;
use k8s_openapi::api::core::v1::{Node, Pod};
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::FxBuildHasher;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many events the store keeps for `/debug/state`.
const EVENT_HISTORY: usize = 1000;

/// A pod kept as compact JSON: a typed `Pod` is several KiB in memory, and a
/// cluster file may hold tens of thousands of pods that are only read back when one
/// of them is bound or owns a node lock. Its annotations are kept apart from the
/// rest, so the scheduler's annotation patches (two per pod placed) rewrite a few
/// hundred bytes instead of decoding and re-encoding the whole pod.
struct StoredPod {
    uid: Option<Box<str>>,
    /// The annotations as a JSON object; `None` when there are none.
    annotations: Option<Box<[u8]>>,
    /// The pod without its annotations.
    body: CompactJson<Pod>,
    /// The pod's scheduling gates and the lifts `body` does not show yet;
    /// `None` for a pod whose spec lists no gates.
    gates: Option<Box<GateLifts>>,
}

/// An object serialised to JSON bytes, decoded on each read.
struct CompactJson<T> {
    bytes: Box<[u8]>,
    kind: std::marker::PhantomData<T>,
}

impl<T: serde::Serialize + serde::de::DeserializeOwned> CompactJson<T> {
    fn encode(object: &T) -> Self {
        Self {
            bytes: serde_json::to_vec(object)
                .unwrap_or_default()
                .into_boxed_slice(),
            kind: std::marker::PhantomData,
        }
    }
}

fn unreadable(kind: &str, e: &serde_json::Error) -> ApiError {
    ApiError::Other(format!("stored {kind} is unreadable: {e}"))
}

type Annotations = BTreeMap<String, String>;

fn encode_annotations(annotations: Option<&Annotations>) -> Option<Box<[u8]>> {
    let annotations = annotations.filter(|a| !a.is_empty())?;
    serde_json::to_vec(annotations)
        .ok()
        .map(Vec::into_boxed_slice)
}

impl StoredPod {
    /// Stores a pod. A pod already on a node is only ever read back for its
    /// identity, annotations, node, scheduler name, phase and number of init
    /// containers (lock
    /// owners, idempotent binds, the ledger's view of it), so the rest of its spec
    /// is not kept: a bound pod costs a few hundred bytes instead of kilobytes.
    fn new(pod: &Pod) -> Self {
        let placed = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let mut body = if placed { slim(pod) } else { pod.clone() };
        let annotations = body.metadata.annotations.take();
        Self {
            uid: pod.metadata.uid.as_deref().map(Box::from),
            annotations: encode_annotations(annotations.as_ref()),
            gates: GateLifts::of(&body),
            body: CompactJson::encode(&body),
        }
    }

    fn annotations(&self) -> Result<Option<Annotations>, ApiError> {
        decode_annotations(self.annotations.as_deref())
    }

    fn pod(&self) -> Result<Pod, ApiError> {
        decode_pod(
            &self.body.bytes,
            self.annotations.as_deref(),
            self.gates.as_deref(),
        )
    }

    /// What [`Self::pod`] reads, copied to be decoded outside the store's lock.
    fn copy(&self) -> PodCopy {
        PodCopy {
            body: self.body.bytes.clone(),
            annotations: self.annotations.clone(),
            gates: self.gates.clone(),
        }
    }

    /// Applies annotation changes without touching the rest of the pod.
    fn patch_annotations(
        &mut self,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<(), ApiError> {
        let mut annotations = self.annotations()?;
        apply(&mut annotations, changes);
        self.annotations = encode_annotations(annotations.as_ref());
        Ok(())
    }
}

/// A stored pod's parts, copied out of the store.
struct PodCopy {
    body: Box<[u8]>,
    annotations: Option<Box<[u8]>>,
    gates: Option<Box<GateLifts>>,
}

impl PodCopy {
    fn pod(self) -> Result<Pod, ApiError> {
        decode_pod(
            &self.body,
            self.annotations.as_deref(),
            self.gates.as_deref(),
        )
    }
}

fn decode_annotations(bytes: Option<&[u8]>) -> Result<Option<Annotations>, ApiError> {
    bytes
        .map(|bytes| serde_json::from_slice(bytes).map_err(|e| unreadable("pod", &e)))
        .transpose()
}

/// A stored pod from its body, its annotations and the gate lifts its body
/// does not show yet.
fn decode_pod(
    body: &[u8],
    annotations: Option<&[u8]>,
    gates: Option<&GateLifts>,
) -> Result<Pod, ApiError> {
    let mut pod: Pod = serde_json::from_slice(body).map_err(|e| unreadable("pod", &e))?;
    pod.metadata.annotations = decode_annotations(annotations)?;
    if let Some(gates) = gates {
        gates.apply(&mut pod);
    }
    Ok(pod)
}

/// What is kept of a placed pod: metadata (without managed fields), node,
/// scheduler name, phase, and containers by name and resources only.
fn slim(pod: &Pod) -> Pod {
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
    let metadata = crate::metadata_copy::without_managed_fields(&pod.metadata);
    let spec = pod.spec.as_ref();
    // Names and resources only: their number decides how the pod's GPU usage adds
    // up, and the ledger books device annotations only for pods asking for a vGPU
    // resource (see `scheduler::claims`).
    let trimmed = |list: &Vec<Container>| -> Vec<Container> {
        list.iter()
            .map(|c| Container {
                name: c.name.clone(),
                resources: c.resources.clone(),
                ..Default::default()
            })
            .collect()
    };
    let init_containers = spec.and_then(|s| s.init_containers.as_ref()).map(trimmed);
    let containers = spec.map(|s| trimmed(&s.containers)).unwrap_or_default();
    Pod {
        metadata,
        spec: Some(PodSpec {
            node_name: spec.and_then(|s| s.node_name.clone()),
            // The ledger books a pod's device annotations only for pods its
            // scheduler names (see `scheduler::claims`).
            scheduler_name: spec.and_then(|s| s.scheduler_name.clone()),
            init_containers,
            containers,
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            ..Default::default()
        }),
    }
}

/// A node kept as compact JSON, with its annotations (most of it: the register
/// annotation) decoded beside it: every bind takes and releases the node lock
/// annotation, which then costs a map update rather than a decode and an encode.
struct StoredNode {
    resource_version: String,
    annotations: Annotations,
    /// The node without annotations or resourceVersion.
    body: CompactJson<Node>,
}

impl StoredNode {
    fn new(node: &Node, resource_version: String) -> Self {
        let mut body = node.clone();
        let annotations = body.metadata.annotations.take().unwrap_or_default();
        body.metadata.resource_version = None;
        Self {
            resource_version,
            annotations,
            body: CompactJson::encode(&body),
        }
    }
}

/// What is needed to rebuild a stored node outside the store's lock.
struct NodeCopy {
    resource_version: String,
    annotations: Annotations,
    body: Box<[u8]>,
}

impl NodeCopy {
    fn node(self) -> Result<Node, ApiError> {
        let mut node: Node =
            serde_json::from_slice(&self.body).map_err(|e| unreadable("node", &e))?;
        node.metadata.annotations = Some(self.annotations);
        node.metadata.resource_version = Some(self.resource_version);
        Ok(node)
    }
}

/// Pods by `namespace/name`. Tens of thousands of entries: slots are kept small
/// (one boxed key, a boxed UID, the JSON and, for a gated pod, its boxed
/// gates), as the table doubles when it grows.
type PodTable = HashMap<Box<str>, StoredPod>;

/// Shards of the pod table.
const POD_SHARDS: usize = 16;

/// The pod table in separately locked shards, so that calls about different
/// pods (a filter's patch of one, a bind of another) never wait for each other.
struct PodShards([Mutex<PodTable>; POD_SHARDS]);

impl PodShards {
    fn new() -> Self {
        Self(std::array::from_fn(|_| Mutex::new(PodTable::default())))
    }

    /// The locked shard that holds `key`.
    fn lock(&self, key: &str) -> MutexGuard<'_, PodTable> {
        let shard = FxBuildHasher.hash_one(key) % POD_SHARDS as u64;
        self.0[shard as usize].lock()
    }
}

/// The in-memory cluster. Each kind of object has its own lock, so a bind writing
/// the node lock does not wait for a filter patching a pod; JSON is decoded
/// outside the locks where a read allows it.
pub struct MemoryCluster {
    pods: PodShards,
    nodes: Mutex<BTreeMap<String, StoredNode>>,
    events: Mutex<VecDeque<SchedulerEvent>>,
    volcano_status: Mutex<BTreeMap<VolcanoObject, serde_json::Value>>,
    /// Pods the store learned from `/filter` requests rather than from the cluster
    /// file: those are let go of again once they hold nothing.
    learned: Mutex<HashSet<Box<str>>>,
    /// Pods evicted (`namespace/name`), oldest first, until taken (the last
    /// [`EVENT_HISTORY`] of them).
    evicted: Mutex<VecDeque<Box<str>>>,
    /// Pods whose scheduling gate was lifted (`namespace/name`), in order, until
    /// taken; kept only when asked for (see [`Self::recording_lifted_gates`]).
    lifted_gates: Option<Mutex<Vec<Box<str>>>>,
    /// The last resourceVersion handed out.
    version: AtomicU64,
    simulate_device_plugin: bool,
    /// Whether the scheduler is told of changes by watches (tests that play a
    /// live cluster's watches over this store); a cluster file is not.
    reports_changes: bool,
}

fn pod_key(pod: &Pod) -> Option<Box<str>> {
    let name = pod.metadata.name.as_deref()?;
    Some(key(namespace_of(&pod.metadata), name))
}

/// A pod's key in the store: `namespace/name` in one allocation (neither may
/// contain a slash).
fn key(namespace: &str, name: &str) -> Box<str> {
    let mut k = String::with_capacity(namespace.len() + 1 + name.len());
    k.push_str(namespace);
    k.push('/');
    k.push_str(name);
    k.into_boxed_str()
}

/// The stored pod under `key`, or the API server's NotFound.
fn stored_pod<'s>(pods: &'s mut PodTable, key: &str) -> Result<&'s mut StoredPod, ApiError> {
    pods.get_mut(key).ok_or_else(|| pod_not_found(key))
}

fn pod_not_found(key: &str) -> ApiError {
    ApiError::NotFound {
        kind: "pod",
        name: key.to_string(),
    }
}

fn node_not_found(name: &str) -> ApiError {
    ApiError::NotFound {
        kind: "node",
        name: name.to_string(),
    }
}

fn apply(map: &mut Option<BTreeMap<String, String>>, changes: &BTreeMap<String, Option<String>>) {
    apply_to(map.get_or_insert_with(BTreeMap::new), changes);
}

fn apply_to(m: &mut BTreeMap<String, String>, changes: &BTreeMap<String, Option<String>>) {
    for (k, v) in changes {
        match v {
            Some(v) => {
                m.insert(k.clone(), v.clone());
            }
            None => {
                m.remove(k);
            }
        }
    }
}

impl MemoryCluster {
    /// A store holding `nodes` and `pods`.
    pub fn new(nodes: Vec<Node>, pods: Vec<Pod>, simulate_device_plugin: bool) -> Self {
        let cluster = Self {
            pods: PodShards::new(),
            nodes: Mutex::new(BTreeMap::new()),
            events: Mutex::new(VecDeque::new()),
            volcano_status: Mutex::new(BTreeMap::new()),
            learned: Mutex::new(HashSet::new()),
            evicted: Mutex::new(VecDeque::new()),
            lifted_gates: None,
            version: AtomicU64::new(0),
            simulate_device_plugin,
            reports_changes: false,
        };
        cluster.insert_all(nodes, pods);
        cluster
    }

    /// The store as a live cluster looks to the scheduler: its changes are
    /// reported by watches (which the caller plays).
    pub fn reporting_changes(mut self) -> Self {
        self.reports_changes = true;
        self
    }

    /// The store remembers which pods had a scheduling gate lifted, for a caller
    /// that follows gated pods (the simulator) to learn which were released
    /// without reading every one back.
    pub fn recording_lifted_gates(mut self) -> Self {
        self.lifted_gates = Some(Mutex::new(Vec::new()));
        self
    }

    /// The pods whose scheduling gate was lifted since the last call
    /// (`namespace/name`), in the order they were lifted; empty unless
    /// [`Self::recording_lifted_gates`].
    pub fn take_lifted_gates(&self) -> Vec<Box<str>> {
        self.lifted_gates
            .as_ref()
            .map(|lifted| std::mem::take(&mut *lifted.lock()))
            .unwrap_or_default()
    }

    fn next_version(&self) -> String {
        (self.version.fetch_add(1, Ordering::Relaxed) + 1).to_string()
    }

    /// Adds nodes and pods, consuming them (each typed pod is dropped as soon as it
    /// is stored compactly).
    pub fn insert_all(&self, nodes: Vec<Node>, pods: Vec<Pod>) {
        {
            let mut stored = self.nodes.lock();
            for node in nodes {
                if let Some(name) = node.metadata.name.clone() {
                    stored.insert(name, StoredNode::new(&node, self.next_version()));
                }
            }
        }
        for pod in pods {
            if let Some(k) = pod_key(&pod) {
                let stored = StoredPod::new(&pod);
                self.pods.lock(&k).insert(k, stored);
            }
        }
    }

    /// Adds one node.
    pub fn insert_node(&self, node: Node) {
        self.insert_all(vec![node], Vec::new());
    }

    /// Adds one pod (stored compactly).
    pub fn insert_pod(&self, pod: &Pod) {
        if let Some(k) = pod_key(pod) {
            let stored = StoredPod::new(pod);
            self.pods.lock(&k).insert(k, stored);
        }
    }

    /// Deletes a pod (it finished and its controller removed it); false when it
    /// was not there.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        let key = key(namespace, name);
        self.learned.lock().remove(&key);
        self.pods.lock(&key).remove(&key).is_some()
    }

    /// The pods evicted since the last call (`namespace/name`), oldest first.
    pub fn take_evicted(&self) -> Vec<Box<str>> {
        std::mem::take(&mut *self.evicted.lock()).into()
    }

    /// Events recorded so far, oldest first.
    pub fn events(&self) -> Vec<SchedulerEvent> {
        self.events.lock().iter().cloned().collect()
    }

    /// PodGroup and Queue statuses written so far.
    pub fn volcano_statuses(&self) -> BTreeMap<VolcanoObject, serde_json::Value> {
        self.volcano_status.lock().clone()
    }

    /// Drops what was written to `object`'s status, as deleting it and making
    /// it again would.
    #[cfg(test)]
    pub fn forget_volcano_status(&self, object: &VolcanoObject) {
        self.volcano_status.lock().remove(object);
    }

    /// Releases the node lock `namespace/name` holds on `node`, as HAMi's device
    /// plugin does once it has handed the pod its GPUs.
    fn release_node_lock(&self, node: &str, namespace: &str, name: &str) {
        let owner_suffix = format!(",{namespace},{name}");
        let mut nodes = self.nodes.lock();
        if let Some(stored) = nodes.get_mut(node)
            && stored
                .annotations
                .get(NODE_LOCK)
                .is_some_and(|v| v.ends_with(&owner_suffix))
        {
            stored.annotations.remove(NODE_LOCK);
            stored.resource_version = self.next_version();
        }
    }
}

#[async_trait]
impl ClusterApi for MemoryCluster {
    async fn remember_pod(&self, pod: &Pod) {
        let Some(k) = pod_key(pod) else {
            return;
        };
        let uid = pod.metadata.uid.as_deref();
        let known = |pods: &PodTable| pods.get(&k).is_some_and(|p| p.uid.as_deref() == uid);
        if known(&self.pods.lock(&k)) {
            return;
        }
        // Encoded outside the lock; a write of the same pod in between wins.
        let stored = StoredPod::new(pod);
        let mut pods = self.pods.lock(&k);
        if !known(&pods) {
            self.learned.lock().insert(k.clone());
            pods.insert(k, stored);
        }
    }

    async fn forget_pod(&self, namespace: &str, name: &str) {
        let key = key(namespace, name);
        if !self.learned.lock().contains(&key) {
            return;
        }
        let mut pods = self.pods.lock(&key);
        let bound = pods
            .get(&key)
            .and_then(|p| p.pod().ok())
            .is_some_and(|p| p.spec.is_some_and(|s| s.node_name.is_some()));
        if !bound {
            pods.remove(&key);
            self.learned.lock().remove(&key);
        }
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError> {
        // Copied under the lock, decoded outside it.
        let key = key(namespace, name);
        let copy = self.pods.lock(&key).get(&key).map(StoredPod::copy);
        copy.map(PodCopy::pod).transpose()
    }

    async fn patch_pod_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: &MetadataPatch,
    ) -> Result<(), ApiError> {
        let key = key(namespace, name);
        let mut pods = self.pods.lock(&key);
        let stored = stored_pod(&mut pods, &key)?;
        if patch.labels.is_empty() {
            return stored.patch_annotations(&patch.annotations);
        }
        let mut pod = stored.pod()?;
        apply(&mut pod.metadata.annotations, &patch.annotations);
        apply(&mut pod.metadata.labels, &patch.labels);
        *stored = StoredPod::new(&pod);
        Ok(())
    }

    async fn bind_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        metadata: &BindingMetadata,
    ) -> Result<(), ApiError> {
        if !self.nodes.lock().contains_key(node) {
            return Err(node_not_found(node));
        }
        {
            let key = key(namespace, name);
            let mut pods = self.pods.lock(&key);
            let stored = stored_pod(&mut pods, &key)?;
            if stored.uid.as_deref() != Some(uid) {
                return Err(ApiError::Conflict(format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    stored.uid.as_deref().unwrap_or("")
                )));
            }
            let mut pod = stored.pod()?;
            let spec = pod.spec.get_or_insert_with(Default::default);
            if let Some(existing) = &spec.node_name {
                return Err(ApiError::Conflict(format!(
                    "pod {name} is already assigned to node \"{existing}\""
                )));
            }
            spec.node_name = Some(node.to_string());
            // What the API server does with a Binding's metadata (labels as
            // with the topology-labels gate of 1.35+, so users see the same pod).
            if !metadata.annotations.is_empty() {
                pod.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .extend(metadata.annotations.clone());
            }
            if !metadata.labels.is_empty() {
                pod.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .extend(metadata.labels.clone());
            }
            if self.simulate_device_plugin {
                let mut phase = BTreeMap::new();
                phase.insert(BIND_PHASE.to_string(), Some("success".to_string()));
                apply(&mut pod.metadata.annotations, &phase);
            }
            *stored = StoredPod::new(&pod);
        }
        if self.simulate_device_plugin {
            self.release_node_lock(node, namespace, name);
        }
        Ok(())
    }

    async fn get_node(&self, name: &str) -> Result<Option<Node>, ApiError> {
        // Copied under the lock, decoded outside it.
        let copy = self.nodes.lock().get(name).map(|n| NodeCopy {
            resource_version: n.resource_version.clone(),
            annotations: n.annotations.clone(),
            body: n.body.bytes.clone(),
        });
        copy.map(NodeCopy::node).transpose()
    }

    async fn patch_node_annotations(
        &self,
        name: &str,
        annotations: &BTreeMap<String, Option<String>>,
        resource_version: Option<&str>,
    ) -> Result<(), ApiError> {
        let mut nodes = self.nodes.lock();
        let stored = nodes.get_mut(name).ok_or_else(|| node_not_found(name))?;
        if let Some(expected) = resource_version
            && stored.resource_version != expected
        {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on nodes \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            )));
        }
        apply_to(&mut stored.annotations, annotations);
        stored.resource_version = self.next_version();
        Ok(())
    }

    async fn record_event(&self, event: SchedulerEvent) {
        let mut events = self.events.lock();
        if events.len() >= EVENT_HISTORY {
            events.pop_front();
        }
        events.push_back(event);
    }

    async fn remove_scheduling_gate(
        &self,
        namespace: &str,
        name: &str,
        lift: &GateLift<'_>,
    ) -> Result<(), ApiError> {
        let GateLift {
            gate,
            pin,
            metadata,
            ..
        } = *lift;
        let key = key(namespace, name);
        let mut pods = self.pods.lock(&key);
        let stored = stored_pod(&mut pods, &key)?;
        let lifted = if stored.gates.is_some() {
            // The lift is noted beside the JSON, not written into it.
            stored.patch_annotations(&metadata.annotations)?;
            stored
                .gates
                .as_mut()
                .is_some_and(|gates| gates.lift(gate, pin, &metadata.labels))
        } else {
            // No gate to lift: only the metadata changes.
            let mut pod = stored.pod()?;
            apply(&mut pod.metadata.annotations, &metadata.annotations);
            apply(&mut pod.metadata.labels, &metadata.labels);
            *stored = StoredPod::new(&pod);
            false
        };
        if lifted && let Some(record) = &self.lifted_gates {
            record.lock().push(key.clone());
        }
        Ok(())
    }

    fn reports_changes(&self) -> bool {
        self.reports_changes
    }

    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let key = key(namespace, name);
        let removed = self.pods.lock(&key).remove(&key);
        if removed.is_some() {
            let mut evicted = self.evicted.lock();
            if evicted.len() >= EVENT_HISTORY {
                evicted.pop_front();
            }
            evicted.push_back(key.clone());
        }
        removed.map(|_| ()).ok_or_else(|| pod_not_found(&key))
    }

    async fn patch_volcano_status(
        &self,
        object: &VolcanoObject,
        status: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let mut statuses = self.volcano_status.lock();
        let current = statuses
            .entry(object.clone())
            .or_insert_with(|| serde_json::json!({}));
        json_patch::merge(current, status);
        Ok(())
    }
}

#[path = "memory_gate_lifts.rs"]
mod gate_lifts;

#[cfg(test)]
#[path = "memory_gate_lifts_tests.rs"]
mod gate_lifts_tests;

#[cfg(test)]
#[path = "memory_lifted_gates_tests.rs"]
mod lifted_gates_tests;
