//! Watches that feed the ledger: Nodes (optionally by label), Pods, ResourceQuotas.
//! Every (re)list ends with a sweep that releases what vanished while we were not
//! watching, so a missed delete event cannot leave GPUs booked.

use crate::gang::scheduling_group::WatchedPod;
use crate::object_namespace::namespace_of;
use crate::scheduler::Scheduler;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::task::JoinHandle;

/// Which watches finished their first full list.
#[derive(Debug, Default)]
pub struct SyncState {
    nodes: AtomicBool,
    pods: AtomicBool,
    quotas: AtomicBool,
}

impl SyncState {
    /// True once nodes, pods and quotas were all listed once.
    pub fn synced(&self) -> bool {
        self.nodes.load(Ordering::Acquire)
            && self.pods.load(Ordering::Acquire)
            && self.quotas.load(Ordering::Acquire)
    }
}

/// The running watches and their caches.
pub struct Watches {
    /// Node cache (housekeeping walks it).
    pub nodes: Store<Node>,
    /// First-list progress.
    pub sync: Arc<SyncState>,
    /// The watch tasks.
    pub tasks: Vec<JoinHandle<()>>,
}

fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.metadata.name.as_deref().unwrap_or("")
    )
}

/// Starts the watches.
pub fn start(client: Client, scheduler: Arc<Scheduler>, node_selector: Option<String>) -> Watches {
    let sync = Arc::new(SyncState::default());
    let mut tasks = Vec::new();

    {
        // Decoded keeping `spec.schedulingGroup`, which the typed Pod drops.
        let api: Api<WatchedPod> = Api::all(client.clone());
        let scheduler = scheduler.clone();
        let sync = sync.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen: HashSet<String> = HashSet::new();
            let mut list_started = scheduler.clock().now();
            // No pod cache: the ledger keeps what scheduling needs, and a copy of every
            // Pod would dominate memory in large clusters.
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Init) => {
                        seen.clear();
                        list_started = scheduler.clock().now();
                    }
                    Ok(watcher::Event::InitApply(WatchedPod(p))) => {
                        if let Some(uid) = &p.metadata.uid {
                            seen.insert(uid.clone());
                        }
                        // A (re)list is a snapshot: it must not undo what this
                        // process did while the list was being read.
                        scheduler.apply_pod_snapshot(&p, list_started);
                    }
                    Ok(watcher::Event::InitDone) => {
                        let released = scheduler.retain_pods(&seen, list_started);
                        for pod in &released {
                            tracing::warn!(pod = %pod, "released GPUs of a pod that no longer exists (missed delete)");
                        }
                        seen.clear();
                        if !sync.pods.swap(true, Ordering::AcqRel) {
                            tracing::info!("pods listed");
                        }
                    }
                    Ok(watcher::Event::Apply(WatchedPod(p))) => scheduler.apply_pod(&p),
                    Ok(watcher::Event::Delete(WatchedPod(p))) => {
                        if let Some(uid) = &p.metadata.uid {
                            tracing::debug!(pod = %pod_key(&p), "pod deleted; releasing its GPUs");
                            scheduler.forget_pod(uid);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "pod watch error; retrying"),
                }
            }
        }));
    }

    let (node_store, node_writer) = reflector::store::<Node>();
    {
        let api: Api<Node> = Api::all(client.clone());
        let mut config = watcher::Config::default();
        if let Some(sel) = &node_selector {
            config = config.labels(sel);
        }
        let scheduler = scheduler.clone();
        let sync = sync.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen: HashSet<String> = HashSet::new();
            let stream = reflector::reflector(node_writer, watcher(api, config)).default_backoff();
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Init) => seen.clear(),
                    Ok(watcher::Event::InitApply(n)) => {
                        if let Some(name) = &n.metadata.name {
                            seen.insert(name.clone());
                        }
                        scheduler.apply_node(&n);
                    }
                    Ok(watcher::Event::InitDone) => {
                        scheduler.retain_nodes(&seen);
                        seen.clear();
                        if !sync.nodes.swap(true, Ordering::AcqRel) {
                            tracing::info!("nodes listed");
                        }
                    }
                    Ok(watcher::Event::Apply(n)) => scheduler.apply_node(&n),
                    Ok(watcher::Event::Delete(n)) => {
                        if let Some(name) = &n.metadata.name {
                            scheduler.forget_node(name);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "node watch error; retrying"),
                }
            }
        }));
    }

    {
        let api: Api<ResourceQuota> = Api::all(client);
        let scheduler = scheduler.clone();
        let sync = sync.clone();
        tasks.push(tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            // Quotas seen by the current (re)list: one deleted while the watch was
            // down is never announced, so the list's end forgets the others.
            let mut seen: HashSet<(String, String)> = HashSet::new();
            let key = |q: &ResourceQuota| {
                (
                    namespace_of(&q.metadata).to_owned(),
                    q.metadata.name.clone().unwrap_or_default(),
                )
            };
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitApply(q)) => {
                        seen.insert(key(&q));
                        scheduler.apply_quota(&q)
                    }
                    Ok(watcher::Event::Apply(q)) => scheduler.apply_quota(&q),
                    Ok(watcher::Event::Delete(q)) => scheduler.forget_quota(
                        namespace_of(&q.metadata),
                        q.metadata.name.as_deref().unwrap_or(""),
                    ),
                    Ok(watcher::Event::InitDone) => {
                        scheduler.retain_quotas(&seen);
                        seen.clear();
                        if !sync.quotas.swap(true, Ordering::AcqRel) {
                            tracing::info!("resource quotas listed");
                        }
                    }
                    Ok(watcher::Event::Init) => seen.clear(),
                    Err(e) => tracing::warn!(error = %e, "resource quota watch error; retrying"),
                }
            }
        }));
    }

    Watches {
        nodes: node_store,
        sync,
        tasks,
    }
}
