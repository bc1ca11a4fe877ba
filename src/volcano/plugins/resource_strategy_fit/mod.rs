//! resource-strategy-fit: scores nodes per resource, packing some resources and
//! spreading others (Volcano's resource-strategy-fit). For each resource the pod
//! requests that `resources:` lists (by name, or by the longest `prefix*`):
//!
//! ```text
//! MostAllocated:  share_r = (used_r + request_r) / allocatable_r × weight_r
//! LeastAllocated: share_r = (allocatable_r − used_r − request_r) / allocatable_r × weight_r
//! score = Σ share_r / Σ weight_r × 100 × resourceStrategyFitWeight
//! ```
//!
//! A resource the node has none of adds its weight and no share; a node left short
//! of any scored resource scores 0. Pods may replace `resources:` with their own
//! annotations ([`pod_override`]). Two sub-policies ride along: SRA adds a score
//! that keeps pods off nodes with scarce resources they do not need ([`sra`]), and
//! Proportional rules out nodes where a pod would eat into the CPU and memory kept
//! for idle GPUs ([`proportional`]).
//!
//! The vGPU dimensions are read from the node's GPUs and what this scheduler's
//! ledger holds on them, CPU and memory from the node's allocatable and the pods
//! bound to it (`node_resource`). The score adds to the pod's GPU node policy
//! (0–100) in the one node choice `/filter` and the planner share.

mod pod_override;
mod proportional;
mod requests;
mod sra;
mod strategies;
mod values;

#[cfg(test)]
mod tests;

pub use pod_override::{SCORING_TYPE_ANNOTATION, WEIGHT_ANNOTATION};
pub use proportional::{Proportional, Reserve};
pub use sra::Sra;
pub use strategies::{ResourceStrategy, ScoringType, StrategyTable};

use super::binpack::MAX_NODE_SCORE;
use super::node_resource::capacity_and_used;
use crate::placement::{NodeFacts, TaskFacts};
use crate::resources::Resources;
use crate::volcano::conf::ConfError;
use crate::volcano::framework::arguments::Arguments;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use pod_override::{PodStrategies, pod_strategies};
use requests::task_requests;

const WEIGHT: &str = "resourceStrategyFitWeight";
const RESOURCES: &str = "resources";
const SRA: &str = "sra";
const PROPORTIONAL: &str = "proportional";

/// `resourceStrategyFitWeight` when absent or negative (Volcano's default).
pub const DEFAULT_WEIGHT: i64 = 10;

/// The resource-strategy-fit plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceStrategyFit {
    /// `resourceStrategyFitWeight` (0: the per-resource score is off).
    pub weight: i64,
    /// `resources`.
    pub resources: StrategyTable,
    /// `sra`, when enabled.
    pub sra: Option<Sra>,
    /// `proportional`, when enabled.
    pub proportional: Option<Proportional>,
}

/// Builds the plugin from its arguments; a bad one is refused at load, naming it.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ResourceStrategyFit::from_args(&ctx.args).map(|p| Some(Box::new(p) as Box<dyn Plugin>))
}

impl ResourceStrategyFit {
    /// Reads the arguments. Numbers follow Volcano (a negative plugin weight counts
    /// 10, a resource weight below 1 counts 1); misspelt keys, unknown scoring
    /// types and malformed wildcards are refused.
    pub fn from_args(args: &Arguments<'_>) -> Result<Self, ConfError> {
        args.only(&[WEIGHT, RESOURCES, SRA, PROPORTIONAL])?;
        let weight = match args.integer_at_least(WEIGHT, i64::MIN)? {
            Some(w) if w >= 0 => w,
            _ => DEFAULT_WEIGHT,
        };
        Ok(Self {
            weight,
            resources: StrategyTable::from_args(args, RESOURCES)?,
            sra: Sra::from_args(args, SRA)?,
            proportional: Proportional::from_args(args, PROPORTIONAL)?,
        })
    }

    /// Resources the configuration names exactly: read from a pod's containers
    /// when they are not among what every plugin sees of it.
    fn named<'a>(&'a self, own: Option<&'a StrategyTable>) -> impl Iterator<Item = &'a str> {
        let sra = self.sra.iter().flat_map(|s| s.resources.keys());
        let proportional = self.proportional.iter().flat_map(|p| p.resources.keys());
        self.resources
            .exact_names()
            .chain(own.into_iter().flat_map(StrategyTable::exact_names))
            .chain(sra.chain(proportional).map(String::as_str))
    }

    /// The per-resource score of the node for a pod requesting `requests`, scored
    /// by `table`.
    pub fn strategy_score(
        &self,
        table: &StrategyTable,
        requests: &Resources,
        task: &TaskFacts<'_>,
        node: &NodeFacts<'_>,
    ) -> f64 {
        let mut score = 0.0;
        let mut weights = 0i64;
        for (resource, request) in requests.iter() {
            if request == 0 {
                continue;
            }
            let Some(strategy) = table.lookup(resource) else {
                continue;
            };
            let (capacity, used) = capacity_and_used(resource, node, task.dims);
            match strategy.share(request as f64, used, capacity) {
                Some(share) => score += share,
                None => return 0.0,
            }
            weights += strategy.weight;
        }
        if weights > 0 {
            score /= weights as f64;
        }
        score * MAX_NODE_SCORE * self.weight as f64
    }

    /// The task's score on the node: the per-resource score plus SRA's.
    pub fn score(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        let strategies = pod_strategies(task.pod);
        let (table, own) = match &strategies {
            PodStrategies::Configured => (Some(&self.resources), None),
            PodStrategies::Own(t) => (Some(t), Some(t)),
            PodStrategies::Unreadable => (None, None),
        };
        let requests = task_requests(task, self.named(own));
        let mut score = 0.0;
        if self.weight > 0
            && let Some(table) = table
        {
            score += self.strategy_score(table, &requests, task, node);
        }
        if let Some(sra) = self.sra.as_ref().filter(|s| s.scores()) {
            score += sra.score(&requests, node, task.dims);
        }
        score
    }
}

impl Plugin for ResourceStrategyFit {
    fn name(&self) -> &'static str {
        "resource-strategy-fit"
    }

    fn scores_nodes(&self) -> bool {
        self.weight > 0 || self.sra.as_ref().is_some_and(Sra::scores)
    }

    fn node_order(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        self.score(task, node)
    }

    fn filters_nodes(&self) -> bool {
        self.proportional.is_some()
    }

    fn predicate(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> Result<(), String> {
        let Some(proportional) = &self.proportional else {
            return Ok(());
        };
        let requests = task_requests(task, self.named(None));
        proportional.check(&requests, node, task.dims)
    }
}
