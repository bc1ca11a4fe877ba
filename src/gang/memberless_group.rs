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
use imbl::OrdMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The PodGroup phases enqueue still has an opinion on. A Running, Completed or
/// Unknown PodGroup whose pods are gone is left as its status says: there is
/// nothing to admit and nothing to place.
const ADMISSION_PHASES: [&str; 2] = ["Pending", "Inqueue"];

/// A job without tasks for every Volcano PodGroup of `book` that has no member in
/// `jobs` and is Pending or Inqueue. One whose status already reads Inqueue (or
/// that enqueue admitted in an earlier cycle, `inqueue`) stays admitted, so the
/// minResources it reserves keep counting against its queue.
pub fn memberless_jobs(
    book: &GangBook,
    jobs: &OrdMap<GangKey, Arc<JobInfo>>,
    inqueue: &BTreeSet<GangKey>,
    priority: impl Fn(&PodGroupSpec) -> i32,
) -> Vec<JobInfo> {
    book.groups()
        .values()
        .filter(|g| g.native.is_none())
        .filter(|g| {
            g.phase
                .as_deref()
                .is_none_or(|p| ADMISSION_PHASES.contains(&p))
        })
        .filter_map(|g| {
            let key = GangKey {
                namespace: g.namespace.clone(),
                name: g.name.clone(),
                single: false,
            };
            if jobs.contains_key(&key) {
                return None;
            }
            Some(JobInfo {
                queue: book.queue_of(&key, None),
                min_member: g.min_member.max(0) as usize,
                min_roles: g
                    .min_task_member
                    .iter()
                    .map(|(k, v)| (k.clone(), (*v).max(0) as usize))
                    .collect(),
                min_resources: g.min_resources.clone(),
                card_request: Resources::default(),
                priority: priority(g),
                created: g.creation_timestamp,
                waiting_time: waiting_time(&g.annotations, &key.to_string()),
                group_missing: false,
                // Only Kubernetes' own PodGroups say how they may be disrupted,
                // and those are left out above.
                disrupted_whole: false,
                group_preemptable: crate::gang::victim_facts::group_preemptable(&g.annotations),
                service_type: crate::gang::victim_facts::service_type(Some(&g.annotations)),
                task_topology: TopologyAnnotations::of(&g.annotations),
                inqueue: inqueue.contains(&key) || g.phase.as_deref() == Some("Inqueue"),
                network_topology: g.network_topology.clone(),
                tasks: Vec::new(),
                allocated: Resources::default(),
                key,
            })
        })
        .collect()
}
