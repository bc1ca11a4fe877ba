//! The pods inter-pod affinity judges a job against, as queueing hints compare
//! them between two cycles. Room taken since a job was blocked cannot let it in,
//! but a pod arriving on a node can: it may be the pod a blocked job's required
//! pod affinity waits for. And a pod whose labels change may stop repelling a
//! blocked job, or start matching one's affinity, with no room moving at all.
//!
//! Pods count as on a node when the pod watch saw them bound there, or when the
//! planner put them there (a member planned, not yet bound): the same two sources
//! a session's inter-pod affinity reads (`volcano::framework::pod_affinity_view`).
//! A planned member that gets bound where it was planned is the same pod, not a
//! new one.

use crate::gang::book::GangBook;
use crate::ledger::NodeEntry;
use crate::node_load::NodeResources;
use crate::placement::pod_affinity::AffinityPod;
use crate::volcano::framework::pod_affinity_view::on_a_node;
use crate::volcano::framework::{SessionOutcome, SessionState};
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What pods on nodes did between two pictures, as far as pod affinity sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AffinityChange {
    /// The same pods, with the same labels, on the same nodes.
    None,
    /// Pods were only added: jobs that follow pods may now find theirs.
    Added,
    /// A pod left a node or its namespace or labels changed: a job it repelled,
    /// or one it kept from matching, may now be let in.
    Other,
}

/// A pod as affinity sees it: its node, namespace and labels.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen<'a> {
    node: &'a str,
    namespace: &'a str,
    labels: Option<&'a BTreeMap<String, String>>,
}

/// The tasks the planner put on nodes when a session opened, by UID.
#[derive(Default)]
pub struct PlannedPods(BTreeMap<String, (String, Arc<Pod>)>);

impl PlannedPods {
    /// The tasks of `state` placed on a node (planned, or bound since).
    pub fn of(state: &SessionState) -> Self {
        Self(
            state
                .jobs
                .values()
                .flat_map(|j| &j.tasks)
                .filter(|t| on_a_node(t.status))
                .filter_map(|t| {
                    let node = &t.placement.as_ref()?.node;
                    Some((t.uid.clone(), (node.clone(), t.pod.clone())))
                })
                .collect(),
        )
    }

    /// The tasks a session placed, as its commits name them, with the pods of
    /// `book` it was built from.
    pub fn placed_by(outcome: &SessionOutcome, book: &GangBook) -> Self {
        Self(
            outcome
                .commits
                .iter()
                .flat_map(|c| &c.members)
                .filter_map(|m| {
                    let node = &m.placement.as_ref()?.node;
                    let pod = &book.members().get(&m.uid)?.pod;
                    Some((m.uid.clone(), (node.clone(), pod.clone())))
                })
                .collect(),
        )
    }

    /// Every task, as affinity sees it.
    fn iter(&self) -> impl Iterator<Item = (&str, Seen<'_>)> {
        self.0
            .keys()
            .filter_map(|uid| self.seen(uid).map(|s| (uid.as_str(), s)))
    }

    fn seen(&self, uid: &str) -> Option<Seen<'_>> {
        self.0.get(uid).map(|(node, pod)| Seen {
            node,
            namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
            labels: pod.metadata.labels.as_ref().filter(|l| !l.is_empty()),
        })
    }
}

fn seen_bound<'a>(node: &'a str, pod: &'a AffinityPod) -> Seen<'a> {
    Seen {
        node,
        namespace: &pod.namespace,
        labels: Some(&pod.labels).filter(|l| !l.is_empty()),
    }
}

/// One picture of the pods on nodes: those the watch saw bound (per node, shared
/// with the session) and those the planner placed.
pub struct AffinePods<'a> {
    /// Every node's GPUs and resources, bound pods among them, by name.
    pub bound: &'a HashMap<String, (Arc<NodeEntry>, NodeResources)>,
    pub planned: &'a PlannedPods,
}

impl<'a> AffinePods<'a> {
    /// Whether `uid` is on `seen.node` in this picture, as `seen` shows it.
    fn holds(&self, uid: &str, seen: Seen<'_>) -> bool {
        self.planned.seen(uid) == Some(seen)
            || self.bound.get(seen.node).is_some_and(|(_, r)| {
                r.pods
                    .iter()
                    .any(|p| &*p.uid == uid && seen_bound(seen.node, p) == seen)
            })
    }

    /// The pods of this picture `other` may not hold as they are here: those
    /// bound to nodes whose pods are not the very list `other` shares, and the
    /// planned ones.
    fn maybe_moved<'o>(
        &self,
        other: &'o AffinePods<'_>,
    ) -> impl Iterator<Item = (&'a str, Seen<'a>)> + use<'a, 'o> {
        let bound = self.bound.iter().flat_map(move |(node, (_, resources))| {
            let shared = other
                .bound
                .get(node)
                .is_some_and(|(_, o)| Arc::ptr_eq(&o.pods, &resources.pods));
            let pods: &'a [Arc<AffinityPod>] = if shared { &[] } else { &resources.pods };
            pods.iter()
                .map(move |p| (&*p.uid, seen_bound(node.as_str(), p)))
        });
        bound.chain(self.planned.iter())
    }
}

/// What happened to the pods on nodes between `before` and `now`. The pods a
/// session opened with `before` placed count as there for what left or changed
/// (jobs it tried after placing them saw them), and as added since (jobs it
/// tried before did not).
pub fn affinity_change(
    before: &AffinePods<'_>,
    placed_by_session: &PlannedPods,
    now: &AffinePods<'_>,
) -> AffinityChange {
    if before
        .maybe_moved(now)
        .chain(placed_by_session.iter())
        .any(|(uid, seen)| !now.holds(uid, seen))
    {
        AffinityChange::Other
    } else if now
        .maybe_moved(before)
        .any(|(uid, seen)| !before.holds(uid, seen))
    {
        AffinityChange::Added
    } else {
        AffinityChange::None
    }
}

/// Whether any task of these pods waits for other pods through required pod
/// affinity (pods arriving can let only such a job in).
pub fn follows_pods<'p>(mut pods: impl Iterator<Item = &'p Pod>) -> bool {
    pods.any(|p| !crate::placement::pod_affinity::required_terms(p, false).is_empty())
}
