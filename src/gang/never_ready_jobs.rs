//! Jobs no room can make ready, for queueing hints (see `gang::queueing_hints`).
//!
//! A job allocate could not place waits because the gang plugin (the only one
//! with a say on readiness) found fewer than its minimum of members placed. A
//! member whose GPU request no node could hold even with all its cards free
//! (a GPU type or UUID no node has, more cards than any node holds, more memory
//! than any card offers, a request that does not parse) is placed nowhere
//! whatever room is taken or left. When fewer members than the minimum could
//! be placed anywhere, the job never becomes ready while the nodes are what
//! they are, so room taken cannot let it in, however its members differ: a
//! user's mistyped GPU type leaves a gang that no cycle needs to try until the
//! job, the nodes or the configuration change (which wake every blocked job).
//!
//! Only what the GPU fit decides from a node's cards is judged here; every
//! other filter is taken to pass, which can only count a member as placeable
//! that is not.

use crate::fit::{FitRequest, NodeView, QuotaHeadroom, fit_pod};
use crate::gang::room_sensitive_jobs::same_gpu_ask;
use crate::ledger::NodeEntry;
use crate::usage::GpuUsage;
use crate::volcano::framework::JobInfo;
use crate::volcano::framework::job::GpuAsk;

/// Whether fewer of `job`'s members than its minimum could be placed on any of
/// `nodes`, with every card free.
pub fn short_of_minimum_everywhere<'a>(
    job: &JobInfo,
    nodes: impl Iterator<Item = &'a NodeEntry> + Clone,
) -> bool {
    let mut placeable = 0usize;
    let mut judged: Vec<(&GpuAsk, bool)> = Vec::new();
    for task in &job.tasks {
        let fits = match judged.iter().find(|(ask, _)| same_gpu_ask(ask, &task.gpu)) {
            Some((_, fits)) => *fits,
            None => {
                let fits = fits_somewhere(&task.gpu, nodes.clone());
                judged.push((&task.gpu, fits));
                fits
            }
        };
        placeable += usize::from(fits);
        if placeable >= job.min_member {
            return false;
        }
    }
    placeable < job.min_member
}

/// Whether a member asking `gpu` could be placed on some node with all its
/// cards free.
fn fits_somewhere<'a>(gpu: &GpuAsk, mut nodes: impl Iterator<Item = &'a NodeEntry>) -> bool {
    let ctx = match gpu {
        GpuAsk::None => return true,
        GpuAsk::Invalid(_) => return false,
        GpuAsk::Vgpu(ctx) => ctx,
    };
    let request = FitRequest {
        request: &ctx.request,
        policies: &ctx.policies,
        selectors: &ctx.selectors,
        quota: QuotaHeadroom::default(),
    };
    nodes.any(|entry| {
        if entry.unusable().is_some() {
            return false;
        }
        let free = vec![GpuUsage::default(); entry.devices.len()];
        let view = NodeView {
            usage: &free,
            ..entry.view()
        };
        fit_pod(view, &request).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;
    use crate::volcano::framework::TaskInfo;
    use crate::volcano::framework::testing::{gang_key, gpu_nodes, gpu_task, job, task};

    /// Whether a job of `tasks` with `min` members is short on `nodes`.
    fn short(nodes: &[NodeEntry], min: usize, tasks: &[TaskInfo]) -> bool {
        short_of_minimum_everywhere(&job("g", "q", min, tasks.to_vec()), nodes.iter())
    }

    /// Two nodes of four whole cards each.
    fn four_card_nodes() -> Vec<NodeEntry> {
        gpu_nodes(2, 4, 1)
            .iter()
            .map(|n| (*n.gpus).clone())
            .collect()
    }

    #[test]
    fn a_job_is_short_when_fewer_members_than_its_minimum_fit_some_node() {
        let nodes = four_card_nodes();
        let key = gang_key("g");
        let whole_node = gpu_task(&key, "a", 4);
        let more_cards_than_a_node = gpu_task(&key, "b", 5);
        let no_gpu = task(&key, "c", Resources::from_units([("cpu", 1)]));
        let mut unreadable = gpu_task(&key, "d", 1);
        unreadable.gpu = GpuAsk::Invalid("bad request".into());
        let members = [whole_node, no_gpu, more_cards_than_a_node, unreadable];
        assert!(!short(&nodes, 2, &members), "two members could be placed");
        assert!(short(&nodes, 3, &members), "only two could");
        assert!(short(&nodes, 1, &members[2..]), "neither could");
        assert!(!short(&nodes, 0, &members[2..]), "none are needed");
    }

    #[test]
    fn a_member_fits_a_node_whose_cards_are_all_taken_but_not_one_that_cannot_take_gpus() {
        let mut nodes = four_card_nodes();
        for node in &mut nodes {
            let full = GpuUsage {
                used: 1,
                usedmem: 81559,
                usedcores: 100,
                ..GpuUsage::default()
            };
            node.effective = vec![full; node.devices.len()];
        }
        let member = [gpu_task(&gang_key("g"), "a", 4)];
        assert!(!short(&nodes, 1, &member), "room taken is not judged");
        let unregistered = [NodeEntry::default()];
        assert!(short(&unregistered, 1, &member));
    }
}
