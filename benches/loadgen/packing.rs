//! How the burst was packed, read off the pods the API server holds at the end:
//! nodes used, GPUs partly used, and any GPU given more than it registered.

use super::cluster::{GPU_CORES, GPU_MEM, GPU_SLOTS, POD_CORES, POD_MEM};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The packing of the pods of one namespace.
#[derive(Debug, Default)]
pub struct Packing {
    /// Nodes holding at least one of the pods.
    pub nodes_used: usize,
    /// GPUs holding at least one of the pods with room for one more load pod
    /// (`None` when the pods carry no GPU assignment: no extender).
    pub gpus_partly_used: Option<usize>,
    /// GPUs given more slots, memory or compute than they registered.
    pub gpus_over_capacity: usize,
}

#[derive(Debug, Default, Clone, Copy)]
struct GpuUse {
    slots: u64,
    mem: u64,
    cores: u64,
}

/// Packing of the bound pods in `namespace` among `pods`.
pub fn packing(pods: &[Value], namespace: &str) -> Packing {
    let mut nodes = BTreeSet::new();
    let mut gpus: BTreeMap<String, GpuUse> = BTreeMap::new();
    let mut any_assignment = false;
    for pod in pods {
        if pod.pointer("/metadata/namespace").and_then(Value::as_str) != Some(namespace) {
            continue;
        }
        let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) else {
            continue;
        };
        nodes.insert(node.to_string());
        let Some(devices) = pod
            .pointer("/metadata/annotations/hami.io~1vgpu-devices-allocated")
            .and_then(Value::as_str)
        else {
            continue;
        };
        any_assignment = true;
        // `<uuid>,<type>,<mem>,<cores>:` per device, `;` per container.
        for device in devices.split([';', ':']).filter(|d| !d.is_empty()) {
            let fields: Vec<&str> = device.split(',').collect();
            if fields.len() < 4 {
                continue;
            }
            let gpu = gpus.entry(fields[0].to_string()).or_default();
            gpu.slots += 1;
            gpu.mem += fields[2].parse::<u64>().unwrap_or(0);
            gpu.cores += fields[3].parse::<u64>().unwrap_or(0);
        }
    }
    let over = |g: &GpuUse| g.slots > GPU_SLOTS || g.mem > GPU_MEM || g.cores > GPU_CORES;
    let room = |g: &GpuUse| {
        g.slots < GPU_SLOTS && g.mem + POD_MEM <= GPU_MEM && g.cores + POD_CORES <= GPU_CORES
    };
    Packing {
        nodes_used: nodes.len(),
        gpus_partly_used: any_assignment.then(|| gpus.values().filter(|g| room(g)).count()),
        gpus_over_capacity: gpus.values().filter(|g| over(g)).count(),
    }
}
