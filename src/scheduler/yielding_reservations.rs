//! A pod bound with GPUs outranks a reservation nobody wrote yet.
//!
//! `/filter` reserves GPUs only in the memory of the replica that answered it;
//! the pod is written at `/bind`, under the node lock. Another replica, or this
//! one before a restart, knows nothing of such a reservation and may bind a pod
//! to the same GPUs first. When the watch then shows that pod bound there, its
//! claim is a fact (the device plugin hands it the GPUs) while the reservation
//! is only an intention: the claim is booked and the reservations in its way
//! are dropped. Their pods' `/bind` finds them gone under the node lock and
//! chooses GPUs again, or fails cleanly where none are left, so no GPU share is
//! handed out beyond its capacity.

use crate::freshness::LocalMark;
use crate::ledger::{Ledger, PodEntry, PodPhase};
use k8s_openapi::api::core::v1::Pod;
use std::time::Instant;

/// The reservations of this replica that `entry` (the claim of `pod`, read from
/// the API) may displace: on its node, sharing one of its GPUs, held by a pod
/// not yet bound whose placement only this replica knows. Empty unless `pod`
/// is bound.
pub(crate) fn in_the_way(
    ledger: &Ledger,
    pod: &Pod,
    entry: &PodEntry,
    now: Instant,
) -> Vec<String> {
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| n == entry.node);
    if !bound {
        return Vec::new();
    }
    ledger
        .pods()
        .filter(|p| p.uid != entry.uid && p.node == entry.node)
        .filter(|p| matches!(p.phase, PodPhase::Reserved { .. } | PodPhase::Binding))
        .filter(|p| {
            ledger
                .meta(&p.uid)
                .and_then(|m| m.active_mark(now))
                .is_some_and(|mark| matches!(mark, LocalMark::Held { .. }))
        })
        .filter(|p| {
            p.usage
                .iter()
                .any(|(uuid, _)| entry.usage.iter().any(|(u, _)| u == uuid))
        })
        .map(|p| p.uid.clone())
        .collect()
}
