//! An in-memory cluster: the store behind `--cluster-file`. It behaves like the API
//! server for the calls the scheduler makes (resourceVersion preconditions, UID
//! preconditions on binding, 409 when already bound) and, optionally, like HAMi's
//! device plugin after a bind (marks the pod allocated and releases the node lock),
//! so a local cluster keeps scheduling without kubelets.

use super::api::{ApiError, ClusterApi, MetadataPatch, SchedulerEvent, VolcanoObject};
use crate::annotations::{BIND_PHASE, NODE_LOCK};
use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// How many events the store keeps for `/debug/state`.
const EVENT_HISTORY: usize = 1000;

/// A pod kept as compact JSON: a typed `Pod` is several KiB in memory, and a
/// cluster file may hold tens of thousands of pods that are only read back when one
/// of them is bound or owns a node lock.
struct StoredPod {
    uid: Option<Box<str>>,
    json: CompactJson<Pod>,
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

    fn decode(&self, kind: &str) -> Result<T, ApiError> {
        serde_json::from_slice(&self.bytes)
            .map_err(|e| ApiError::Other(format!("stored {kind} is unreadable: {e}")))
    }
}

impl StoredPod {
    /// Stores a pod. A pod already on a node is only ever read back for its
    /// identity, annotations, node, phase and number of init containers (lock
    /// owners, idempotent binds, the ledger's view of it), so the rest of its spec
    /// is not kept: a bound pod costs a few hundred bytes instead of kilobytes.
    fn new(pod: &Pod) -> Self {
        let placed = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let json = if placed {
            CompactJson::encode(&slim(pod))
        } else {
            CompactJson::encode(pod)
        };
        Self {
            uid: pod.metadata.uid.as_deref().map(Box::from),
            json,
        }
    }

    fn pod(&self) -> Result<Pod, ApiError> {
        self.json.decode("pod")
    }
}

/// What is kept of a placed pod: metadata (without managed fields), node, phase,
/// and init containers by name only (their number decides how the pod's GPU
/// usage adds up).
fn slim(pod: &Pod) -> Pod {
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
    let mut metadata = pod.metadata.clone();
    metadata.managed_fields = None;
    let spec = pod.spec.as_ref();
    let init_containers = spec.and_then(|s| s.init_containers.as_ref()).map(|list| {
        list.iter()
            .map(|c| Container {
                name: c.name.clone(),
                ..Default::default()
            })
            .collect()
    });
    Pod {
        metadata,
        spec: Some(PodSpec {
            node_name: spec.and_then(|s| s.node_name.clone()),
            init_containers,
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            ..Default::default()
        }),
    }
}

/// A node kept as compact JSON, like pods (its register annotation is most of it).
struct StoredNode {
    resource_version: Option<String>,
    json: CompactJson<Node>,
}

impl StoredNode {
    fn new(node: &Node) -> Self {
        Self {
            resource_version: node.metadata.resource_version.clone(),
            json: CompactJson::encode(node),
        }
    }

    fn node(&self) -> Result<Node, ApiError> {
        self.json.decode("node")
    }
}

#[derive(Default)]
struct Store {
    /// Tens of thousands of entries: slots are kept small (one boxed key, a boxed
    /// UID and the JSON), as the table doubles when it grows.
    pods: HashMap<Box<str>, StoredPod>,
    nodes: BTreeMap<String, StoredNode>,
    events: VecDeque<SchedulerEvent>,
    volcano_status: BTreeMap<VolcanoObject, serde_json::Value>,
    version: u64,
}

impl Store {
    fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }
}

/// The in-memory cluster.
pub struct MemoryCluster {
    store: Mutex<Store>,
    simulate_device_plugin: bool,
}

fn pod_key(pod: &Pod) -> Option<Box<str>> {
    let name = pod.metadata.name.as_deref()?;
    Some(key(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        name,
    ))
}

/// A pod's key in the store: `namespace/name` in one allocation (neither may
/// contain a slash).
/// The stored pod `namespace/name`, or the API server's NotFound.
fn stored_pod<'s>(
    store: &'s mut Store,
    namespace: &str,
    name: &str,
) -> Result<&'s mut StoredPod, ApiError> {
    store
        .pods
        .get_mut(&key(namespace, name))
        .ok_or_else(|| ApiError::NotFound {
            kind: "pod",
            name: format!("{namespace}/{name}"),
        })
}

fn key(namespace: &str, name: &str) -> Box<str> {
    let mut k = String::with_capacity(namespace.len() + 1 + name.len());
    k.push_str(namespace);
    k.push('/');
    k.push_str(name);
    k.into_boxed_str()
}

fn apply(map: &mut Option<BTreeMap<String, String>>, changes: &BTreeMap<String, Option<String>>) {
    let m = map.get_or_insert_with(BTreeMap::new);
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
            store: Mutex::new(Store::default()),
            simulate_device_plugin,
        };
        cluster.insert_all(nodes, pods);
        cluster
    }

    /// Adds nodes and pods, consuming them (each typed pod is dropped as soon as it
    /// is stored compactly).
    pub fn insert_all(&self, nodes: Vec<Node>, pods: Vec<Pod>) {
        let mut store = self.store.lock();
        for mut node in nodes {
            let v = store.next_version();
            node.metadata.resource_version = Some(v);
            if let Some(name) = node.metadata.name.clone() {
                store.nodes.insert(name, StoredNode::new(&node));
            }
        }
        for pod in pods {
            if let Some(k) = pod_key(&pod) {
                store.pods.insert(k, StoredPod::new(&pod));
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
            self.store.lock().pods.insert(k, stored);
        }
    }

    /// Events recorded so far, oldest first.
    pub fn events(&self) -> Vec<SchedulerEvent> {
        self.store.lock().events.iter().cloned().collect()
    }

    /// PodGroup and Queue statuses written so far.
    pub fn volcano_statuses(&self) -> BTreeMap<VolcanoObject, serde_json::Value> {
        self.store.lock().volcano_status.clone()
    }
}

