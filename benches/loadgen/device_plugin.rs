//! A stand-in for HAMi's device plugin and the kubelet on every node of the
//! end-to-end run: it watches pods like the kubelet does, and for each pod bound
//! to a node in bind phase `allocating` it waits the configured answer delay (the
//! kubelet admitting the pod and calling `Allocate`), then makes the API calls
//! HAMi's device plugin (v2.x, `nvidiadevice/nvinternal/plugin`) makes in
//! `Allocate`, in its order: `GetPendingPod` reads the node and the pod its
//! lock names (or, with no lock, lists the node's pods); the allocated
//! containers are erased from `hami.io/vgpu-devices-to-allocate` (a pod patch);
//! `PodAllocationTrySuccess` reads the pod again, marks its GPUs handed over
//! (`hami.io/bind-phase: success`) and releases the lock (`ReleaseNodeLock`:
//! two reads of the node, then a patch with its resourceVersion). Five reads
//! and three writes per pod, which it counts (or, with [`AnswerCalls::Minimal`],
//! only the calls the protocol needs). Pods of one node are answered
//! one at a time, in the order they were bound. It also counts what the device
//! plugin could not cope with: a second pod `allocating` on a node before the
//! first was answered, or a lock naming another pod than the one allocated.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

const BIND_PHASE: &str = "hami.io/bind-phase";
const VGPU_NODE: &str = "hami.io/vgpu-node";
const NODE_LOCK: &str = "hami.io/mutex.lock";
const DEVICES_TO_ALLOCATE: &str = "hami.io/vgpu-devices-to-allocate";

/// Which API calls the stand-in makes to answer a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerCalls {
    /// HAMi v2.x's `Allocate`, call for call: 5 reads, 3 writes.
    Hami,
    /// What the protocol itself needs: the bind phase `success`, then the node
    /// read once to see the lock is still the pod's and the lock released with
    /// that read's resourceVersion: 1 read, 2 writes. A device plugin that
    /// watches its node's pods needs no more.
    Minimal,
}

impl AnswerCalls {
    /// For the run's header.
    pub fn describe(self) -> &'static str {
        match self {
            AnswerCalls::Hami => "HAMi's Allocate calls (5 reads, 3 writes)",
            AnswerCalls::Minimal => "the protocol's least calls (1 read, 2 writes)",
        }
    }
}

/// What the stand-in saw.
#[derive(Debug, Default)]
pub struct DevicePluginCounts {
    /// Pods answered.
    pub answered: AtomicU64,
    /// Times a pod was seen `allocating` on a node while another pod on the same
    /// node was still waiting for its answer.
    pub two_allocating: AtomicU64,
    /// Answers that failed (API errors, or the lock naming another pod).
    pub errors: AtomicU64,
    /// Its API requests: get and list.
    pub reads: AtomicU64,
    /// Its API requests: patch.
    pub writes: AtomicU64,
}

impl DevicePluginCounts {
    fn read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
    fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}

/// The running stand-in; stops when dropped.
pub struct DevicePlugin {
    /// Its counts.
    pub counts: Arc<DevicePluginCounts>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DevicePlugin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Pods between `allocating` and the answer: the node each was placed on, and
/// the pods of each node.
#[derive(Debug, Default)]
struct AllocatingPods {
    node_of: HashMap<String, String>,
    on_node: HashMap<String, HashSet<String>>,
}

impl AllocatingPods {
    /// Records `key` allocating on `node`; true if another pod of the node is too.
    fn allocating(&mut self, key: &str, node: &str) -> bool {
        if self.node_of.get(key).is_some_and(|n| n == node) {
            return false;
        }
        self.done(key);
        self.node_of.insert(key.to_string(), node.to_string());
        let on_node = self.on_node.entry(node.to_string()).or_default();
        on_node.insert(key.to_string());
        on_node.len() > 1
    }

