//! PodGroups that have no pods yet. A Volcano Job's controller creates the
//! PodGroup first and its pods only once the PodGroup reads Inqueue, so such a
//! group must reach the session for enqueue to admit it and for its status to be
//! written; otherwise the job waits forever for pods that wait for it.

use super::book::GangBook;
use crate::resources::Resources;
use crate::volcano::framework::{GangKey, JobInfo};
use crate::volcano::objects::PodGroupSpec;
use crate::volcano::task_topology::TopologyAnnotations;
use crate::volcano::waiting_time::waiting_time;

/// The PodGroup phases enqueue still has an opinion on. A Running, Completed or
/// Unknown PodGroup whose pods are gone is left as its status says: there is
/// nothing to admit and nothing to place.
const ADMISSION_PHASES: [&str; 2] = ["Pending", "Inqueue"];

/// Whether a PodGroup without members reaches the session: a Volcano PodGroup
/// that is Pending or Inqueue.
pub fn reaches_session(group: &PodGroupSpec) -> bool {
    group.native.is_none()
        && group
            .phase
            .as_deref()
            .is_none_or(|p| ADMISSION_PHASES.contains(&p))
}

/// The job without tasks of a PodGroup that has no member and reaches the
/// session ([`reaches_session`]). One whose status already reads Inqueue (or
/// that enqueue admitted in an earlier cycle, `inqueue`) stays admitted, so the
/// minResources it reserves keep counting against its queue.
pub fn memberless_job(book: &GangBook, g: &PodGroupSpec, inqueue: bool, priority: i32) -> JobInfo {
    let key = GangKey {
        namespace: g.namespace.as_str().into(),
        name: g.name.as_str().into(),
        single: false,
    };
    JobInfo {
        queue: book.queue_of(&key, None),
        min_member: g.min_member.max(0) as usize,
        min_roles: g
            .min_task_member
            .iter()
            .map(|(k, v)| (k.clone(), (*v).max(0) as usize))
            .collect(),
        min_resources: g.min_resources.clone(),
        card_request: Resources::default(),
        priority,
        created: g.creation_timestamp,
        waiting_time: waiting_time(&g.annotations, &key.to_string()),
        group_missing: false,
        // Only Kubernetes' own PodGroups say how they may be disrupted, and
        // those do not reach the session without members.
        disrupted_whole: false,
        group_preemptable: crate::gang::victim_facts::group_preemptable(&g.annotations),
        service_type: crate::gang::victim_facts::service_type(Some(&g.annotations)),
        task_topology: TopologyAnnotations::of(&g.annotations),
        inqueue: inqueue || g.phase.as_deref() == Some("Inqueue"),
        network_topology: g.network_topology.clone(),
        tasks: Vec::new(),
        allocated: Resources::default(),
        key,
    }
}
