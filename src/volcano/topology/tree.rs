//! The network topology resolved against the nodes that exist: for every
//! HyperNode, every node under it (through lower-tier HyperNodes), its parent,
//! and for every node the lowest HyperNode that holds it. Resolved once per
//! planning cycle; questions about it (which HyperNodes of a tier, the lowest
//! common ancestor of two) are then lookups.
//!
//! Inconsistent objects never stop scheduling: a HyperNode listed by two parents
//! keeps the first (by name), a member HyperNode that does not exist or is not of
//! a lower tier is left out, and each such finding is kept as a problem for
//! `/debug/state`.

use super::hyper_node::{HyperNode, MemberKind, MemberRule};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One HyperNode, resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedHyperNode {
    /// Its tier.
    pub tier: u32,
    /// Its tier's name, if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_name: Option<String>,
    /// The HyperNode that lists it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The HyperNodes it lists.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
    /// Every node under it, directly or through its children.
    pub nodes: BTreeSet<String>,
}

/// Where a set of nodes sits in the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    /// No node at all.
    Nowhere,
    /// All under this HyperNode (the lowest that holds them all).
    Within(String),
    /// Not under any one HyperNode.
    Scattered,
}

/// The resolved topology.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopology {
    /// HyperNodes by name.
    pub hyper_nodes: BTreeMap<String, ResolvedHyperNode>,
    /// Tiers present, lowest first.
    pub tiers: Vec<u32>,
    /// What was found inconsistent and how it was read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Each node's lowest HyperNode.
    #[serde(skip)]
    home: HashMap<String, String>,
}

