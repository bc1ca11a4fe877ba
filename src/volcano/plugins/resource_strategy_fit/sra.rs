//! SRA (scarce resource avoidance, `sra:`): keeps pods off nodes that have scarce
//! resources they do not need, so those resources stay usable for the pods that
//! do. Each listed resource has a weight (`resourceWeight`); a node scores
//!
//! ```text
//! (1 − Σ weight of the listed resources the node has / Σ all their weights) × 100 × sra.weight
//! ```
//!
//! and 0 when it lacks something the pod asks for (Volcano's sra policy).

use super::values::{boolean_at, mapping_at, resource_list, whole_number_at};
use crate::placement::NodeFacts;
use crate::resources::{Resources, VgpuDims};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::arguments::Arguments;
use crate::volcano::plugins::binpack::MAX_NODE_SCORE;
use crate::volcano::plugins::node_resource::capacity_and_used;
use std::collections::BTreeMap;

/// The SRA policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Sra {
    /// `sra.weight`: the policy's weight among the plugin's scores (0: off).
    pub weight: i64,
    /// `sra.resources` with their `sra.resourceWeight`.
    pub resources: BTreeMap<String, i64>,
}

impl Sra {
    /// Reads `sra:`; `None` unless `enable: true`. `weight` absent counts 1 (the
    /// documented default) and 0 or less turns the policy off; a resource weight
    /// below 0 counts 1, as in Volcano. Misspelt fields and weights for resources
    /// not listed in `resources` are refused.
    pub fn from_args(args: &Arguments<'_>, key: &str) -> Result<Option<Self>, ConfError> {
        let Some(raw) = args.raw(key) else {
            return Ok(None);
        };
        let mut enable = false;
        let mut weight = 1;
        let mut names: Vec<String> = Vec::new();
        let mut weights: BTreeMap<String, i64> = BTreeMap::new();
        for (field, value) in mapping_at(args, key, raw)? {
            let at = format!("{key}.{field}");
            match field.as_str() {
                "enable" => enable = boolean_at(args, &at, value)?,
                "weight" => weight = whole_number_at(args, &at, value)?,
                "resources" => names = resource_list(args, &at, value)?,
                "resourceWeight" => {
                    for (name, w) in mapping_at(args, &at, value)? {
                        let w = whole_number_at(args, &format!("{at}.{name}"), w)?;
                        weights.insert(name.clone(), if w < 0 { 1 } else { w });
                    }
                }
                _ => {
                    return Err(args.error(
                        &at,
                        "unknown field (expected enable, resources, weight, resourceWeight)",
                    ));
                }
            }
        }
        if let Some(name) = weights.keys().find(|n| !names.contains(n)) {
            return Err(args.error(
                &format!("{key}.resourceWeight.{name}"),
                format!("{name} is not listed in {key}.resources"),
            ));
        }
        if !enable {
            return Ok(None);
        }
        let resources = names
            .into_iter()
            .map(|n| {
                let w = weights.get(&n).copied().unwrap_or(1);
                (n, w)
            })
            .collect();
        Ok(Some(Self { weight, resources }))
    }

    /// Whether the policy adds anything to node scores.
    pub fn scores(&self) -> bool {
        self.weight > 0
    }

    /// The node's SRA score for a pod requesting `requests`.
    pub fn score(&self, requests: &Resources, node: &NodeFacts<'_>, dims: &VgpuDims) -> f64 {
        let has = |resource: &str| capacity_and_used(resource, node, dims).0 > 0.0;
        if requests
            .iter()
            .any(|(resource, amount)| amount > 0 && !has(resource))
        {
            return 0.0;
        }
        let total: i64 = self.resources.values().sum();
        let present: i64 = self
            .resources
            .iter()
            .filter(|(resource, _)| has(resource))
            .map(|(_, w)| w)
            .sum();
        let mut score = present as f64;
        if total > 0 {
            score = 1.0 - score / total as f64;
        }
        score * MAX_NODE_SCORE * self.weight as f64
    }
}
