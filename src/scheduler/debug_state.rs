//! `/debug/state`: the ledger as JSON, so an operator can see who holds which GPU,
//! and the network topology the planner reads.

use super::Scheduler;
use crate::device::mig::{MIG_SLICES, MigHold};
use crate::device::model::GpuDevice;
use crate::ledger::{Ledger, PodPhase};
use crate::usage::GpuUsage;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The MIG instances the ledger holds, by node and GPU UUID, in pod order.
fn mig_instances(ledger: &Ledger) -> BTreeMap<(&str, &str), Vec<Value>> {
    let mut out: BTreeMap<(&str, &str), Vec<Value>> = BTreeMap::new();
    let mut pods: Vec<_> = ledger.pods().collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    for p in pods {
        for (container, devices) in p.devices.iter().enumerate() {
            for d in devices {
                let Some(hold) = d.mig.as_deref() else {
                    continue;
                };
                let mut v = json!({
                    "pod": format!("{}/{}", p.namespace, p.name), "uid": p.uid,
                    "container": container,
                });
                match hold {
                    MigHold::Instance {
                        profile,
                        placement,
                        runtime,
                    } => {
                        v["profile"] = json!(profile);
                        v["placement"] = json!(placement);
                        if let Some(r) = runtime {
                            v["migUUID"] = json!(r.mig_uuid);
                            v["gpuInstanceID"] = json!(r.gpu_instance_id);
                            v["computeInstanceID"] = json!(r.compute_instance_id);
                        }
                    }
                    // Slices unknown: the pod keeps the whole GPU (see `mig_claims`).
                    MigHold::Unplaced => v["wholeGpu"] = json!(true),
                }
                out.entry((p.node.as_str(), &*d.uuid)).or_default().push(v);
            }
        }
    }
    out
}

/// What a MIG GPU shows besides its usage: its profiles, how often each slice is
/// held, and the instances on it.
fn mig_view(d: &GpuDevice, u: &GpuUsage, instances: Option<&Vec<Value>>) -> Value {
    let slices: Vec<u8> = (0..MIG_SLICES).map(|i| u.mig.held(i)).collect();
    json!({
        "profiles": d.mig_profiles.iter().map(|p| json!({
            "name": p.name, "memoryMB": p.memory_mb, "core": p.core,
            "placements": p.placements,
        })).collect::<Vec<_>>(),
        "slicesHeld": slices,
        "wholeGpuHolds": u.mig.unplaced_holds(),
        "instances": instances.cloned().unwrap_or_default(),
    })
}

impl Scheduler {
    /// Nodes with their GPUs (capacity and usage), every tracked pod, quotas.
    pub fn debug_state(&self) -> Value {
        let ledger = self.ledger.read();
        let now = self.clock.now();
        let instances = mig_instances(&ledger);
        let nodes: Vec<Value> = ledger
            .nodes()
            .iter()
            .map(|(name, entry)| {
                let usage = entry.usage.iter().copied();
                let gpus: Vec<Value> = entry
                    .devices
                    .iter()
                    .zip(usage)
                    .map(|(d, u)| {
                        let mut gpu = json!({
                            "id": d.id, "index": d.index, "type": d.model, "mode": d.mode,
                            "numa": d.numa, "health": d.health,
                            "cordoned": entry.cordoned.contains(&*d.id),
                            "count": d.count, "devmem": d.devmem, "devcore": d.devcore,
                            "used": u.used, "usedmem": u.usedmem, "usedcores": u.usedcores,
                        });
                        let held = instances.get(&(name.as_str(), &*d.id));
                        if d.is_mig() || held.is_some() {
                            gpu["mig"] = mig_view(d, &u, held);
                        }
                        gpu
                    })
                    .collect();
                json!({
                    "name": name,
                    "registrationError": entry.registration_error,
                    "gpus": gpus,
                })
            })
            .collect();
        let mut pods: Vec<Value> = ledger
            .pods()
            .map(|p| {
                let (phase, expires) = match p.phase {
                    PodPhase::Reserved { deadline } => (
                        "Reserved",
                        Some(deadline.saturating_duration_since(now).as_secs_f64()),
                    ),
                    PodPhase::Binding => ("Binding", None),
                    PodPhase::Bound => ("Bound", None),
                };
                json!({
                    "uid": p.uid, "namespace": p.namespace, "name": p.name, "node": p.node,
                    "phase": phase, "reservationExpiresInSeconds": expires,
                    "devices": p.devices,
                    "usage": p.usage.iter().map(|(k, u)| (k.clone(), *u)).collect::<std::collections::BTreeMap<_, _>>(),
                })
            })
            .collect();
        pods.sort_by(|a, b| {
            (a["namespace"].as_str(), a["name"].as_str())
                .cmp(&(b["namespace"].as_str(), b["name"].as_str()))
        });
        let quotas: Vec<Value> = ledger
            .quota_report()
            .into_iter()
            .map(|(ns, limits, (mem, cores))| {
                json!({"namespace": ns, "limits": limits, "usedMemory": mem, "usedCores": cores})
            })
            .collect();
        // Claims on GPUs the ledger refused to book (see `claims`).
        let conflicts = self.claims.list();
        let topology = self.topology_view(&ledger);
        json!({
            "nodes": nodes, "pods": pods, "quotas": quotas, "conflicts": conflicts,
            "networkTopology": topology,
        })
    }
}
