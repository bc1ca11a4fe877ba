//! The pods a task's inter-pod affinity is judged against in a session: those the
//! pod watch saw bound to nodes when the session opened, and the tasks the
//! planner has put on nodes (planned in earlier cycles or by this session's
//! statements, not yet bound). Without the latter, two members of one gang that
//! repel each other would be planned onto the same node, and a member affine to
//! its launcher could not follow it there.

use super::job::{TaskInfo, TaskStatus};
use super::state::SessionState;
use crate::placement::pod_affinity::{AffinityPod, InterPodAffinity, required_terms};
use std::collections::{BTreeMap, HashSet};

/// The inter-pod affinity check for `task`, or `None` when nothing applies to it
/// (no terms of its own, and no pod anywhere with required anti-affinity).
pub fn inter_pod_affinity(state: &SessionState, task: &TaskInfo) -> Option<InterPodAffinity> {
    let mut check = InterPodAffinity::new(&task.pod);
    let every_pod = check.has_own_terms();
    let placed = || {
        state
            .jobs
            .values()
            .flat_map(|j| &j.tasks)
            .filter(|t| t.uid != task.uid && t.placement.is_some() && on_a_node(t.status))
    };
    if !every_pod
        && !state.nodes.has_anti_affine_pods()
        && !placed().any(|t| !required_terms(&t.pod, true).is_empty())
    {
        return None;
    }
    // Only the pods that can change the verdict are read.
    let planned: Vec<(&TaskInfo, AffinityPod)> = placed()
        .filter(|t| every_pod || !required_terms(&t.pod, true).is_empty())
        .map(|t| (t, AffinityPod::of(&t.pod)))
        .collect();
    let no_labels = BTreeMap::new();
    let labels_of = |node: &str| {
        state
            .nodes
            .get(node)
            .and_then(|n| n.resources.traits.as_deref())
            .map_or(&no_labels, |t| &t.labels)
    };
    // A planned task the watch also saw bound is counted once, as the plan has it.
    let mut seen: HashSet<&str> = placed().map(|t| t.uid.as_str()).collect();
    seen.insert(&task.uid);
    for (t, pod) in &planned {
        if let Some(p) = &t.placement {
            check.add(pod, labels_of(&p.node));
        }
    }
    for node in state.nodes.iter() {
        let labels = labels_of(&node.name);
        for pod in node.resources.pods.iter() {
            if (!every_pod && pod.anti_affinity.is_empty()) || seen.contains(&*pod.uid) {
                continue;
            }
            check.add(pod, labels);
        }
    }
    Some(check)
}

/// Whether a task of this status is (or is about to be) on its node.
fn on_a_node(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Allocated | TaskStatus::Pipelined | TaskStatus::Running | TaskStatus::Releasing
    )
}
