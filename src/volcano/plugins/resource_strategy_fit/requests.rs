//! What the plugin reads as a pod's requests: its CPU, memory and vGPU request, as
//! every node-scoring plugin sees them, plus any other resource the configuration
//! (or the pod's own weights) names exactly, read from the pod's containers. Other
//! extended resources are left to kube-scheduler, which has already checked them
//! before calling the extender.

use crate::placement::TaskFacts;
use crate::resources::{Resources, pod_requests_of};
use std::borrow::Cow;

/// The pod's requests (milli-units) over `task.resreq` and the `named` resources.
/// Borrows `task.resreq` when nothing else needs reading, which is the usual case.
pub fn task_requests<'a, 'n>(
    task: &TaskFacts<'a>,
    named: impl IntoIterator<Item = &'n str>,
) -> Cow<'a, Resources> {
    let dims = task.dims;
    let extra: Vec<&str> = named
        .into_iter()
        .filter(|n| {
            !matches!(*n, "cpu" | "memory")
                && *n != dims.count
                && *n != dims.memory
                && *n != dims.cores
                && !task.resreq.contains(n)
        })
        .collect();
    let Some(pod) = task.pod.filter(|_| !extra.is_empty()) else {
        return Cow::Borrowed(task.resreq);
    };
    let mut all = task.resreq.clone();
    all.add(&pod_requests_of(pod, Some(&extra)));
    Cow::Owned(all)
}
