//! binpack: prefer the node that the task fills most, weighted per resource
//! (Volcano's binpack). For each resource the task requests and the plugin weighs:
//!
//! ```text
//! score_r = (used_r + request_r) / allocatable_r × weight_r   (0 if it overflows)
//! score   = Σ score_r / Σ weight_r × 100 × binpack.weight
//! ```
//!
//! CPU and memory come from the node's allocatable and the pods on it; the vGPU
//! dimensions (`nvidia.com/gpu`, `nvidia.com/gpumem`, `nvidia.com/gpucores` by
//! default) from the node's registered GPUs and their usage; any other listed
//! resource from the node's allocatable and the pods' requests. The score adds to
//! the pod's GPU node policy (0..=100) in the one node choice `/filter` and the
//! planner share.

use crate::placement::{NodeFacts, TaskFacts};
use crate::resources::VgpuDims;
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use std::collections::BTreeMap;

/// kube-scheduler's (and Volcano's) highest node score.
pub const MAX_NODE_SCORE: f64 = 100.0;

const WEIGHT: &str = "binpack.weight";
const CPU: &str = "binpack.cpu";
const MEMORY: &str = "binpack.memory";
const RESOURCES: &str = "binpack.resources";
const RESOURCE_PREFIX: &str = "binpack.resources.";

/// The binpack plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Binpack {
    /// `binpack.weight`.
    pub weight: i64,
    /// `binpack.cpu`.
    pub cpu: i64,
    /// `binpack.memory`.
    pub memory: i64,
    /// `binpack.resources` with their `binpack.resources.<name>` weights.
    pub resources: BTreeMap<String, i64>,
}

/// Builds the plugin. Weights default to 1; a negative resource weight counts 1, as
/// in Volcano.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    Binpack::from_args(ctx).map(|b| Some(Box::new(b) as Box<dyn Plugin>))
}

impl Binpack {
    fn from_args(ctx: &BuildContext<'_>) -> Result<Self, ConfError> {
        let args = &ctx.args;
        let weight_of = |key: &str| -> Result<i64, ConfError> {
            let w = args.integer_at_least(key, i64::MIN)?.unwrap_or(1);
            Ok(if w < 0 { 1 } else { w })
        };
        let names: Vec<String> = args
            .string(RESOURCES)?
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let mut resources = BTreeMap::new();
        for name in &names {
            resources.insert(
                name.clone(),
                weight_of(&format!("{RESOURCE_PREFIX}{name}"))?,
            );
        }
        for (key, _) in args.iter() {
            if let Some(name) = key.strip_prefix(RESOURCE_PREFIX) {
                if !names.iter().any(|n| n == name) {
                    return Err(args.error(key, format!("{name} is not listed in {RESOURCES}")));
                }
            } else if ![WEIGHT, CPU, MEMORY, RESOURCES].contains(&key) {
                return Err(args.error(
                    key,
                    format!("unknown argument (expected {WEIGHT}, {CPU}, {MEMORY}, {RESOURCES}, {RESOURCE_PREFIX}<name>)"),
                ));
            }
        }
        let weight = args.integer_at_least(WEIGHT, 0)?.unwrap_or(1);
        Ok(Self {
            weight,
            cpu: weight_of(CPU)?,
            memory: weight_of(MEMORY)?,
            resources,
        })
    }

    fn weight_for(&self, resource: &str) -> Option<i64> {
        match resource {
            "cpu" => Some(self.cpu),
            "memory" => Some(self.memory),
            other => self.resources.get(other).copied(),
        }
    }

    /// The node's capacity and use of one resource, in milli-units.
    fn capacity_and_used(resource: &str, node: &NodeFacts<'_>, dims: &VgpuDims) -> (f64, f64) {
        let gpus = || node.gpus.devices.iter().zip(node.gpus.usage);
        if resource == dims.count {
            let cap: u64 = gpus().map(|(d, _)| u64::from(d.count)).sum();
            let used: u64 = gpus().map(|(_, u)| u64::from(u.used)).sum();
            (cap as f64 * 1000.0, used as f64 * 1000.0)
        } else if resource == dims.memory {
            let cap: u64 = gpus().map(|(d, _)| d.devmem).sum();
            let used: u64 = gpus().map(|(_, u)| u.usedmem).sum();
            (cap as f64 * 1000.0, used as f64 * 1000.0)
        } else if resource == dims.cores {
            let cap: u64 = gpus().map(|(d, _)| u64::from(d.devcore)).sum();
            let used: u64 = gpus().map(|(_, u)| u64::from(u.usedcores)).sum();
            (cap as f64 * 1000.0, used as f64 * 1000.0)
        } else {
            (
                node.allocatable.get(resource) as f64,
                node.requested.get(resource) as f64,
            )
        }
    }

    /// The task's score on the node.
    pub fn score(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        let mut score = 0.0;
        let mut weights = 0i64;
        for (resource, request) in task.resreq.iter() {
            if request == 0 {
                continue;
            }
            let Some(weight) = self.weight_for(resource) else {
                continue;
            };
            let (capacity, used) = Self::capacity_and_used(resource, node, task.dims);
            score += resource_score(request as f64, capacity, used, weight);
            weights += weight;
        }
        if weights > 0 {
            score /= weights as f64;
        }
        score * MAX_NODE_SCORE * self.weight as f64
    }
}

/// One resource's share of the node once the task is on it, weighted; 0 when the
/// node has none of it or the task would not fit.
fn resource_score(request: f64, capacity: f64, used: f64, weight: i64) -> f64 {
    if capacity == 0.0 || weight == 0 {
        return 0.0;
    }
    let after = request + used;
    if after > capacity {
        return 0.0;
    }
    after * weight as f64 / capacity
}

impl Plugin for Binpack {
    fn name(&self) -> &'static str {
        "binpack"
    }

    fn scores_nodes(&self) -> bool {
        self.weight != 0
    }

    fn node_order(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        self.score(task, node)
    }
}
