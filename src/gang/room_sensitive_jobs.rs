//! Which blocked jobs room taken elsewhere can let in, for queueing hints (see
//! `gang::queueing_hints`).
//!
//! Allocate fills a gang member by member, each on the best node for it given
//! the members placed before it, and gives up at the first member that finds no
//! node. When the members are alike and none constrains another, each member
//! can go wherever any other could, so how many fit is a matter of how much room
//! each node has for one more of them: taking room can only lower it, and a gang
//! that did not fit still does not.
//!
//! Otherwise an earlier member's node decides where later ones may go, and
//! taking room there can send it elsewhere, to where the whole gang fits:
//! - members that follow or repel one another through required pod affinity or
//!   anti-affinity: the first goes to the fullest node that fits it, the others
//!   must join it (or avoid it) there;
//! - members that are not alike (other requests, roles, node selectors, node
//!   affinity, tolerations, GPU selectors or policies): a CPU-heavy first member
//!   takes the CPU a GPU member needed on the only node with a free card, and
//!   goes elsewhere once that node's CPU is taken;
//! - members alike but for their labels (an index label, as most jobs give
//!   their pods), while some pod with required anti-affinity exists: it may
//!   repel one member from a node and not another, so the member placed first
//!   may take the only node the other could use, and take another once room
//!   taken elsewhere makes that one the fullest. Without such a pod labels
//!   decide nothing about where a member may go, and these gangs are as
//!   monotone as any.
//!
//! A network-topology constraint alone does not make a gang sensitive: allocate
//! tries the whole gang in every HyperNode of a tier and takes one that holds
//! it, so a gang of alike members is placed when some HyperNode has room for it,
//! and taking room only shrinks each HyperNode's.

use crate::placement::pod_affinity::{AffinityTerm, required_terms};
use crate::volcano::framework::job::GpuAsk;
use crate::volcano::framework::{JobInfo, TaskInfo};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// Whether room taken on some node may let a blocked job in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomSensitivity {
    /// Never: its members are alike and none constrains another.
    Never,
    /// While some pod with required anti-affinity exists: its members differ
    /// only in their labels.
    WhileRepelled,
    /// Always: its members are not alike, or some member's required pod
    /// affinity or anti-affinity selects another member.
    Always,
}

/// How room taken on some node may let `job` in once it could not be placed.
pub fn room_sensitivity(job: &JobInfo) -> RoomSensitivity {
    let tasks = &job.tasks;
    if members_select_each_other(tasks) {
        return RoomSensitivity::Always;
    }
    let Some((first, rest)) = tasks.split_first() else {
        return RoomSensitivity::Never;
    };
    if rest.iter().any(|task| !alike_but_labels(first, task)) {
        RoomSensitivity::Always
    } else if rest
        .iter()
        .any(|task| task.pod.metadata.labels != first.pod.metadata.labels)
    {
        RoomSensitivity::WhileRepelled
    } else {
        RoomSensitivity::Never
    }
}

/// Whether some task of `job` carries a required pod anti-affinity term: a pod
/// that may repel another job's members by their labels.
pub fn repels_pods(job: &JobInfo) -> bool {
    job.tasks
        .iter()
        .any(|task| !required_terms(&task.pod, true).is_empty())
}

/// Whether allocate can tell `a` and `b` apart when placing them, but by their
/// labels.
fn alike_but_labels(a: &TaskInfo, b: &TaskInfo) -> bool {
    a.namespace == b.namespace
        && a.role == b.role
        && a.requests == b.requests
        && a.resreq == b.resreq
        && a.cards == b.cards
        && same_gpu_ask(&a.gpu, &b.gpu)
        && same_constraints(&a.pod, &b.pod)
}

/// The same vGPU request under the same policies and device selectors (the
/// ask's own equality also compares the pods' UIDs).
pub(crate) fn same_gpu_ask(a: &GpuAsk, b: &GpuAsk) -> bool {
    match (a, b) {
        (GpuAsk::None, GpuAsk::None) => true,
        (GpuAsk::Vgpu(a), GpuAsk::Vgpu(b)) => {
            a.request == b.request && a.policies == b.policies && a.selectors == b.selectors
        }
        (GpuAsk::Invalid(a), GpuAsk::Invalid(b)) => a == b,
        _ => false,
    }
}

/// The same node selector, affinity and tolerations.
fn same_constraints(a: &Pod, b: &Pod) -> bool {
    let (sa, sb) = (a.spec.as_ref(), b.spec.as_ref());
    sa.map(|s| &s.node_selector) == sb.map(|s| &s.node_selector)
        && sa.map(|s| &s.affinity) == sb.map(|s| &s.affinity)
        && sa.map(|s| &s.tolerations) == sb.map(|s| &s.tolerations)
}

/// Whether a member's required pod affinity or anti-affinity term selects
/// another member of the same job.
fn members_select_each_other(tasks: &[TaskInfo]) -> bool {
    let empty = BTreeMap::new();
    tasks.iter().any(|task| {
        [false, true]
            .into_iter()
            .flat_map(|anti| required_terms(&task.pod, anti))
            .map(|term| AffinityTerm::of(term, &task.namespace))
            .any(|term| {
                tasks
                    .iter()
                    .filter(|other| other.uid != task.uid)
                    .any(|other| {
                        let labels = other.pod.metadata.labels.as_ref().unwrap_or(&empty);
                        term.may_select(&other.namespace, labels)
                    })
            })
    })
}
