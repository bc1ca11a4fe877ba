//! network-topology-aware: which HyperNode a gang with `spec.networkTopology`
//! goes to when several can hold it. The allocate action keeps such a gang inside
//! one HyperNode of the lowest tier that can hold it (and, in hard mode, never
//! above the tier allowed); this plugin orders the candidates of that tier.
//!
//! A gang with members already placed (an elastic job growing, a member placed
//! again) prefers the candidate closest to them: 100 for the HyperNode they are
//! in, otherwise by the tier of the lowest HyperNode holding both, scaled between
//! the lowest tier (100) and the highest (0). When several candidates tie, the one
//! holding more of the gang's members wins (100 × members there / members). A
//! gang with nothing placed yet gets no opinion here: the node order of the nodes
//! it would use decides (binpack fills the fullest HyperNode first). Scores are
//! multiplied by `weight` (default 1), as in Volcano.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{JobInfo, Plugin, SessionState};
use crate::volcano::topology::{NetworkTopology, Span};

const WEIGHT: &str = "weight";
/// How many HyperNodes a hard-constrained gang's room is sought in by the gang
/// eviction actions, the widest first.
const EVICT_MAX_HYPER_NODES: &str = "hypernode.gradient.evict.max-hypernodes";
/// Volcano's default for [`EVICT_MAX_HYPER_NODES`], also used for a value of 0
/// or less.
const DEFAULT_EVICT_MAX_HYPER_NODES: usize = 8;
/// Volcano's score for the nodes with the lowest IP, behind a feature gate that is
/// off by default; accepted and not used.
const HIGH_PRIORITY_IP_SCORE: &str = "highPriorityIPScore";
/// The most a closeness or member-share score gives, before the weight.
const FULL_SCORE: f64 = 100.0;

/// The plugin.
#[derive(Debug, Clone)]
pub struct NetworkTopologyAware {
    weight: f64,
    ip_score_set: bool,
    evict_max_hyper_nodes: usize,
}

/// Builds the plugin from its arguments.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args
        .only(&[WEIGHT, HIGH_PRIORITY_IP_SCORE, EVICT_MAX_HYPER_NODES])?;
    let weight = ctx.args.integer_at_least(WEIGHT, 0)?.unwrap_or(1);
    ctx.args.number(HIGH_PRIORITY_IP_SCORE)?;
    let evict_max_hyper_nodes = ctx
        .args
        .number(EVICT_MAX_HYPER_NODES)?
        .filter(|n| *n >= 1.0)
        .map_or(DEFAULT_EVICT_MAX_HYPER_NODES, |n| n as usize);
    Ok(Some(Box::new(NetworkTopologyAware {
        weight: weight as f64,
        ip_score_set: ctx.args.raw(HIGH_PRIORITY_IP_SCORE).is_some(),
        evict_max_hyper_nodes,
    })))
}

impl NetworkTopologyAware {
    /// How close `candidate` is to `placed` (the HyperNode holding the gang's
    /// placed members), 0..=100.
    fn closeness(topology: &NetworkTopology, candidate: &str, placed: &str) -> f64 {
        if candidate == placed {
            return FULL_SCORE;
        }
        let Some(joined) = topology
            .common_ancestor(candidate, placed)
            .and_then(|c| topology.get(c))
        else {
            return 0.0;
        };
        let (Some(&lowest), Some(&highest)) = (topology.tiers.first(), topology.tiers.last())
        else {
            return 0.0;
        };
        if highest == lowest {
            return 0.0;
        }
        FULL_SCORE * f64::from(highest.saturating_sub(joined.tier)) / f64::from(highest - lowest)
    }
}

impl Plugin for NetworkTopologyAware {
    fn name(&self) -> &'static str {
        "network-topology-aware"
    }

    fn eviction_hyper_nodes(&self) -> Option<usize> {
        Some(self.evict_max_hyper_nodes)
    }

    fn hyper_node_order(
        &self,
        state: &SessionState,
        job: &JobInfo,
        candidates: &[&str],
    ) -> Vec<f64> {
        let topology = &state.topology;
        let placed_nodes: Vec<&str> = job.placed_nodes().collect();
        let Span::Within(placed) = topology.span(placed_nodes.iter().copied()) else {
            return Vec::new();
        };
        let mut scores: Vec<f64> = candidates
            .iter()
            .map(|c| self.weight * Self::closeness(topology, c, &placed))
            .collect();
        let best = scores.iter().copied().fold(f64::MIN, f64::max);
        let tied: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] == best).collect();
        if tied.len() > 1 && !job.tasks.is_empty() {
            for i in tied {
                let under = topology.get(candidates[i]).map_or(0, |h| {
                    placed_nodes
                        .iter()
                        .filter(|n| h.nodes.contains(**n))
                        .count()
                });
                scores[i] += self.weight * FULL_SCORE * under as f64 / job.tasks.len() as f64;
            }
        }
        scores
    }

    fn notes(&self) -> Vec<String> {
        if self.ip_score_set {
            vec![format!(
                "network-topology-aware: {HIGH_PRIORITY_IP_SCORE} is accepted and not used (Volcano scores node IPs only behind a feature gate that is off by default)"
            )]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
#[path = "network_topology_aware_tests.rs"]
mod tests;
