//! HAMi's per-node lock (`hami.io/mutex.lock`), shared with HAMi's device plugin,
//! which releases it after handing the GPUs to the container.
//!
//! Unlike HAMi we never leave a node locked by a lock nobody will release: a lock
//! whose owner is gone, finished, or already handed its GPUs (bind phase `success` /
//! `failed`, or bound to another node) is taken over at once, not after the timeout.

pub mod allocating_pods;
pub mod handoff;
pub mod mode;
pub mod release_grace;
pub mod value;

#[cfg(test)]
mod allocating_pods_tests;
#[cfg(test)]
mod sighting_tests;

use crate::annotations::{BIND_PHASE, NODE_LOCK};
use crate::cluster::api::{ApiError, ClusterApi};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::time::Duration;
use value::{LockValue, format_lock_value, parse_lock_value};

/// Why the lock could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// Another live pod holds the lock.
    #[error("node {node} has been locked within {timeout:?} by {holder}: node lock contention")]
    Contention {
        node: String,
        timeout: Duration,
        holder: String,
    },
    /// The node does not exist.
    #[error("node {0:?} not found")]
    NodeNotFound(String),
    /// The API call failed.
    #[error("node lock on {node}: {source}")]
    Api { node: String, source: ApiError },
}

/// Attempts on a resourceVersion conflict before giving up.
const CONFLICT_RETRIES: usize = 5;

/// What this process already knows of node locks from its watches, so that taking
/// a lock costs one write and no read: the node as the watch showed it (its
/// resourceVersion makes the write fail with a conflict if it changed since; the
/// watch then shows the change, and only if it does not in time is the node
/// read), and whether a lock's owner still waits for its GPUs (only an owner it
/// knows nothing of is read).
#[async_trait::async_trait]
pub trait LockKnowledge: Sync {
    /// The node's lock and resourceVersion as the watch shows them, at a version
    /// other than `stale` (one a lock write was refused at) and not older than a
    /// lock write of this process, waiting briefly for the watch if need be;
    /// `None`: read the node.
    async fn sighting(&self, node: &str, stale: Option<&str>) -> Option<handoff::LockSighting>;
    /// This process is about to write the node's lock over the node at
    /// resourceVersion `over`: until the watch shows the node at another
    /// version, its copy predates the write.
    fn writing(&self, _node: &str, _over: Option<&str>) {}
    /// The write announced by [`LockKnowledge::writing`] was refused (or its
    /// answer lost): no lock of this process to wait for.
    fn write_refused(&self, _node: &str) {}
    /// Whether `namespace/pod`, holding `node`'s lock, is done with it
    /// (`None`: not known here; read the pod).
    fn owner_is_stale(&self, node: &str, namespace: &str, pod: &str) -> Option<bool>;
}

/// Knows nothing: every look reads the API (a cluster file, whose store is local).
pub struct ReadEverything;

#[async_trait::async_trait]
impl LockKnowledge for ReadEverything {
    async fn sighting(&self, _node: &str, _stale: Option<&str>) -> Option<handoff::LockSighting> {
        None
    }
    fn owner_is_stale(&self, _node: &str, _namespace: &str, _pod: &str) -> Option<bool> {
        None
    }
}

async fn owner_is_stale(
    api: &dyn ClusterApi,
    known: &dyn LockKnowledge,
    lock: &LockValue,
    node: &str,
) -> bool {
    let Some(owner) = &lock.owner else {
        // A legacy bare timestamp has no owner to ask; only expiry frees it.
        return false;
    };
    if let Some(stale) = known.owner_is_stale(node, &owner.namespace, &owner.pod) {
        return stale;
    }
    match api.get_pod(&owner.namespace, &owner.pod).await {
        Ok(None) => true,
        Ok(Some(pod)) => {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded") | Some("Failed")) {
                return true;
            }
            let bound_elsewhere = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| n != node);
            let handed_over = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(BIND_PHASE))
                .is_some_and(|p| p == "success" || p == "failed");
            bound_elsewhere || handed_over
        }
        Err(_) => false,
    }
}

/// Sets (`Some`) or removes (`None`) the lock annotation, provided the node is
/// still at `resource_version` (a concurrent change answers `Conflict`).
async fn write_lock(
    api: &dyn ClusterApi,
    node: &str,
    value: Option<String>,
    resource_version: Option<&str>,
) -> Result<(), ApiError> {
    let mut patch = BTreeMap::new();
    patch.insert(NODE_LOCK.to_string(), value);
    api.patch_node_annotations(node, &patch, resource_version)
        .await
}

/// The node's lock as read from the API server.
async fn read_lock(api: &dyn ClusterApi, node: &str) -> Result<handoff::LockSighting, LockError> {
    let current = api
        .get_node(node)
        .await
        .map_err(|source| LockError::Api {
            node: node.to_string(),
            source,
        })?
        .ok_or_else(|| LockError::NodeNotFound(node.to_string()))?;
    Ok(handoff::LockSighting {
        lock: current
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODE_LOCK))
            .cloned(),
        resource_version: current.metadata.resource_version,
    })
}