#[async_trait]
impl ClusterApi for MemoryCluster {
    async fn remember_pod(&self, pod: &Pod) {
        let Some(k) = pod_key(pod) else {
            return;
        };
        let uid = pod.metadata.uid.as_deref();
        let known = |store: &Store| store.pods.get(&k).is_some_and(|p| p.uid.as_deref() == uid);
        if known(&self.store.lock()) {
            return;
        }
        // Encoded outside the lock; a write of the same pod in between wins.
        let stored = StoredPod::new(pod);
        let mut store = self.store.lock();
        if !known(&store) {
            store.pods.insert(k, stored);
        }
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError> {
        self.store
            .lock()
            .pods
            .get(&key(namespace, name))
            .map(StoredPod::pod)
            .transpose()
    }

    async fn patch_pod_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: &MetadataPatch,
    ) -> Result<(), ApiError> {
        let mut store = self.store.lock();
        let stored = stored_pod(&mut store, namespace, name)?;
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
    ) -> Result<(), ApiError> {
        let mut store = self.store.lock();
        if !store.nodes.contains_key(node) {
            return Err(ApiError::NotFound {
                kind: "node",
                name: node.to_string(),
            });
        }
        let stored = stored_pod(&mut store, namespace, name)?;
        let mut pod = stored.pod()?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(ApiError::Conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                pod.metadata.uid.as_deref().unwrap_or("")
            )));
        }
        let spec = pod.spec.get_or_insert_with(Default::default);
        if let Some(existing) = &spec.node_name {
            return Err(ApiError::Conflict(format!(
                "pod {name} is already assigned to node \"{existing}\""
            )));
        }
        spec.node_name = Some(node.to_string());
        if self.simulate_device_plugin {
            let mut phase = BTreeMap::new();
            phase.insert(BIND_PHASE.to_string(), Some("success".to_string()));
            apply(&mut pod.metadata.annotations, &phase);
        }
        *stored = StoredPod::new(&pod);
        if self.simulate_device_plugin {
            let owner_suffix = format!(",{namespace},{name}");
            let version = store.next_version();
            if let Some(stored) = store.nodes.get_mut(node)
                && let Ok(mut n) = stored.node()
            {
                let anns = n.metadata.annotations.get_or_insert_with(BTreeMap::new);
                if anns
                    .get(NODE_LOCK)
                    .is_some_and(|v| v.ends_with(&owner_suffix))
                {
                    anns.remove(NODE_LOCK);
                    n.metadata.resource_version = Some(version);
                    *stored = StoredNode::new(&n);
                }
            }
        }
        Ok(())
    }

    async fn get_node(&self, name: &str) -> Result<Option<Node>, ApiError> {
        self.store
            .lock()
            .nodes
            .get(name)
            .map(StoredNode::node)
            .transpose()
    }

    async fn patch_node_annotations(
        &self,
        name: &str,
        annotations: &BTreeMap<String, Option<String>>,
        resource_version: Option<&str>,
    ) -> Result<(), ApiError> {
        let mut store = self.store.lock();
        let version = store.next_version();
        let stored = store
            .nodes
            .get_mut(name)
            .ok_or_else(|| ApiError::NotFound {
                kind: "node",
                name: name.to_string(),
            })?;
        if let Some(expected) = resource_version
            && stored.resource_version.as_deref() != Some(expected)
        {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on nodes \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            )));
        }
        let mut node = stored.node()?;
        apply(&mut node.metadata.annotations, annotations);
        node.metadata.resource_version = Some(version);
        *stored = StoredNode::new(&node);
        Ok(())
    }

    async fn record_event(&self, event: SchedulerEvent) {
        let mut store = self.store.lock();
        if store.events.len() >= EVENT_HISTORY {
            store.events.pop_front();
        }
        store.events.push_back(event);
    }

    async fn remove_scheduling_gate(
        &self,
        namespace: &str,
        name: &str,
        gate: &str,
    ) -> Result<(), ApiError> {
        let mut store = self.store.lock();
        let stored = stored_pod(&mut store, namespace, name)?;
        let mut pod = stored.pod()?;
        if let Some(gates) = pod.spec.as_mut().and_then(|s| s.scheduling_gates.as_mut()) {
            gates.retain(|g| g.name != gate);
            if gates.is_empty()
                && let Some(spec) = pod.spec.as_mut()
            {
                spec.scheduling_gates = None;
            }
        }
        *stored = StoredPod::new(&pod);
        Ok(())
    }

    fn reports_changes(&self) -> bool {
        false
    }

    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        self.store
            .lock()
            .pods
            .remove(&key(namespace, name))
            .map(|_| ())
            .ok_or_else(|| ApiError::NotFound {
                kind: "pod",
                name: format!("{namespace}/{name}"),
            })
    }

    async fn patch_volcano_status(
        &self,
        object: &VolcanoObject,
        status: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let mut store = self.store.lock();
        let current = store
            .volcano_status
            .entry(object.clone())
            .or_insert_with(|| serde_json::json!({}));
        json_patch::merge(current, status);
        Ok(())
    }
}
