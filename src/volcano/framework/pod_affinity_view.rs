//! The pods a task's inter-pod affinity is judged against in a session: those the
//! pod watch saw bound to nodes when the session opened, and the tasks the
//! planner has put on nodes (planned in earlier cycles or by this session's
//! statements, not yet bound). Without the latter, two members of one gang that
//! repel each other would be planned onto the same node, and a member affine to
//! its launcher could not follow it there.

use super::job::{TaskInfo, TaskStatus};
use super::state::SessionState;
use crate::placement::pod_affinity::{AffinityPod, InterPodAffinity};
use std::collections::{BTreeMap, HashSet};

/// The inter-pod affinity check for `task`, or `None` when nothing applies to it
/// (no terms of its own, and no pod anywhere with required anti-affinity).
pub fn inter_pod_affinity(state: &SessionState, task: &TaskInfo) -> Option<InterPodAffinity> {
    let mut check = InterPodAffinity::new(&task.pod);
    let planned: Vec<(&TaskInfo, AffinityPod)> = state
        .jobs
        .values()
        .flat_map(|j| &j.tasks)
        .filter(|t| t.uid != task.uid && t.placement.is_some() && on_a_node(t.status))
        .map(|t| (t, AffinityPod::of(&t.pod)))
        .collect();
    let every_pod = check.has_own_terms();
    if !every_pod
        && !state.nodes.has_anti_affine_pods()
        && planned.iter().all(|(_, p)| p.anti_affinity.is_empty())
    {
        return None;
    }
    let no_labels = BTreeMap::new();
    let labels_of = |node: &str| {
        state
            .nodes
            .get(node)
            .and_then(|n| n.resources.traits.as_deref())
            .map_or(&no_labels, |t| &t.labels)
    };
    let mut seen: HashSet<&str> = HashSet::new();
    for (t, pod) in &planned {
        seen.insert(&t.uid);
        if let Some(p) = &t.placement {
            check.add(pod, labels_of(&p.node));
        }
    }
    for node in state.nodes.iter() {
        let labels = labels_of(&node.name);
        for pod in node.resources.pods.iter() {
            if seen.contains(&*pod.uid) || (!every_pod && pod.anti_affinity.is_empty()) {
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
