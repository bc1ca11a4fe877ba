//! Whose device annotations the ledger books.
//!
//! `hami.io/vgpu-node` and `hami.io/vgpu-devices-allocated` on a pod say which GPUs
//! it holds, and they are the ledger's source when it is rebuilt from the cluster.
//! But any pod can carry them: the webhook refuses them from tenants, yet a pod
//! admitted while the webhook was down, or one sent to another scheduler, could
//! still claim GPUs nobody placed it on. So a pod's annotations are booked only
//!
//! * for pods this scheduler places: those that name one of our scheduler names
//!   (`--scheduler-name`, and the names a previous scheduler such as HAMi's placed
//!   pods under before a migration, `--previous-scheduler-names`), or that hold a
//!   reservation this scheduler made;
//! * for pods that ask for one of our vGPU resources (a claim of GPUs by a pod that
//!   asks for none is a forged placement: no device plugin hands it a GPU), reported
//!   as a conflict like the next; and
//! * within each GPU's registered slots, memory and compute, and with each MIG
//!   slice held by one instance at most: a claim beyond them is a conflict,
//!   reported (a Warning event on the pod, the `vgpu_scheduler_claim_conflicts`
//!   counter, `conflicts` in `/debug/state`) and not booked, so no claim can push a
//!   GPU past its capacity.
//!
//! A claim on a MIG GPU that names no instance is booked, but as holding the whole
//! GPU (see `mig_claims`), and reported the same way with `booked: true`.

use super::Scheduler;
use crate::cluster::api::{EventType, SchedulerEvent};
use crate::ledger::{Ledger, PodEntry};
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Conflicts kept for `/debug/state` (the oldest go first).
const CONFLICTS_KEPT: usize = 1000;

/// A claim on GPUs that was not booked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimConflict {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod UID.
    pub uid: String,
    /// The node the pod's annotations name.
    pub node: String,
    /// What is wrong with the claim.
    pub reason: String,
    /// Whether the claim was booked all the same (in a form that cannot double
    /// book, such as a MIG GPU kept whole for the pod).
    pub booked: bool,
}

/// Conflicts by pod UID.
#[derive(Debug, Default)]
pub(crate) struct Conflicts(Mutex<BTreeMap<String, ClaimConflict>>);

impl Conflicts {
    /// Records a conflict; false when the same one was recorded already.
    fn record(&self, conflict: ClaimConflict) -> bool {
        let mut conflicts = self.0.lock();
        if conflicts.get(&conflict.uid) == Some(&conflict) {
            return false;
        }
        if conflicts.len() >= CONFLICTS_KEPT
            && let Some(oldest) = conflicts.keys().next().cloned()
        {
            conflicts.remove(&oldest);
        }
        conflicts.insert(conflict.uid.clone(), conflict);
        true
    }

    /// Drops a pod's conflict (its claim was booked after all, or it is gone).
    pub(crate) fn forget(&self, uid: &str) {
        self.0.lock().remove(uid);
    }

    /// Every conflict, for `/debug/state`.
    pub(crate) fn list(&self) -> Vec<ClaimConflict> {
        self.0.lock().values().cloned().collect()
    }
}

/// Why GPUs claimed by a pod that asks for none are not booked.
const NO_VGPU_ASKED: &str = "device annotations claim GPUs for a pod that asks for no vGPU resource; this scheduler never placed it, and no device plugin hands it a GPU; not booked";

impl Scheduler {
    /// Whether a container of the pod asks for one of our vGPU resources. Every pod
    /// this scheduler (or HAMi's) gives GPUs to does, and only for those does the
    /// kubelet ask the device plugin for the GPUs the annotations name: annotations
    /// on any other pod are a forged placement that holds nothing on the node, so
    /// the ledger never books them, whatever labels the pod carries and whether or
    /// not the webhook saw it.
    pub(crate) fn asks_for_vgpu(&self, pod: &Pod) -> bool {
        let nvidia = &self.config.nvidia;
        let names = [
            &nvidia.resource_count_name,
            &nvidia.resource_memory_name,
            &nvidia.resource_memory_percentage_name,
            &nvidia.resource_core_name,
        ];
        let Some(spec) = pod.spec.as_ref() else {
            return false;
        };
        let init = spec.init_containers.iter().flatten();
        init.chain(&spec.containers).any(|c| {
            names
                .iter()
                .any(|n| !n.is_empty() && crate::device::request::resource_value(c, n).is_some())
        })
    }

    /// Whether the pod is one this scheduler places, by its scheduler name.
    pub(crate) fn placed_here(&self, pod: &Pod) -> bool {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or_default();
        name == self.config.scheduler_name
            || self.config.previous_schedulers.iter().any(|p| p == name)
    }

