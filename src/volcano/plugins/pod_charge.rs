//! The pod count Volcano charges a queue: every task asks one `pods` besides
//! its requests (Volcano's `GetPodResourceRequest`), so a queue's `guarantee`
//! or `deserved` amount naming `pods` is compared with how many pods the queue
//! holds. The limit checks leave that dimension out (see
//! `proportion::requested_dims`); capacity's reclaim rules count it.

use crate::placement::resource_fit::POD_COUNT;
use crate::resources::Resources;

/// `resources` with `pods` more pods.
pub(crate) fn plus_pods(mut resources: Resources, pods: usize) -> Resources {
    if pods > 0 {
        let count = i64::try_from(pods).unwrap_or(i64::MAX);
        resources.add(&Resources::from_units([(POD_COUNT, count)]));
    }
    resources
}

/// What a task is charged: its requests and one pod.
pub(crate) fn task_charge(resreq: &Resources) -> Resources {
    plus_pods(resreq.clone(), 1)
}
