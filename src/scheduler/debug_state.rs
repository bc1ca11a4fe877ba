//! `/debug/state`: the ledger as JSON, so an operator can see who holds which GPU.

use super::Scheduler;
use crate::ledger::PodPhase;
use serde_json::{Value, json};

impl Scheduler {
    /// Nodes with their GPUs (capacity and usage), every tracked pod, quotas.
    pub fn debug_state(&self) -> Value {
        let ledger = self.ledger.read();
        let now = self.clock.now();
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
                        json!({
                            "id": d.id, "index": d.index, "type": d.model, "mode": d.mode,
                            "numa": d.numa, "health": d.health,
                            "cordoned": entry.cordoned.contains(&*d.id),
                            "count": d.count, "devmem": d.devmem, "devcore": d.devcore,
                            "used": u.used, "usedmem": u.usedmem, "usedcores": u.usedcores,
                        })
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
        json!({ "nodes": nodes, "pods": pods, "quotas": quotas, "conflicts": conflicts })
    }
}
