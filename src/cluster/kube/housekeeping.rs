//! Periodic work in live mode. Every replica: expire its own reservations and
//! re-judge node health (it depends on time). The leader only: write handshakes,
//! clear annotations of expired reservations, release stale node locks, and the
//! periodic full resync that repairs drift and says what it repaired.

use super::leader::Leadership;
use crate::cluster::api::ClusterApi;
use crate::node_lock;
use crate::scheduler::Scheduler;
use crate::scheduler::registration::{HANDSHAKE_LAYOUT, NODE_HANDSHAKE};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::Store;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Housekeeping settings.
#[derive(Debug, Clone)]
pub struct HousekeepingConfig {
    /// How often nodes are re-judged, handshakes written and locks checked.
    pub node_period: Duration,
    /// How often the ledger is compared with a fresh list of all pods.
    pub resync_period: Duration,
    /// Node lock age after which it is stale.
    pub node_lock_timeout: Duration,
}

/// Starts the periodic tasks.
pub fn start(
    client: Client,
    api: Arc<dyn ClusterApi>,
    scheduler: Arc<Scheduler>,
    nodes: Store<Node>,
    leadership: Leadership,
    config: HousekeepingConfig,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    {
        let scheduler = scheduler.clone();
        let leadership = leadership.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                scheduler.expire_reservations(leadership.is_leader()).await;
            }
        }));
    }
    {
        let scheduler = scheduler.clone();
        let leadership = leadership.clone();
        let config = config.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(config.node_period);
            loop {
                tick.tick().await;
                scheduler.metrics().node_passes_started.inc();
                for node in nodes.state() {
                    scheduler.apply_node(&node);
                    if leadership.is_leader() {
                        let now = scheduler.clock().wall();
                        node_round(api.as_ref(), now, &node, config.node_lock_timeout).await;
                    }
                }
                scheduler.metrics().node_passes_completed.inc();
            }
        }));
    }
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(config.resync_period);
        tick.tick().await;
        loop {
            tick.tick().await;
            // A resync decodes and compares every pod of the cluster, seconds of CPU
            // on a large one: it runs on a thread of its own, so the watches sharing
            // the background runtime go on delivering events meanwhile.
            let (client, resync_scheduler) = (client.clone(), scheduler.clone());
            let runtime = tokio::runtime::Handle::current();
            let done = tokio::task::spawn_blocking(move || {
                runtime.block_on(async { resync(&client, &resync_scheduler).await })
            })
            .await;
            let outcome = match done {
                Ok(Ok(_)) => "ok",
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "resync failed; retrying next period");
                    "failed"
                }
                Err(e) => {
                    tracing::warn!(error = %e, "resync stopped; retrying next period");
                    "failed"
                }
            };
            scheduler.metrics().resync_outcome(outcome);
        }
    }));
    tasks
}

/// Handshake and stale-lock repair for one node (leader only).
async fn node_round(
    api: &dyn ClusterApi,
    now: chrono::DateTime<chrono::Utc>,
    node: &Node,
    lock_timeout: Duration,
) {
    let Some(name) = node.metadata.name.as_deref() else {
        return;
    };
    let annotations = node.metadata.annotations.as_ref();
    let registered = annotations.is_some_and(|a| a.contains_key(crate::annotations::NODE_REGISTER));
    let handshake = annotations.and_then(|a| a.get(NODE_HANDSHAKE));
    if registered && !handshake.is_some_and(|h| h.starts_with("Requesting")) {
        let mut patch = BTreeMap::new();
        patch.insert(
            NODE_HANDSHAKE.to_string(),
            Some(format!(
                "Requesting_{}",
                now.with_timezone(&chrono::Local).format(HANDSHAKE_LAYOUT)
            )),
        );
        if let Err(e) = api.patch_node_annotations(name, &patch, None).await {
            tracing::debug!(node = name, error = %e, "could not write handshake");
        }
    }
    if annotations.is_some_and(|a| a.contains_key(crate::annotations::NODE_LOCK)) {
        match node_lock::release_if_stale(api, now, name, lock_timeout).await {
            Ok(Some(value)) => {
                tracing::info!(node = name, lock = %value, "released a stale node lock")
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(node = name, error = %e, "could not check node lock"),
        }
    }
}

/// Lists every pod and brings the ledger in line, logging each difference.
pub async fn resync(client: &Client, scheduler: &Scheduler) -> Result<usize, kube::Error> {
    let api: Api<Pod> = Api::all(client.clone());
    let since = scheduler.clock().now();
    let pods = api.list(&ListParams::default()).await?;
    let before = scheduler.with_ledger(|l| {
        l.pods()
            .map(|p| (p.uid.clone(), (p.node.clone(), p.devices.clone())))
            .collect::<BTreeMap<_, _>>()
    });
    let mut seen = HashSet::new();
    for pod in &pods.items {
        if let Some(uid) = &pod.metadata.uid {
            seen.insert(uid.clone());
        }
        // The list is a snapshot: pods that changed since it started keep the
        // ledger's newer view.
        scheduler.apply_pod_snapshot(pod, since);
    }
    let released = scheduler.retain_pods(&seen, since);
    let after = scheduler.with_ledger(|l| {
        l.pods()
            .map(|p| (p.uid.clone(), (p.node.clone(), p.devices.clone())))
            .collect::<BTreeMap<_, _>>()
    });
    let mut repaired = released.len();
    for pod in &released {
        tracing::warn!(pod = %pod, "resync: released GPUs of a pod that no longer exists");
    }
    for (uid, held) in &after {
        match before.get(uid) {
            None => {
                repaired += 1;
                tracing::warn!(uid = %uid, node = %held.0, "resync: tracked a pod the watch had missed");
            }
            Some(old) if old != held => {
                repaired += 1;
                tracing::warn!(uid = %uid, node = %held.0, "resync: corrected a pod's devices");
            }
            _ => {}
        }
    }
    if repaired == 0 {
        tracing::debug!(
            pods = pods.items.len(),
            "resync: ledger matches the cluster"
        );
    }
    Ok(repaired)
}