impl NetworkTopology {
    /// Resolves `hyper_nodes` against the nodes that exist (name and labels).
    pub fn resolve<'a>(
        hyper_nodes: impl IntoIterator<Item = &'a HyperNode>,
        nodes: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
    ) -> Self {
        let specs: BTreeMap<&str, &HyperNode> = hyper_nodes
            .into_iter()
            .map(|h| (h.name.as_str(), h))
            .collect();
        if specs.is_empty() {
            return Self::default();
        }
        let nodes: Vec<(&str, &BTreeMap<String, String>)> = nodes.into_iter().collect();
        let known: HashMap<&str, &BTreeMap<String, String>> = nodes.iter().copied().collect();
        let mut problems = Vec::new();

        // Direct members of each HyperNode.
        let mut direct: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, spec) in &specs {
            let own = direct.entry(name).or_default();
            let kids = children.entry(name).or_default();
            for member in &spec.members {
                match (member.kind, &member.rule) {
                    (MemberKind::Node, MemberRule::Exact(n)) => {
                        if known.contains_key(n.as_str()) {
                            own.insert(n.clone());
                        }
                    }
                    (MemberKind::Node, rule) => own.extend(
                        nodes
                            .iter()
                            .filter(|(n, labels)| rule.picks(n, labels))
                            .map(|(n, _)| n.to_string()),
                    ),
                    (MemberKind::HyperNode, MemberRule::Exact(child)) => {
                        match specs.get_key_value(child.as_str()) {
                            Some((child, _)) => kids.push(child),
                            None => problems.push(format!(
                                "HyperNode {name} lists HyperNode {child}, which does not exist"
                            )),
                        }
                    }
                    (MemberKind::HyperNode, rule) => kids.extend(
                        specs
                            .keys()
                            .filter(|c| *c != name && rule.picks(c, &BTreeMap::new())),
                    ),
                }
            }
        }

        // Parents: a child must sit on a lower tier, and has one parent.
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut kept_children: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (name, kids) in &children {
            let tier = specs[name].tier;
            for kid in kids {
                let kid_tier = specs[kid].tier;
                if kid_tier >= tier {
                    problems.push(format!(
                        "HyperNode {name} (tier {tier}) lists HyperNode {kid} of tier {kid_tier}; a member must be of a lower tier, so it is left out"
                    ));
                    continue;
                }
                if let Some(first) = parent.get(kid) {
                    problems.push(format!(
                        "HyperNode {kid} is listed by both {first} and {name}; it is read as a member of {first}"
                    ));
                    continue;
                }
                parent.insert(kid, name);
                kept_children.entry(name).or_default().push(kid.to_string());
            }
        }

        // Every node under each HyperNode: lower tiers first, so children are done
        // before their parents (a child is always of a lower tier).
        let mut order: Vec<&str> = specs.keys().copied().collect();
        order.sort_by_key(|n| (specs[n].tier, *n));
        let mut resolved: BTreeMap<String, ResolvedHyperNode> = BTreeMap::new();
        for name in &order {
            let mut under = direct.remove(name).unwrap_or_default();
            let kids = kept_children.remove(name).unwrap_or_default();
            for kid in &kids {
                if let Some(k) = resolved.get(kid) {
                    under.extend(k.nodes.iter().cloned());
                }
            }
            resolved.insert(
                name.to_string(),
                ResolvedHyperNode {
                    tier: specs[name].tier,
                    tier_name: specs[name].tier_name.clone(),
                    parent: parent.get(name).map(|p| p.to_string()),
                    children: kids,
                    nodes: under,
                },
            );
        }

        // Each node's lowest HyperNode: the lowest tier that holds it (ties: the
        // first by name, reported).
        let mut home: HashMap<String, String> = HashMap::new();
        for name in &order {
            let h = &resolved[*name];
            for node in &h.nodes {
                match home.get(node) {
                    None => {
                        home.insert(node.clone(), name.to_string());
                    }
                    Some(first) if resolved[first].tier == h.tier => {
                        problems.push(format!(
                            "node {node} is in both {first} and {name} of tier {}; it is read as in {first}",
                            h.tier
                        ));
                    }
                    Some(_) => {}
                }
            }
        }

        let tiers: BTreeSet<u32> = resolved.values().map(|h| h.tier).collect();
        Self {
            hyper_nodes: resolved,
            tiers: tiers.into_iter().collect(),
            problems,
            home,
        }
    }

    /// Whether there is no HyperNode.
    pub fn is_empty(&self) -> bool {
        self.hyper_nodes.is_empty()
    }

    /// A HyperNode.
    pub fn get(&self, name: &str) -> Option<&ResolvedHyperNode> {
        self.hyper_nodes.get(name)
    }

    /// The tier of the cluster-wide root Volcano puts above every HyperNode
    /// without a parent (`<cluster-top-hypernode>`): one above the highest tier,
    /// and at least 1. Two HyperNodes without a common ancestor meet there.
    pub fn top_tier(&self) -> u32 {
        self.tiers.last().map_or(1, |t| t.saturating_add(1)).max(1)
    }

    /// The HyperNodes of a tier, by name.
    pub fn at_tier(&self, tier: u32) -> impl Iterator<Item = (&str, &ResolvedHyperNode)> {
        self.hyper_nodes
            .iter()
            .filter(move |(_, h)| h.tier == tier)
            .map(|(n, h)| (n.as_str(), h))
    }

    /// The tier a HyperNode's `tierName` names.
    pub fn tier_named(&self, tier_name: &str) -> Option<u32> {
        self.hyper_nodes
            .values()
            .find(|h| h.tier_name.as_deref() == Some(tier_name))
            .map(|h| h.tier)
    }

    /// The lowest HyperNode holding the node.
    pub fn home_of(&self, node: &str) -> Option<&str> {
        self.home.get(node).map(String::as_str)
    }

    /// The lowest HyperNode holding both (each may be a HyperNode's name).
    pub fn common_ancestor(&self, a: &str, b: &str) -> Option<&str> {
        let mut ancestors = BTreeSet::new();
        let mut at = self.hyper_nodes.get_key_value(a);
        while let Some((name, h)) = at {
            ancestors.insert(name.as_str());
            at = h
                .parent
                .as_deref()
                .and_then(|p| self.hyper_nodes.get_key_value(p));
        }
        let mut at = self.hyper_nodes.get_key_value(b);
        while let Some((name, h)) = at {
            if ancestors.contains(name.as_str()) {
                return Some(name.as_str());
            }
            at = h
                .parent
                .as_deref()
                .and_then(|p| self.hyper_nodes.get_key_value(p));
        }
        None
    }

    /// Where the nodes sit: under which one HyperNode, if any.
    pub fn span<'a>(&self, nodes: impl IntoIterator<Item = &'a str>) -> Span {
        let mut span: Option<String> = None;
        for node in nodes {
            let Some(home) = self.home_of(node) else {
                return Span::Scattered;
            };
            span = match span {
                None => Some(home.to_string()),
                Some(s) => match self.common_ancestor(&s, home) {
                    Some(c) => Some(c.to_string()),
                    None => return Span::Scattered,
                },
            };
        }
        span.map_or(Span::Nowhere, Span::Within)
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
