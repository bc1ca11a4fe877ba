//! Proportional (`proportional:`): a node that still has idle units of a listed
//! resource keeps `<resource>.cpu` CPUs and `<resource>.memory` GB of memory free
//! per idle unit, so those units stay usable. A pod that asks for none of the listed
//! resources is refused a node where it would eat into that reserve; a pod that
//! asks for one of them is never refused (Volcano's proportional predicate).
//!
//! Units, as Volcano computes them: CPUs per unit, and memory in GB of 10^9 bytes
//! per unit (not GiB). For `nvidia.com/gpu` the idle units are the node's whole
//! GPUs this scheduler's ledger holds nothing on: counting free vGPU slots instead
//! would multiply the reserve by each GPU's split count. For the other vGPU
//! dimensions they are the free MiB (`nvidia.com/gpumem`) or percent
//! (`nvidia.com/gpucores`); for any other resource, the node's allocatable less
//! what its pods request.

use super::values::{boolean_at, mapping_at, number_at, resource_list};
use crate::placement::NodeFacts;
use crate::resources::{Resources, VgpuDims};
use crate::usage::GpuUsage;
use crate::volcano::conf::ConfError;
use crate::volcano::framework::arguments::Arguments;
use crate::volcano::plugins::node_resource::capacity_and_used;
use std::collections::BTreeMap;

/// Milli-units of memory in one GB as Volcano counts it (10^9 bytes).
const MILLI_PER_GB: f64 = 1e12;

/// Milli-units of CPU in one CPU.
const MILLI_PER_CPU: f64 = 1e3;

/// What each idle unit of a resource keeps free.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reserve {
    /// CPUs per idle unit.
    pub cpu: f64,
    /// GB (10^9 bytes) of memory per idle unit.
    pub memory: f64,
}

/// The proportional policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Proportional {
    /// `proportional.resources` with their `resourceProportion`.
    pub resources: BTreeMap<String, Reserve>,
}

impl Proportional {
    /// Reads `proportional:`; `None` unless `enable: true`. A proportion that is
    /// absent or negative counts 1, as in Volcano. A `resourceProportion` key must
    /// be `<listed resource>.cpu` or `<listed resource>.memory`: anything else is a
    /// misspelling that would reserve nothing, and is refused.
    pub fn from_args(args: &Arguments<'_>, key: &str) -> Result<Option<Self>, ConfError> {
        let Some(raw) = args.raw(key) else {
            return Ok(None);
        };
        let mut enable = false;
        let mut names: Vec<String> = Vec::new();
        let mut proportions: Vec<(String, f64)> = Vec::new();
        for (field, value) in mapping_at(args, key, raw)? {
            let at = format!("{key}.{field}");
            match field.as_str() {
                "enable" => enable = boolean_at(args, &at, value)?,
                "resources" => names = resource_list(args, &at, value)?,
                "resourceProportion" => {
                    for (k, v) in mapping_at(args, &at, value)? {
                        proportions.push((k.clone(), number_at(args, &format!("{at}.{k}"), v)?));
                    }
                }
                _ => {
                    return Err(args.error(
                        &at,
                        "unknown field (expected enable, resources, resourceProportion)",
                    ));
                }
            }
        }
        let mut resources: BTreeMap<String, Reserve> = names
            .into_iter()
            .map(|n| {
                (
                    n,
                    Reserve {
                        cpu: 1.0,
                        memory: 1.0,
                    },
                )
            })
            .collect();
        for (k, v) in proportions {
            let v = if v < 0.0 { 1.0 } else { v };
            let target = k
                .strip_suffix(".cpu")
                .map(|r| (r, true))
                .or_else(|| k.strip_suffix(".memory").map(|r| (r, false)));
            let at = format!("{key}.resourceProportion.{k}");
            let Some((resource, is_cpu)) = target else {
                return Err(args.error(
                    &at,
                    "expected <resource>.cpu or <resource>.memory, such as nvidia.com/gpu.cpu",
                ));
            };
            let Some(reserve) = resources.get_mut(resource) else {
                return Err(args.error(&at, format!("{resource} is not listed in {key}.resources")));
            };
            if is_cpu {
                reserve.cpu = v;
            } else {
                reserve.memory = v;
            }
        }
        Ok(enable.then_some(Self { resources }))
    }

    /// Whether the node may take a pod requesting `requests`, or why not.
    pub fn check(
        &self,
        requests: &Resources,
        node: &NodeFacts<'_>,
        dims: &VgpuDims,
    ) -> Result<(), String> {
        if self.resources.keys().any(|r| requests.get(r) > 0) {
            return Ok(());
        }
        let free = |dim: &str| {
            node.allocatable.contains(dim).then(|| {
                (node.allocatable.get(dim) - node.requested.get(dim) - requests.get(dim)) as f64
            })
        };
        let (cpu_left, memory_left) = (free("cpu"), free("memory"));
        for (resource, reserve) in &self.resources {
            let Some(idle) = idle_units(resource, node, dims) else {
                continue;
            };
            // A node whose CPU or memory is not known keeps no reserve of it.
            let short = |left: Option<f64>, per_unit: f64, milli: f64| {
                left.is_some_and(|left| left < idle * per_unit * milli)
            };
            if short(cpu_left, reserve.cpu, MILLI_PER_CPU)
                || short(memory_left, reserve.memory, MILLI_PER_GB)
            {
                return Err(format!(
                    "resource-strategy-fit: would leave too little CPU or memory free for the node's idle {resource} (proportional)"
                ));
            }
        }
        Ok(())
    }
}

/// The node's idle units of `resource`; `None` when the node has none of it at all.
pub fn idle_units(resource: &str, node: &NodeFacts<'_>, dims: &VgpuDims) -> Option<f64> {
    let gpus = &node.gpus;
    if resource == dims.count {
        if gpus.devices.is_empty() {
            return None;
        }
        let idle = gpus
            .devices
            .iter()
            .zip(gpus.usage)
            .zip(gpus.is_vendor)
            .filter(|((d, u), vendor)| {
                **vendor
                    && d.health
                    && !gpus.cordoned.contains(&*d.id)
                    && **u == GpuUsage::default()
            })
            .count();
        return Some(idle as f64);
    }
    if resource == dims.memory || resource == dims.cores {
        let (capacity, used) = capacity_and_used(resource, node, dims);
        return (capacity > 0.0).then(|| (capacity - used).max(0.0) / 1000.0);
    }
    node.allocatable.contains(resource).then(|| {
        (node.allocatable.get(resource) - node.requested.get(resource)).max(0) as f64 / 1000.0
    })
}
