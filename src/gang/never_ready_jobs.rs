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
