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
use crate::node_load::NodeResources;
use crate::object_namespace::namespace_of;
use crate::placement::pod_affinity::AffinityPod;
use crate::volcano::framework::pod_affinity_view::on_a_node;
use crate::volcano::framework::{JobInfo, SessionOutcome, SessionState};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
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

/// A task on a node as the planner placed it: its node and its pod.
pub type PlannedPod = (String, Arc<Pod>);

/// The tasks the planner put on nodes when a session opened, by UID.
#[derive(Default, Clone)]
pub struct PlannedPods(BTreeMap<String, PlannedPod>);

impl PlannedPods {
    /// The tasks of `state` placed on a node (planned, or bound since).
    pub fn of(state: &SessionState) -> Self {
        Self(state.jobs.values().flat_map(|j| Self::of_job(j)).collect())
    }

    /// The tasks of one job placed on a node (planned, or bound since).
    pub fn of_job(job: &JobInfo) -> impl Iterator<Item = (String, PlannedPod)> + '_ {
        job.tasks
            .iter()
            .filter(|t| on_a_node(t.status))
            .filter_map(|t| {
                let node = &t.placement.as_ref()?.node;
                Some((t.uid.clone(), (node.clone(), t.pod.clone())))
            })
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

    /// The task placed as `uid`.
    pub fn get(&self, uid: &str) -> Option<&PlannedPod> {
        self.0.get(uid)
    }

    /// Places (`Some`) or takes off (`None`) the task `uid`.
    pub fn set(&mut self, uid: String, placed: Option<PlannedPod>) {
        match placed {
            Some(placed) => {
                self.0.insert(uid, placed);
            }
            None => {
                self.0.remove(&uid);
            }
        }
    }

    /// Every task, as affinity sees it.
    fn iter(&self) -> impl Iterator<Item = (&str, Seen<'_>)> {
        self.0
            .iter()
            .map(|(uid, placed)| (uid.as_str(), seen_planned(placed)))
    }

    /// Whether both hold the same tasks on the same nodes, as the same pod
    /// versions.
    pub fn same_as(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, (an, ap)), (b, (bn, bp)))| a == b && an == bn && Arc::ptr_eq(ap, bp))
    }
}

fn seen_planned((node, pod): &PlannedPod) -> Seen<'_> {
    Seen {
        node,
        namespace: namespace_of(&pod.metadata),
        labels: pod.metadata.labels.as_ref().filter(|l| !l.is_empty()),
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
pub trait PodsOnNodes {
    /// The task the planner placed as `uid`.
    fn planned(&self, uid: &str) -> Option<&PlannedPod>;
    /// The node `name`'s figures, the pods bound to it among them.
    fn node(&self, name: &str) -> Option<&NodeResources>;
}

/// Whether `uid` is on `seen.node` in `picture`, as `seen` shows it.
fn holds(picture: &impl PodsOnNodes, uid: &str, seen: Seen<'_>) -> bool {
    picture.planned(uid).map(seen_planned) == Some(seen)
        || picture.node(seen.node).is_some_and(|r| {
            r.pods
                .iter()
                .any(|p| &*p.uid == uid && seen_bound(seen.node, p) == seen)
        })
}

/// The pods of `picture` on the nodes named and the planned tasks named: those
/// another picture may not hold as they are here.
fn named<'a>(
    picture: &'a impl PodsOnNodes,
    nodes: &'a [&'a str],
    tasks: &'a [&'a str],
) -> impl Iterator<Item = (&'a str, Seen<'a>)> + 'a {
    let bound = nodes.iter().flat_map(move |node| {
        let pods: &'a [Arc<AffinityPod>] = picture.node(node).map_or(&[], |r| &r.pods[..]);
        pods.iter().map(move |p| (&*p.uid, seen_bound(node, p)))
    });
    let planned = tasks
        .iter()
        .filter_map(move |uid| Some((*uid, seen_planned(picture.planned(uid)?))));
    bound.chain(planned)
}

/// What happened to the pods on nodes between `before` and `now`, which differ
/// at most in the pods bound to `nodes` and the planned tasks `tasks`. The pods
/// a session opened with `before` placed count as there for what left or
/// changed (jobs it tried after placing them saw them), and as added since (jobs
/// it tried before did not).
pub fn affinity_change(
    before: &impl PodsOnNodes,
    placed_by_session: &PlannedPods,
    now: &impl PodsOnNodes,
    (nodes, tasks): (&[&str], &[&str]),
) -> AffinityChange {
    if named(before, nodes, tasks)
        .chain(placed_by_session.iter())
        .any(|(uid, seen)| !holds(now, uid, seen))
    {
        AffinityChange::Other
    } else if named(now, nodes, tasks).any(|(uid, seen)| !holds(before, uid, seen)) {
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
