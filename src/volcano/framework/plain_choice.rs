//! The node for a task that asks for no vGPU. kube-scheduler never calls the
//! extender for such a pod (it asks for none of the extender's resources), so the
//! planner's choice is all there is: it must pass what kube-scheduler would check
//! (the resource fit here, the rest through the `predicates` plugin) and it is
//! pinned onto the pod when its gate is lifted (see `gang::pin`). Without such a
//! choice a CPU-only gang member would start with no fit check at all, and its
//! gang would not be all-or-nothing.
//!
//! Nodes are ranked by the plugins' node scores; ties (and every node, when no
//! plugin scores) go to the smaller name, so the same snapshot gives the same node.

use super::nodes::NodeSet;
use crate::fit::Placement;
use crate::placement::preferred_pod_affinity::AffinityRanking;
use crate::placement::resource_fit::fits_node;
use crate::placement::{
    Choice, NodeFacts, NodeJudge, NodeRejection, NodeRejections, NodeSource, TaskFacts,
};
use crate::resources::Resources;

/// The best node among `within` (positions in the set, ascending) or all, for a
/// task taking `footprint` of a node; every refused node's reason otherwise.
pub fn choose_plain_node(
    nodes: &NodeSet,
    within: Option<&[usize]>,
    task: &TaskFacts<'_>,
    footprint: &Resources,
    judge: &dyn NodeJudge,
) -> Result<Choice, NodeRejections> {
    let all: Vec<usize>;
    let positions = match within {
        Some(p) => p,
        None => {
            all = (0..nodes.len()).collect();
            &all
        }
    };
    let (filters, scores) = (judge.filters(), judge.scores_task(task));
    let verdict = |node: &NodeFacts<'_>| {
        fits_node(node.allocatable, node.requested, footprint).and_then(|()| {
            if filters {
                judge.predicate(task, node)
            } else {
                Ok(())
            }
        })
    };
    // Preferred pod affinity is spread over the nodes that pass.
    let affinity = if scores {
        AffinityRanking::over(
            task,
            judge,
            positions
                .iter()
                .filter_map(|&i| nodes.facts(i))
                .filter(|n| verdict(n).is_ok()),
        )
    } else {
        None
    };
    let mut best: Option<(f64, usize)> = None;
    let mut failed = NodeRejections::new();
    for &i in positions {
        let Some(node) = nodes.facts(i) else {
            continue;
        };
        if let Err(reason) = verdict(&node) {
            failed.insert(node.name.to_string(), NodeRejection::Predicate(reason));
            continue;
        }
        let score = if scores {
            judge.score(task, &node) + affinity.map_or(0.0, |a| a.score(&node))
        } else {
            0.0
        };
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, i));
        }
    }
    match best {
        Some((rank, i)) => Ok(Choice {
            node: nodes.name(i).to_string(),
            placement: Placement {
                devices: Vec::new(),
                node_score: 0.0,
            },
            rank,
        }),
        None => Err(failed),
    }
}