/// Takes the node lock for `namespace/pod` at `now`. Re-entrant for the same pod.
/// The first look is at the node as `known` has it, when it has it; a conflict
/// (the node changed since) reads it.
pub async fn acquire(
    api: &dyn ClusterApi,
    known: &dyn LockKnowledge,
    now: DateTime<Utc>,
    node: &str,
    namespace: &str,
    pod: &str,
    timeout: Duration,
) -> Result<(), LockError> {
    let api_err = |source| LockError::Api {
        node: node.to_string(),
        source,
    };
    let mut sighting = known.sighting(node, None).await;
    // Once the node was read, the watch's copy may be older than what was read:
    // a conflict after that reads again.
    let mut read = false;
    for _ in 0..CONFLICT_RETRIES {
        let current = match sighting.take() {
            Some(seen) => seen,
            None => {
                read = true;
                read_lock(api, node).await?
            }
        };
        if let Some(raw) = current.lock {
            match parse_lock_value(&raw) {
                Ok(lock) if lock.is_held_by(namespace, pod) => return Ok(()),
                Ok(lock) => {
                    let expired = lock.is_expired(now, timeout);
                    if !expired && !owner_is_stale(api, known, &lock, node).await {
                        return Err(LockError::Contention {
                            node: node.to_string(),
                            timeout,
                            holder: lock.holder(),
                        });
                    }
                    tracing::info!(node, lock = %raw, expired, "taking over a stale node lock");
                }
                Err(e) => {
                    // HAMi leaves an unparsable lock forever; nobody can release it, so
                    // we replace it and say so.
                    tracing::warn!(node, lock = %raw, error = %e, "replacing an unparsable node lock");
                }
            }
        }
        let value = Some(format_lock_value(now, namespace, pod));
        known.writing(node, current.resource_version.as_deref());
        let written = write_lock(api, node, value, current.resource_version.as_deref()).await;
        if written.is_err() {
            known.write_refused(node);
        }
        match written {
            Ok(()) => return Ok(()),
            Err(ApiError::Conflict(_)) if !read => {
                sighting = known
                    .sighting(node, current.resource_version.as_deref())
                    .await;
            }
            Err(ApiError::Conflict(_)) => {}
            Err(e) => return Err(api_err(e)),
        }
    }
    Err(api_err(ApiError::Conflict(format!(
        "node {node} kept changing while taking its lock"
    ))))
}

/// `--node-lock pods`: who holds a lock annotation on `node` that another
/// binder (HAMi's scheduler, a replica in node mode) took and has not done with
/// (`None`: nobody). The node is taken from `known`'s copy and read only when
/// it has none; an owner it knows nothing of is read. An unparsable lock, which
/// nobody would ever release, holds nothing.
pub async fn foreign_holder(
    api: &dyn ClusterApi,
    known: &dyn LockKnowledge,
    now: DateTime<Utc>,
    node: &str,
    (namespace, pod): (&str, &str),
    timeout: Duration,
) -> Result<Option<String>, LockError> {
    let seen = match known.sighting(node, None).await {
        Some(seen) => seen,
        None => read_lock(api, node).await?,
    };
    let Some(raw) = seen.lock else {
        return Ok(None);
    };
    let lock = match parse_lock_value(&raw) {
        Ok(lock) => lock,
        Err(e) => {
            tracing::warn!(node, lock = %raw, error = %e, "ignoring an unparsable node lock");
            return Ok(None);
        }
    };
    if lock.is_held_by(namespace, pod)
        || lock.is_expired(now, timeout)
        || owner_is_stale(api, known, &lock, node).await
    {
        return Ok(None);
    }
    Ok(Some(lock.holder()))
}

/// Releases the lock if `namespace/pod` still holds it; never removes another pod's lock.
pub async fn release(
    api: &dyn ClusterApi,
    node: &str,
    namespace: &str,
    pod: &str,
) -> Result<(), LockError> {
    let api_err = |source| LockError::Api {
        node: node.to_string(),
        source,
    };
    for _ in 0..CONFLICT_RETRIES {
        let Some(current) = api.get_node(node).await.map_err(api_err)? else {
            return Ok(());
        };
        let held = current
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODE_LOCK))
            .and_then(|raw| parse_lock_value(raw).ok())
            .is_some_and(|l| l.is_held_by(namespace, pod));
        if !held {
            return Ok(());
        }
        match write_lock(
            api,
            node,
            None,
            current.metadata.resource_version.as_deref(),
        )
        .await
        {
            Ok(()) => return Ok(()),
            Err(ApiError::Conflict(_)) => continue,
            Err(e) => return Err(api_err(e)),
        }
    }
    Err(api_err(ApiError::Conflict(format!(
        "node {node} kept changing while releasing its lock"
    ))))
}

/// Removes a node lock nobody will release: expired, unparsable, or held by a pod
/// that is gone, finished, bound elsewhere or already handed its GPUs. Returns the
/// removed value. Run by the leader so a crashed bind or a pod deleted before its
/// device plugin ran does not block the node until the timeout.
pub async fn release_if_stale(
    api: &dyn ClusterApi,
    now: DateTime<Utc>,
    node: &str,
    timeout: Duration,
) -> Result<Option<String>, LockError> {
    let api_err = |source| LockError::Api {
        node: node.to_string(),
        source,
    };
    let Some(current) = api.get_node(node).await.map_err(api_err)? else {
        return Ok(None);
    };
    let Some(raw) = current
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_LOCK))
        .cloned()
    else {
        return Ok(None);
    };
    let stale = match parse_lock_value(&raw) {
        Ok(lock) => {
            lock.is_expired(now, timeout) || owner_is_stale(api, &ReadEverything, &lock, node).await
        }
        Err(_) => true,
    };
    if !stale {
        return Ok(None);
    }
    match write_lock(
        api,
        node,
        None,
        current.metadata.resource_version.as_deref(),
    )
    .await
    {
        Ok(()) => Ok(Some(raw)),
        // Someone changed the node meanwhile; the next round looks again.
        Err(ApiError::Conflict(_)) => Ok(None),
        Err(e) => Err(api_err(e)),
    }
}