    /// Whether the ledger books `entry`, read from `pod`'s annotations, and the
    /// reservations it displaces to be booked (see `yielding_reservations`);
    /// `None`: not booked. Pods that are not ours are ignored silently (their
    /// annotations mean nothing to this scheduler); claims beyond a GPU's
    /// capacity are reported. `mig_problems` are what checking its MIG holds
    /// against the node found (see `mig_claims`); a claim booked with some is
    /// reported as such.
    pub(crate) fn admit_claim(
        &self,
        ledger: &Ledger,
        pod: &Pod,
        entry: &PodEntry,
        mig_problems: Vec<String>,
    ) -> Option<Vec<String>> {
        let held = ledger.pod(&entry.uid).is_some();
        if !held && !self.placed_here(pod) {
            return None;
        }
        if !held && !entry.usage.is_empty() && !self.asks_for_vgpu(pod) {
            self.report_conflict(entry, NO_VGPU_ASKED.to_owned(), false);
            return None;
        }
        let mut displaced = Vec::new();
        let mut over = over_capacity(ledger, entry, &displaced);
        if over.is_some() {
            let in_the_way =
                super::yielding_reservations::in_the_way(ledger, pod, entry, self.clock.now());
            if over_capacity(ledger, entry, &in_the_way).is_none() {
                displaced = in_the_way;
                over = None;
            }
        }
        match over {
            None if mig_problems.is_empty() => {
                self.claims.forget(&entry.uid);
                Some(displaced)
            }
            None => {
                self.report_conflict(entry, mig_problems.join("; "), true);
                Some(displaced)
            }
            Some(reason) => {
                self.report_conflict(entry, reason, false);
                None
            }
        }
    }

    /// Reports what is wrong with a claim; `booked` says whether it was booked
    /// anyway.
    pub(crate) fn report_conflict(&self, entry: &PodEntry, reason: String, booked: bool) {
        let conflict = ClaimConflict {
            namespace: entry.namespace.clone(),
            name: entry.name.clone(),
            uid: entry.uid.clone(),
            node: entry.node.clone(),
            reason,
            booked,
        };
        if !self.claims.record(conflict.clone()) {
            return;
        }
        if booked {
            tracing::warn!(
                pod = %format!("{}/{}", conflict.namespace, conflict.name),
                node = %conflict.node,
                reason = %conflict.reason,
                "device annotations do not say which MIG slices the pod holds; its GPU is kept whole for it"
            );
        } else {
            tracing::warn!(
                pod = %format!("{}/{}", conflict.namespace, conflict.name),
                node = %conflict.node,
                reason = %conflict.reason,
                "device annotations claim more than the GPUs have; not booked"
            );
        }
        self.metrics.claim_conflicts.inc();
        // Watch events are applied outside any request; the event is sent on its
        // own (and not at all where no runtime runs, as in some unit tests).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let api = Arc::clone(&self.api);
            let event = SchedulerEvent {
                namespace: conflict.namespace,
                pod: conflict.name,
                uid: conflict.uid,
                event_type: EventType::Warning,
                reason: "AllocationConflict".into(),
                message: if booked {
                    format!("GPUs on node {}: {}", conflict.node, conflict.reason)
                } else {
                    format!(
                        "GPUs on node {} not booked for this pod: {}",
                        conflict.node, conflict.reason
                    )
                },
                time: self.clock.wall(),
            };
            runtime.spawn(async move { api.record_event(event).await });
        }
    }
}

/// Why booking `entry` would take a GPU of its node past what it registered, if
/// it would. Its own current hold (an update of a pod the ledger holds) is not
/// counted twice, nor the holds of the `displaced` pods. A node not registered
/// (yet) has nothing to check against.
fn over_capacity(ledger: &Ledger, entry: &PodEntry, displaced: &[String]) -> Option<String> {
    let node = ledger.node(&entry.node)?;
    let previous = ledger.pod(&entry.uid).filter(|p| p.node == entry.node);
    let gone: Vec<&PodEntry> = previous
        .into_iter()
        .chain(displaced.iter().filter_map(|uid| ledger.pod(uid)))
        .collect();
    for (uuid, claim) in &entry.usage {
        let Some(i) = node.devices.iter().position(|d| d.id == *uuid) else {
            continue;
        };
        let device = &node.devices[i];
        let mut usage = node.usage.get(i).copied().unwrap_or_default();
        for p in &gone {
            if let Some((_, held)) = p.usage.iter().find(|(u, _)| u == uuid) {
                usage.sub(held);
            }
        }
        if let Some(slice) = usage.mig.shared_with(&claim.mig) {
            return Some(format!(
                "MIG slice {slice} of GPU {uuid} is held by another instance already"
            ));
        }
        if let Some(slice) = claim.mig.held_twice() {
            return Some(format!(
                "two MIG instances of the pod would share slice {slice} of GPU {uuid}"
            ));
        }
        let mut after = usage;
        after.add(claim);
        let over = [
            ("slots", u64::from(after.used), u64::from(device.count)),
            ("MiB of memory", after.usedmem, device.devmem),
            (
                "% of compute",
                u64::from(after.usedcores),
                u64::from(device.devcore),
            ),
        ]
        .into_iter()
        .find(|(_, wanted, registered)| wanted > registered);
        if let Some((what, wanted, registered)) = over {
            return Some(format!(
                "GPU {uuid} would hold {wanted} {what}, more than the {registered} it registered"
            ));
        }
    }
    None
}
