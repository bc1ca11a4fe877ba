//! A stand-in for HAMi's device plugin and the kubelet on every node of the
//! end-to-end run: it watches pods like the kubelet does, and for each pod bound
//! to a node in bind phase `allocating` it waits the configured answer delay (the
//! kubelet admitting the pod and calling `Allocate`), then marks the pod's GPUs
//! handed over (`hami.io/bind-phase: success`) and releases the node lock, as
//! HAMi's device plugin does. Pods of one node are answered one at a time, in the
//! order they were bound. It also counts what the device plugin could not cope
//! with: a second pod `allocating` on a node before the first was answered.

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

/// What the stand-in saw.
#[derive(Debug, Default)]
pub struct DevicePluginCounts {
    /// Pods answered.
    pub answered: AtomicU64,
    /// Times a pod was seen `allocating` on a node while another pod on the same
    /// node was still waiting for its answer.
    pub two_allocating: AtomicU64,
    /// Answers that failed (patch errors).
    pub errors: AtomicU64,
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
    /// seen bound.
    pub fn start(client: kube::Client, delay: Duration) -> DevicePlugin {
        let counts = Arc::new(DevicePluginCounts::default());
        let task = tokio::spawn(watch_pods(client, delay, counts.clone()));
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

async fn watch_pods(client: kube::Client, delay: Duration, counts: Arc<DevicePluginCounts>) {
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
        let placed_on = match placed_on {
            Some(node) if annotations.get(BIND_PHASE).map(String::as_str) == Some("allocating") => {
                node
            }
            _ => {
                // Answered, rolled back or never bound: not allocating (a pod we
                // queued is taken off the list once answered).
                if !queued.contains(&key) {
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
                delay,
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
    delay: Duration,
    counts: Arc<DevicePluginCounts>,
    allocating: Allocating,
) {
    while let Some(key) = pods.recv().await {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let (namespace, name) = key.split_once('/').unwrap_or(("default", &key));
        // Answered from the moment the answer is written: once it is, the
        // scheduler may hand the lock on (the holder was handed its GPUs).
        allocating.lock().done(&key);
        let answered = mark_handed_over(&client, namespace, name).await;
        match answered.and(release_lock(&client, &node, namespace, name).await) {
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

/// HAMi's `Allocate` epilogue, first half: the pod's bind phase to `success`.
async fn mark_handed_over(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let phase = json!({"metadata": {"annotations": {BIND_PHASE: "success"}}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&phase))
        .await
        .map(|_| ())
        .map_err(|e| format!("patch bind phase: {e}"))
}

/// Second half: the node lock released if this pod holds it (never another pod's).
async fn release_lock(
    client: &kube::Client,
    node: &str,
    namespace: &str,
    name: &str,
) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let owner = format!(",{namespace},{name}");
    for _ in 0..5 {
        let current = nodes
            .get(node)
            .await
            .map_err(|e| format!("get node: {e}"))?;
        let held = current
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODE_LOCK))
            .is_some_and(|v| v.ends_with(&owner));
        if !held {
            return Ok(());
        }
        let release = json!({"metadata": {
            "annotations": {NODE_LOCK: null},
            "resourceVersion": current.metadata.resource_version,
        }});
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
