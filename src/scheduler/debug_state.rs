//! `/debug/state`: the ledger as JSON, so an operator can see who holds which GPU
//! (and, with the usage plugin, how busy each node measurably is and whether that
//! counts), and the network topology the planner reads.

use super::Scheduler;
use crate::device::mig::{MIG_SLICES, MigHold};
use crate::device::model::GpuDevice;
use crate::ledger::{Ledger, PodPhase};
use crate::node_metrics::{MeasuredUsage, MetricsEntry, MetricsSource, STALE_AFTER, UsageReading};
use crate::usage::GpuUsage;
use chrono::{DateTime, Utc};
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

/// A node's measured usage as the usage plugin judges it now: the figures of its
/// sample (also when too old to use), and, when it is not used, why.
fn measured_usage_view(ledger: &Ledger, node: &str, now: DateTime<Utc>) -> Value {
    let entry = ledger.load().measured().lookup(node);
    let allocatable = ledger
        .load()
        .get(node)
        .map(|n| n.allocatable.clone())
        .unwrap_or_default();
    let reading = MeasuredUsage { entry, now }.reading(&allocatable);
    let mut view = json!({"used": matches!(reading, UsageReading::Current(_))});
    if let MetricsEntry::Sample(sample) = entry {
        let percent = |used: i64, dim: &str| {
            let offered = allocatable.get(dim);
            (offered > 0).then(|| (used as f64 * 10_000.0 / offered as f64).round() / 100.0)
        };
        view["cpuPercent"] = json!(percent(sample.cpu_milli, "cpu"));
        view["memoryPercent"] = json!(percent(sample.memory_milli, "memory"));
        view["timestamp"] = json!(rfc3339(sample.timestamp));
        view["ageSeconds"] = json!((now - sample.timestamp).num_seconds().max(0));
        if let Some(window) = sample.window {
            view["windowSeconds"] = json!(window.as_millis() as f64 / 1000.0);
        }
    }
    if let UsageReading::Unused(reason) = reading {
        view["reason"] = json!(reason);
    }
    view
}

/// A time as the API writes it, to the second.
fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Where measured usage comes from and how the last list went.
fn node_metrics_source(ledger: &Ledger) -> Value {
    let mut view = json!({"staleAfterSeconds": STALE_AFTER.as_secs()});
    match ledger.load().measured().source() {
        MetricsSource::NotCollected => view["source"] = json!("not collected"),
        MetricsSource::ClusterFile => view["source"] = json!("cluster file"),
        MetricsSource::Api { listed_at, problem } => {
            view["source"] = json!("metrics.k8s.io");
            view["listedAt"] = json!(listed_at.map(rfc3339));
            view["problem"] = json!(problem);
        }
    }
    view
}

impl Scheduler {
    /// Nodes with their GPUs (capacity and usage), every tracked pod, quotas; with
    /// the usage plugin configured, each node's measured usage too.
    pub fn debug_state(&self) -> Value {
        let measured = self.needs_node_metrics();
        let wall = self.clock.wall();
        let ledger = self.ledger.read();
        let now = self.clock.now();
        let instances = mig_instances(&ledger);
        let allocating = self.allocating_pods_by_node();
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
                let mut node = json!({
                    "name": name,
                    "registrationError": entry.registration_error,
                    "gpus": gpus,
                });
                if measured {
                    node["measuredUsage"] = measured_usage_view(&ledger, name, wall);
                }
                if let Some(allocating) = &allocating {
                    node["allocating"] =
                        json!(allocating.get(name.as_str()).cloned().unwrap_or_default());
                }
                node
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
        let mut state = json!({
            "nodes": nodes, "pods": pods, "quotas": quotas, "conflicts": conflicts,
            "networkTopology": self.topology_view(&ledger),
        });
        if measured {
            state["nodeMetrics"] = node_metrics_source(&ledger);
        }
        state
    }
}