    /// `key` is answered, or no longer allocating.
    fn done(&mut self, key: &str) {
        if let Some(node) = self.node_of.remove(key)
            && let Some(on_node) = self.on_node.get_mut(&node)
        {
            on_node.remove(key);
        }
    }
}

type Allocating = Arc<Mutex<AllocatingPods>>;

impl DevicePlugin {
    /// Starts watching through `client`; each pod is answered `delay` after it is
    /// seen bound, with the calls `calls` says.
    pub fn start(client: kube::Client, delay: Duration, calls: AnswerCalls) -> DevicePlugin {
        let counts = Arc::new(DevicePluginCounts::default());
        let task = tokio::spawn(watch_pods(client, delay, calls, counts.clone()));
        DevicePlugin { counts, task }
    }
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

async fn watch_pods(
    client: kube::Client,
    delay: Duration,
    calls: AnswerCalls,
    counts: Arc<DevicePluginCounts>,
) {
    let pods: Api<Pod> = Api::all(client.clone());
    let allocating: Allocating = Arc::default();
    let mut queued: HashSet<String> = HashSet::new();
    let mut nodes: HashMap<String, mpsc::UnboundedSender<String>> = HashMap::new();
    let stream = watcher(pods, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let pod = match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
            _ => continue,
        };
        let key = key(&pod);
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let placed_on = annotations.get(VGPU_NODE).cloned();
        // Its devices all taken by `Allocate` (the first of its answer's writes):
        // no longer allocating, although its bind phase says so a moment more.
        let erased = annotations
            .get(DEVICES_TO_ALLOCATE)
            .is_some_and(|v| v.trim_matches(';').is_empty());
        let placed_on = match placed_on {
            Some(node)
                if !erased
                    && annotations.get(BIND_PHASE).map(String::as_str) == Some("allocating") =>
            {
                node
            }
            _ => {
                // Answered, rolled back or never bound: not allocating (a pod we
                // queued is taken off the list once answered).
                if erased || !queued.contains(&key) {
                    allocating.lock().done(&key);
                }
                continue;
            }
        };
        if allocating.lock().allocating(&key, &placed_on) {
            counts.two_allocating.fetch_add(1, Ordering::Relaxed);
        }
        // The kubelet acts once the pod is bound to its node.
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        if !queued.insert(key.clone()) {
            continue;
        }
        let sender = nodes.entry(node.clone()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(answer_pods(
                client.clone(),
                node.clone(),
                rx,
                (delay, calls),
                counts.clone(),
                allocating.clone(),
            ));
            tx
        });
        let _ = sender.send(key);
    }
}

/// One node's kubelet and device plugin: answers its pods one at a time.
async fn answer_pods(
    client: kube::Client,
    node: String,
    mut pods: mpsc::UnboundedReceiver<String>,
    (delay, calls): (Duration, AnswerCalls),
    counts: Arc<DevicePluginCounts>,
    allocating: Allocating,
) {
    while let Some(key) = pods.recv().await {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // Answered from the moment the answer is written: once it is, the
        // scheduler may hand the lock on (the holder was handed its GPUs).
        allocating.lock().done(&key);
        let answered = match calls {
            AnswerCalls::Hami => allocate(&client, &node, &key, &counts).await,
            AnswerCalls::Minimal => allocate_minimal(&client, &node, &key, &counts).await,
        };
        match answered {
            Ok(()) => {
                counts.answered.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("loadgen: device plugin on {node}: {key}: {e}");
            }
        }
    }
}

/// HAMi's `Allocate` for the pod `key` the kubelet admitted on `node`.
async fn allocate(
    client: &kube::Client,
    node: &str,
    key: &str,
    counts: &DevicePluginCounts,
) -> Result<(), String> {
    let pending = pending_pod(client, node, counts).await?;
    let pending_key = self::key(&pending);
    if pending_key != key {
        return Err(format!(
            "the node's lock or its pods allocating name {pending_key}, not the pod being allocated"
        ));
    }
    let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    // One container, its devices taken: what is left to allocate is empty.
    let erased = json!({"metadata": {"annotations": {DEVICES_TO_ALLOCATE: ";"}}});
    counts.wrote();
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&erased))
        .await
        .map_err(|e| format!("erase allocated devices: {e}"))?;
    counts.read();
    pods.get(name)
        .await
        .map_err(|e| format!("get pod before success: {e}"))?;
    mark_handed_over(client, namespace, name, counts).await?;
    release_lock(client, node, namespace, name, counts).await
}

/// The protocol's least answer: the pod's GPUs handed over, then its lock
/// released (one read of the node, as the release must not drop another pod's
/// lock).
async fn allocate_minimal(
    client: &kube::Client,
    node: &str,
    key: &str,
    counts: &DevicePluginCounts,
) -> Result<(), String> {
    let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
    mark_handed_over(client, namespace, name, counts).await?;
    release_lock_from(client, node, namespace, name, counts, false).await
}

