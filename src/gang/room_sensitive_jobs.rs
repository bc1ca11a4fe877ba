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
//!   affinity, tolerations, labels other pods' terms select them by, GPU
//!   selectors or policies): a CPU-heavy first member takes the CPU a GPU
//!   member needed on the only node with a free card, and goes elsewhere once
//!   that node's CPU is taken.
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

/// Whether room taken on some node may let `job` in once it could not be
/// placed: its members are not alike, or some member's required pod affinity
/// or anti-affinity selects another member.
pub fn room_taken_may_let_in(job: &JobInfo) -> bool {
    members_not_alike(&job.tasks) || members_select_each_other(&job.tasks)
}

fn members_not_alike(tasks: &[TaskInfo]) -> bool {
    let Some((first, rest)) = tasks.split_first() else {
        return false;
    };
    rest.iter().any(|task| !alike(first, task))
}

/// Whether allocate can tell `a` and `b` apart when placing them.
fn alike(a: &TaskInfo, b: &TaskInfo) -> bool {
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
fn same_gpu_ask(a: &GpuAsk, b: &GpuAsk) -> bool {
    match (a, b) {
        (GpuAsk::None, GpuAsk::None) => true,
        (GpuAsk::Vgpu(a), GpuAsk::Vgpu(b)) => {
            a.request == b.request && a.policies == b.policies && a.selectors == b.selectors
        }
        (GpuAsk::Invalid(a), GpuAsk::Invalid(b)) => a == b,
        _ => false,
    }
}

/// The same node selector, affinity and tolerations, and the same labels
/// (other pods' anti-affinity may repel one and not the other).
fn same_constraints(a: &Pod, b: &Pod) -> bool {
    let (sa, sb) = (a.spec.as_ref(), b.spec.as_ref());
    sa.map(|s| &s.node_selector) == sb.map(|s| &s.node_selector)
        && sa.map(|s| &s.affinity) == sb.map(|s| &s.affinity)
        && sa.map(|s| &s.tolerations) == sb.map(|s| &s.tolerations)
        && a.metadata.labels == b.metadata.labels
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
