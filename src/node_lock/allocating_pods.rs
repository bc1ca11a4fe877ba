//! `--node-lock pods`: the pods between their bind and the device plugin's
//! answer, per node, kept in this process instead of in a Node annotation.
//!
//! A node holds at most one such pod: the device plugin, finding no lock, takes
//! the node's one pod in bind phase `allocating`. A pod holds its node from the
//! moment a bind here claims it (before the Binding, so that no other bind of
//! this process can slip in between) until the watch shows it answered
//! (`success` or `failed`), finished, deleted or bound elsewhere, its bind
//! fails, or `--node-lock-timeout` passes since its bind time, as a lock would
//! expire. The watch also shows pods allocating that no bind here claimed (bound
//! before a restart, or by another binder), and they hold their node the same
//! way, so a restart keeps the turn. An event showing the pod not yet bound
//! never frees it: it may predate the Binding of the bind that claimed it.

use crate::annotations::{BIND_PHASE, BIND_TIME};
use crate::object_namespace::namespace_of;
use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A pod holding its node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    node: String,
    namespace: String,
    name: String,
    /// Its bind time: expiry counts from here.
    since: DateTime<Utc>,
}

impl Holder {
    /// `namespace/name`, as errors and `/debug/state` name it.
    fn pod(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// What the watch says of one pod for the book.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodSighting {
    /// Bound to `node` and waiting for the device plugin since `since`.
    Allocating { node: String, since: DateTime<Utc> },
    /// Done with its node: answered, finished, or bound without waiting.
    Done,
    /// Not (yet) bound: says nothing a bind here may not already know better.
    Unbound,
}

/// Reads what the book needs from a pod as the watch shows it; `now` stands in
/// for a bind time the pod does not carry.
pub fn sighting_of(pod: &Pod, now: DateTime<Utc>) -> PodSighting {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let annotations = pod.metadata.annotations.as_ref();
    let phase = annotations
        .and_then(|a| a.get(BIND_PHASE))
        .map(String::as_str);
    match (node, phase) {
        _ if finished => PodSighting::Done,
        (Some(node), Some("allocating")) => {
            let since = annotations
                .and_then(|a| a.get(BIND_TIME))
                .and_then(|t| t.trim().parse::<i64>().ok())
                .and_then(|secs| DateTime::from_timestamp(secs, 0))
                .unwrap_or(now);
            PodSighting::Allocating { node, since }
        }
        (Some(_), _) => PodSighting::Done,
        (None, _) => PodSighting::Unbound,
    }
}

/// What following one pod changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followed {
    /// The node the pod no longer holds.
    pub freed: Option<String>,
    /// The node the pod holds now and did not before (one allocating that no
    /// bind here claimed: bound before a restart, or by another binder).
    pub newly_held: Option<String>,
}

/// Why a node cannot take a pod now: the pod it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// `namespace/name` of the pod allocating there.
    pub holder: String,
}

/// The pods allocating, by UID and by node.
#[derive(Debug, Default)]
pub struct AllocatingPods {
    inner: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    by_uid: HashMap<String, Holder>,
    /// The UIDs holding each node (one, but the watch may show more: pods
    /// bound by others, or from before a restart).
    by_node: HashMap<String, Vec<String>>,
}

impl Book {
    fn remove(&mut self, uid: &str) -> Option<String> {
        let holder = self.by_uid.remove(uid)?;
        if let Some(uids) = self.by_node.get_mut(&holder.node) {
            uids.retain(|u| u != uid);
            if uids.is_empty() {
                self.by_node.remove(&holder.node);
            }
        }
        Some(holder.node)
    }

    /// `uid` holds `node` from `since`, or from when it held it already;
    /// returns the node it held before, if another.
    fn hold(
        &mut self,
        uid: &str,
        node: &str,
        (namespace, name): (&str, &str),
        since: DateTime<Utc>,
    ) -> Option<String> {
        let before = self.by_uid.get(uid);
        let since = before.filter(|h| h.node == node).map_or(since, |h| h.since);
        let moved = before.map(|h| h.node.clone()).filter(|n| n != node);
        self.insert(
            uid,
            Holder {
                node: node.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                since,
            },
        );
        moved
    }

    fn insert(&mut self, uid: &str, holder: Holder) {
        self.remove(uid);
        self.by_node
            .entry(holder.node.clone())
            .or_default()
            .push(uid.to_string());
        self.by_uid.insert(uid.to_string(), holder);
    }

    /// A pod other than `uid` that holds `node` at `now`.
    fn other_holder(
        &self,
        node: &str,
        uid: &str,
        now: DateTime<Utc>,
        timeout: Duration,
    ) -> Option<&Holder> {
        let timeout = TimeDelta::from_std(timeout).unwrap_or(TimeDelta::MAX);
        self.by_node
            .get(node)?
            .iter()
            .filter(|u| u.as_str() != uid)
            .filter_map(|u| self.by_uid.get(u))
            .find(|h| now.signed_duration_since(h.since) <= timeout)
    }
}

impl AllocatingPods {
    /// Claims `node` for the pod `uid` (`namespace/name`) about to be bound
    /// there at `now`, unless another pod holds it and has not held it longer
    /// than `timeout`. Claiming again is harmless; a claim on another node
    /// gives up the first.
    pub fn claim(
        &self,
        node: &str,
        (uid, namespace, name): (&str, &str, &str),
        now: DateTime<Utc>,
        timeout: Duration,
    ) -> Result<(), Held> {
        let mut book = self.inner.lock();
        if let Some(other) = book.other_holder(node, uid, now, timeout) {
            return Err(Held {
                holder: other.pod(),
            });
        }
        book.hold(uid, node, (namespace, name), now);
        Ok(())
    }

    /// The pods holding each node (`namespace/name`), for `/debug/state`;
    /// expired ones included, since they are still allocating.
    pub fn holders(&self) -> BTreeMap<String, Vec<String>> {
        let book = self.inner.lock();
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for holder in book.by_uid.values() {
            out.entry(holder.node.clone())
                .or_default()
                .push(holder.pod());
        }
        for pods in out.values_mut() {
            pods.sort();
        }
        out
    }

    /// Gives up the pod's claim (its bind failed, or it was deleted); returns
    /// the node it held, whose next bind may go.
    pub fn release(&self, uid: &str) -> Option<String> {
        self.inner.lock().remove(uid)
    }

    /// Follows a pod as the watch shows it at `now`.
    pub fn observe(&self, pod: &Pod, now: DateTime<Utc>) -> Followed {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return Followed::default();
        };
        match sighting_of(pod, now) {
            PodSighting::Allocating { node, since } => {
                let mut book = self.inner.lock();
                let newly_held = book.by_uid.get(uid).is_none_or(|h| h.node != node);
                // A claim made here keeps its own time; the watch's bind time
                // is whole seconds.
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let freed = book.hold(uid, &node, (namespace_of(&pod.metadata), name), since);
                Followed {
                    freed,
                    newly_held: newly_held.then_some(node),
                }
            }
            PodSighting::Done => Followed {
                freed: self.inner.lock().remove(uid),
                newly_held: None,
            },
            PodSighting::Unbound => Followed::default(),
        }
    }
}