/// HAMi's `GetPendingPod`: the pod the node's lock names, or with no lock the
/// node's first pending pod in bind phase `allocating` (listed by
/// `spec.nodeName`, with `hami.io/vgpu-node` naming the node).
async fn pending_pod(
    client: &kube::Client,
    node: &str,
    counts: &DevicePluginCounts,
) -> Result<Pod, String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let (_, lock) = node_and_lock(&nodes, node, counts).await?;
    if let Some(lock) = lock {
        let mut parts = lock.splitn(3, ',');
        let (_, namespace, name) = (parts.next(), parts.next(), parts.next());
        if let (Some(namespace), Some(name)) = (namespace, name) {
            counts.read();
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            return pods
                .get(name)
                .await
                .map_err(|e| format!("get the lock's pod: {e}"));
        }
    }
    counts.read();
    let pods: Api<Pod> = Api::all(client.clone());
    let on_node = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
    let list = pods
        .list(&on_node)
        .await
        .map_err(|e| format!("list the node's pods: {e}"))?;
    list.items
        .into_iter()
        .find(|p| {
            let annotations = p.metadata.annotations.as_ref();
            let phase = annotations
                .and_then(|a| a.get(BIND_PHASE))
                .map(String::as_str);
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
                && phase == Some("allocating")
                && annotations
                    .and_then(|a| a.get(VGPU_NODE))
                    .map(String::as_str)
                    == Some(node)
        })
        .ok_or_else(|| format!("no binding pod found on node {node}"))
}

/// HAMi's `Allocate` epilogue, first half: the pod's bind phase to `success`.
async fn mark_handed_over(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    counts: &DevicePluginCounts,
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let phase = json!({"metadata": {"annotations": {BIND_PHASE: "success"}}});
    counts.wrote();
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&phase))
        .await
        .map(|_| ())
        .map_err(|e| format!("patch bind phase: {e}"))
}

/// Second half, HAMi's `ReleaseNodeLock`: the node read to check the lock is
/// this pod's (never another pod's), then in its retry loop read again and
/// patched with its resourceVersion.
async fn release_lock(
    client: &kube::Client,
    node: &str,
    namespace: &str,
    name: &str,
    counts: &DevicePluginCounts,
) -> Result<(), String> {
    release_lock_from(client, node, namespace, name, counts, true).await
}

/// Releases the pod's lock on `node`; `check_first`: read the node once more
/// before the read-and-patch loop, as HAMi does.
async fn release_lock_from(
    client: &kube::Client,
    node: &str,
    namespace: &str,
    name: &str,
    counts: &DevicePluginCounts,
    check_first: bool,
) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let owner = format!(",{namespace},{name}");
    if check_first
        && node_locked_by(&nodes, node, &owner, counts)
            .await?
            .is_none()
    {
        return Ok(());
    }
    for _ in 0..5 {
        let Some(current) = node_locked_by(&nodes, node, &owner, counts).await? else {
            return Ok(());
        };
        let release = json!({"metadata": {
            "annotations": {NODE_LOCK: null},
            "resourceVersion": current.metadata.resource_version,
        }});
        counts.wrote();
        match nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&release))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => return Err(format!("release node lock: {e}")),
        }
    }
    Err("release node lock: the node kept changing".into())
}

/// Reads `node` (one read counted) and returns it when its lock is the pod's
/// (the lock's value ends with `owner`, `,namespace,name`), `None` when the
/// lock is gone or another pod's: there is nothing left to release.
async fn node_locked_by(
    nodes: &Api<Node>,
    node: &str,
    owner: &str,
    counts: &DevicePluginCounts,
) -> Result<Option<Node>, String> {
    let (current, lock) = node_and_lock(nodes, node, counts).await?;
    Ok(lock.is_some_and(|v| v.ends_with(owner)).then_some(current))
}

/// Reads `node` (one read counted), with the value of its lock when it is
/// locked.
async fn node_and_lock(
    nodes: &Api<Node>,
    node: &str,
    counts: &DevicePluginCounts,
) -> Result<(Node, Option<String>), String> {
    counts.read();
    let current = nodes
        .get(node)
        .await
        .map_err(|e| format!("get node: {e}"))?;
    let lock = current
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_LOCK))
        .cloned();
    Ok((current, lock))
}
