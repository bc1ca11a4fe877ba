//! Where the gang eviction actions look for room for a starving gang: its
//! candidate domains, as Volcano's HyperNode gradients for eviction give them.
//!
//! A gang without a hard network-topology constraint, or any gang when no
//! plugin groups HyperNodes into gradients (`network-topology-aware` with
//! `enabledHyperNodeGradient` on), has one domain: the whole cluster. A gang
//! with a hard constraint has the HyperNodes of the tiers it allows (the
//! cluster-wide root above them too, when its tier is allowed): with members
//! placed, those under the highest allowed HyperNode holding them; otherwise
//! those whose nodes' allocatable holds the gang's minResources. The widest
//! come first (highest tier first, by name within a tier), capped at the
//! plugin's `hypernode.gradient.evict.max-hypernodes`, then at the action's
//! `maxDomains`. A hard gang no HyperNode can hold has no domain: nothing is
//! evicted for it.

use crate::resources::Resources;
use crate::volcano::framework::{GangKey, JobInfo, Session};
use crate::volcano::topology::{NetworkTopology, Span, TopologyMode};
use std::collections::BTreeSet;

/// The name Volcano gives the cluster-wide root above every HyperNode.
pub(crate) const CLUSTER: &str = "<cluster-top-hypernode>";

/// One domain: a HyperNode's nodes, or the whole cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Domain {
    /// The HyperNode's name ([`CLUSTER`] for the whole cluster).
    pub name: String,
    /// Its nodes; `None`: every node.
    pub nodes: Option<BTreeSet<String>>,
}

impl Domain {
    fn cluster() -> Self {
        Self {
            name: CLUSTER.to_string(),
            nodes: None,
        }
    }

    /// Whether the node is in the domain.
    pub fn holds(&self, node: &str) -> bool {
        self.nodes.as_ref().is_none_or(|n| n.contains(node))
    }
}

/// The domains searched for `key`, in order (see the module's documentation).
pub(crate) fn candidate_domains(
    session: &Session,
    key: &GangKey,
    max_domains: usize,
) -> Vec<Domain> {
    let Some(job) = session.state.job(key) else {
        return Vec::new();
    };
    let Some(plugin_cap) = session.tiers().eviction_hyper_nodes() else {
        return vec![Domain::cluster()];
    };
    let Some(constraint) = job
        .network_topology
        .as_ref()
        .filter(|c| c.mode == TopologyMode::Hard)
    else {
        return vec![Domain::cluster()];
    };
    let topology = &session.state.topology;
    // A tier name no HyperNode carries: the gang is placed as an unconstrained one.
    let Some(limit) = constraint.highest_tier_in(topology) else {
        return vec![Domain::cluster()];
    };
    let Some(root) = search_root(session, job, topology, limit) else {
        return Vec::new();
    };
    let placed = job.placed_nodes().next().is_some();
    let mut by_tier: Vec<(u32, Vec<Domain>)> = Vec::new();
    for (tier, domain) in under(topology, root.as_deref()) {
        if tier > limit || (!placed && !holds_minimum(session, job, &domain)) {
            continue;
        }
        match by_tier.iter_mut().find(|(t, _)| *t == tier) {
            Some((_, d)) => d.push(domain),
            None => by_tier.push((tier, vec![domain])),
        }
    }
    by_tier.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
    let mut left = plugin_cap;
    let mut domains = Vec::new();
    for (_, mut gradient) in by_tier {
        if left == 0 {
            break;
        }
        gradient.sort_by(|a, b| a.name.cmp(&b.name));
        let from = gradient.len().saturating_sub(left);
        left -= gradient.len() - from;
        domains.extend(gradient.drain(from..));
    }
    domains.truncate(max_domains);
    domains
}

/// Where the search starts: the cluster-wide root for a gang with nothing
/// placed; else the highest HyperNode of an allowed tier above its placed
/// members (`None` when their HyperNode is above the allowed tier already).
/// `Some(None)` is the cluster-wide root.
fn search_root(
    session: &Session,
    job: &JobInfo,
    topology: &NetworkTopology,
    limit: u32,
) -> Option<Option<String>> {
    let placed = job
        .placed_nodes()
        .filter(|n| session.state.nodes.position(n).is_some());
    let top_allowed = topology.top_tier() <= limit;
    match topology.span(placed) {
        Span::Nowhere => Some(None),
        Span::Scattered => top_allowed.then_some(None),
        Span::Within(home) => {
            // Up from the members' HyperNode while the tier is allowed.
            let mut highest: Option<String> = None;
            let mut at = Some(home);
            let mut passed_top = false;
            while let Some(name) = at.take() {
                let Some(h) = topology.get(&name) else { break };
                if h.tier > limit {
                    break;
                }
                match &h.parent {
                    Some(p) => at = Some(p.clone()),
                    None => passed_top = true,
                }
                highest = Some(name);
            }
            match highest {
                None => None,
                // The root above the parentless HyperNodes is allowed too.
                Some(_) if passed_top && top_allowed => Some(None),
                Some(h) => Some(Some(h)),
            }
        }
    }
}

/// Every HyperNode under `root` (itself included; `None`: the cluster-wide
/// root) with its tier.
fn under(topology: &NetworkTopology, root: Option<&str>) -> Vec<(u32, Domain)> {
    let mut out = Vec::new();
    let mut queue: Vec<String> = match root {
        None => {
            out.push((topology.top_tier(), Domain::cluster()));
            topology
                .hyper_nodes
                .iter()
                .filter(|(_, h)| h.parent.is_none())
                .map(|(n, _)| n.clone())
                .collect()
        }
        Some(r) => vec![r.to_string()],
    };
    let mut seen: BTreeSet<String> = queue.iter().cloned().collect();
    while let Some(name) = queue.pop() {
        let Some(h) = topology.get(&name) else {
            continue;
        };
        for child in &h.children {
            if seen.insert(child.clone()) {
                queue.push(child.clone());
            }
        }
        out.push((
            h.tier,
            Domain {
                name,
                nodes: Some(h.nodes.clone()),
            },
        ));
    }
    out
}

/// Whether the domain's nodes' allocatable holds the gang's minResources
/// (Volcano's pre-filter of HyperNodes for eviction; a gang without
/// minResources passes).
fn holds_minimum(session: &Session, job: &JobInfo, domain: &Domain) -> bool {
    let Some(min) = &job.min_resources else {
        return true;
    };
    let mut allocatable = Resources::default();
    for node in session.state.nodes.iter().filter(|n| domain.holds(&n.name)) {
        allocatable.add(&node.resources.allocatable);
    }
    min.iter().all(|(dim, v)| v <= allocatable.get(dim))
}
