//! Whether a domain could hold a starving gang at all, asked before the gang
//! eviction actions try nomination plans in it ([`super::nomination_plan`]).
//!
//! A plan places every waiting task inside the domain, on room free now or
//! freed by its victims, so what the waiting tasks take together cannot exceed
//! what the domain has left once every victim the action may take there is
//! gone. When it does, no plan can work and none is tried: on a busy cluster
//! that spares a dry run per victim bundle. The bound only counts what the
//! plan's own fits hold tasks to, so it may let a hopeless domain through but
//! never turns away one where a plan works:
//!
//! * GPU slots: each GPU a container takes fills one of that GPU's split count
//!   (a GPU already full gives none);
//! * the requests of tasks without vGPUs (CPU, memory, pod slots...), which
//!   are fitted against each node's allocatable. Tasks with vGPUs are fitted
//!   on their GPUs alone, so their requests do not count; a node whose
//!   allocatable was never seen is not judged, and then neither is the domain.

use super::eviction_domains::Domain;
use crate::placement::resource_fit::pod_footprint;
use crate::resources::Resources;
use crate::usage::{GpuUsage, collapse_pod_usage};
use crate::volcano::framework::job::GpuAsk;
use crate::volcano::framework::{GangKey, Session};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether `pending` (waiting tasks of `job`) could fit inside `domain` with
/// every one of `victims` gone; `false` means no nomination plan there can work.
pub(crate) fn could_hold(
    session: &Session,
    job: &GangKey,
    pending: &[String],
    domain: &Domain,
    victims: &[(GangKey, String)],
) -> bool {
    let wanted = Wanted::of(session, job, pending);
    let left = Left::in_domain(session, domain, victims);
    wanted.slots <= left.slots
        && left.requests.is_none_or(|left| {
            wanted
                .requests
                .iter()
                .all(|(dim, amount)| amount <= left.get(dim))
        })
}

/// What the waiting tasks take together, as far as the bound counts it.
struct Wanted {
    slots: u64,
    requests: Resources,
}

impl Wanted {
    fn of(session: &Session, job: &GangKey, pending: &[String]) -> Self {
        let mut wanted = Self {
            slots: 0,
            requests: Resources::default(),
        };
        for task in pending
            .iter()
            .filter_map(|uid| session.state.task(job, uid))
        {
            match &task.gpu {
                // Init containers reuse GPUs the app containers take or take
                // one more: counting the app containers alone stays below.
                GpuAsk::Vgpu(ctx) => {
                    wanted.slots += ctx
                        .request
                        .app()
                        .iter()
                        .flatten()
                        .map(|c| u64::from(c.nums))
                        .sum::<u64>();
                }
                GpuAsk::None => wanted.requests.add(&pod_footprint(&task.pod)),
                GpuAsk::Invalid(_) => {}
            }
        }
        wanted
    }
}

/// What the domain has left once every victim is gone.
struct Left {
    slots: u64,
    /// `None`: some node is not judged on requests.
    requests: Option<Resources>,
}

impl Left {
    fn in_domain(session: &Session, domain: &Domain, victims: &[(GangKey, String)]) -> Self {
        let state = &session.state;
        let mut freed: BTreeMap<&str, Freed> = BTreeMap::new();
        for task in victims.iter().filter_map(|(job, uid)| state.task(job, uid)) {
            let Some(placement) = &task.placement else {
                continue;
            };
            let on_node = freed.entry(placement.node.as_str()).or_default();
            on_node
                .gpus
                .extend(collapse_pod_usage(&placement.devices, placement.init_count));
            on_node.requests.add(&pod_footprint(&task.pod));
        }
        let nothing = Freed::default();
        let mut left = Self {
            slots: 0,
            requests: Some(Resources::default()),
        };
        for node in state.nodes.iter().filter(|n| domain.holds(&n.name)) {
            let freed = freed.get(node.name.as_str()).unwrap_or(&nothing);
            if let Some(usage) = state.nodes.future_usage(&node.name, &freed.gpus) {
                left.slots += node
                    .gpus
                    .devices
                    .iter()
                    .zip(&usage)
                    .map(|(d, u)| u64::from(d.count.saturating_sub(u.used)))
                    .sum::<u64>();
            }
            let requests = state
                .nodes
                .requests_left_once_gone(&node.name, &freed.requests);
            match (left.requests.as_mut(), requests) {
                (Some(total), Some(here)) => total.add(&here),
                _ => left.requests = None,
            }
        }
        left
    }
}

/// What the victims on one node free.
#[derive(Default)]
struct Freed {
    gpus: Vec<(Arc<str>, GpuUsage)>,
    requests: Resources,
}
