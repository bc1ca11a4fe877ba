//! kube-scheduler's InterPodAffinity score, which Volcano's nodeorder plugin
//! runs with the weight `podaffinity.weight`: a pod's preferred pod affinity
//! draws it to the topology domains holding pods its terms select, its preferred
//! anti-affinity pushes it away from them, and the preferred terms of the pods
//! already on nodes draw it to (or push it from) theirs when they select it.
//! The planner places gang members before kube-scheduler sees them (a member is
//! pinned, or `/filter` offers only its planned node), so without this score
//! their preferences would count nowhere.
//!
//! Each term that selects a pod adds its weight (negative for anti-affinity) to
//! the domain of the pod's node, by the term's topology label; a node's raw score
//! is the sum over the domains it lies in. Raw scores are then spread over the
//! candidate nodes to 0..100 (the lowest 0, the highest 100, truncated), as
//! kube-scheduler's NormalizeScore does; with no term selecting anything every
//! node scores 0. Required terms of other pods add nothing, as in Volcano, which
//! runs the plugin with a hard pod affinity weight of 0.

use super::judge::{NodeFacts, NodeJudge, TaskFacts};
use super::namespace_labels::NamespaceLabels;
use super::pod_affinity::{AffinityPod, WeightedTerm};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The highest normalised score.
const MAX: f64 = 100.0;

/// Weights per topology domain for one incoming pod, gathered once over the
/// pods on the nodes (kube-scheduler's PreScore).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreferredPodAffinity {
    incoming: AffinityPod,
    /// Weight per topology label, per value.
    domains: HashMap<String, HashMap<String, i64>>,
    /// The namespaces' labels, for namespace selectors.
    namespaces: Arc<NamespaceLabels>,
}

impl PreferredPodAffinity {
    /// The score for `incoming`, with no other pod seen yet.
    pub fn new(incoming: AffinityPod) -> Self {
        Self {
            incoming,
            domains: HashMap::new(),
            namespaces: Arc::default(),
        }
    }

    /// The same score, judging namespace selectors by these namespaces' labels.
    pub fn in_namespaces(mut self, namespaces: Arc<NamespaceLabels>) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// Whether the incoming pod has preferred terms of its own: then every pod
    /// matters, otherwise only pods with preferred terms do.
    pub fn has_own_terms(&self) -> bool {
        !self.incoming.preferred.is_empty()
    }

    /// Counts `other`, on a node with `node_labels`.
    pub fn add(&mut self, other: &AffinityPod, node_labels: &BTreeMap<String, String>) {
        if other.uid == self.incoming.uid && !other.uid.is_empty() {
            return;
        }
        let incoming = &self.incoming;
        let theirs = other.preferred.iter().map(|t| (t, incoming));
        let ours = incoming.preferred.iter().map(|t| (t, other));
        let mut weights: Vec<(&str, &str, i64)> = Vec::new();
        for (WeightedTerm { weight, term }, selected) in ours.chain(theirs) {
            if term.selects(&selected.namespace, &selected.labels, &self.namespaces)
                && let Some(value) = term.domain(node_labels)
            {
                weights.push((term.topology_key(), value, *weight));
            }
        }
        for (key, value, weight) in weights {
            *self
                .domains
                .entry(key.to_string())
                .or_default()
                .entry(value.to_string())
                .or_default() += weight;
        }
    }

    /// Whether no term selected any pod: every node scores the same.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// A node's raw score, before it is spread over the candidates.
    pub fn raw(&self, node_labels: &BTreeMap<String, String>) -> i64 {
        self.domains
            .iter()
            .filter_map(|(key, values)| values.get(node_labels.get(key)?))
            .sum()
    }
}

/// Raw scores spread over the candidates: the lowest 0, the highest 100.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    lowest: i64,
    highest: i64,
}

impl Spread {
    /// The spread of these raw scores.
    pub fn of(raw: impl IntoIterator<Item = i64>) -> Self {
        raw.into_iter().fold(
            Self {
                lowest: i64::MAX,
                highest: i64::MIN,
            },
            |s, r| Self {
                lowest: s.lowest.min(r),
                highest: s.highest.max(r),
            },
        )
    }

    /// The normalised score of a raw score (truncated, as kube-scheduler keeps
    /// integers).
    pub fn normalise(&self, raw: i64) -> f64 {
        if self.highest <= self.lowest {
            return 0.0;
        }
        (MAX * (raw - self.lowest) as f64 / (self.highest - self.lowest) as f64).trunc()
    }
}

/// The weighted preferred pod affinity score of a task over its candidates.
#[derive(Debug, Clone, Copy)]
pub struct AffinityRanking<'a> {
    scores: &'a PreferredPodAffinity,
    spread: Spread,
    weight: f64,
}

impl<'a> AffinityRanking<'a> {
    /// The ranking of `task` (weighted by the judge's `podaffinity.weight`) over
    /// `candidates`, the nodes that pass; `None` when it cannot tell nodes apart.
    pub fn over<'n>(
        task: &TaskFacts<'a>,
        judge: &dyn NodeJudge,
        candidates: impl Iterator<Item = NodeFacts<'n>>,
    ) -> Option<Self> {
        let scores = task.preferred_pod_affinity.filter(|s| !s.is_empty())?;
        let weight = judge.pod_affinity_weight();
        if weight <= 0.0 {
            return None;
        }
        let spread = Spread::of(candidates.map(|n| scores.raw(labels_of(&n))));
        Some(Self {
            scores,
            spread,
            weight,
        })
    }

    /// The node's weighted score.
    pub fn score(&self, node: &NodeFacts<'_>) -> f64 {
        self.weight * self.spread.normalise(self.scores.raw(labels_of(node)))
    }
}

fn labels_of<'n>(node: &NodeFacts<'n>) -> &'n BTreeMap<String, String> {
    super::node_traits::NodeTraits::labels_of(node.traits)
}

#[cfg(test)]
#[path = "preferred_pod_affinity_tests.rs"]
mod tests;
