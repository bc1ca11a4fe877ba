//! Allocate for a job with `spec.networkTopology`: its tasks are placed inside one
//! HyperNode, the lowest tier first. For each tier up to the highest allowed, the
//! job is tried in every HyperNode of that tier (each try a statement, discarded);
//! at the first tier where some HyperNode can hold the job, the best of them (the
//! plugins' HyperNode order, then how the node order liked the nodes it would use,
//! then the name) gets it. A job with members already placed stays where the
//! lowest HyperNode holding them all and the new one is within the allowed tier.
//!
//! In hard mode a job no allowed HyperNode can hold waits, and says which
//! HyperNodes were tried and how far each got. In soft mode it is placed anywhere
//! instead, as an unconstrained job is.
//!
//! As in Volcano, the HyperNodes without a parent sit under one cluster-wide root
//! one tier above the highest (see [`NetworkTopology::top_tier`]): a hard job
//! allowed that tier may span them, or be placed anywhere when none holds it;
//! with no HyperNode at all that root is tier 1, so a hard job is placed
//! anywhere (only a `highestTierAllowed` below 1 leaves it waiting). A
//! `highestTierName` no HyperNode carries names no tier, and Volcano then places
//! a hard job as one without the constraint; so does this (a soft job still
//! prefers the lowest HyperNode that holds it).

use super::allocate::Attempt;
use crate::volcano::framework::{GangKey, Session};
use crate::volcano::topology::{NetworkTopology, Span, TopologyConstraint, TopologyMode};
use std::sync::Arc;

/// HyperNodes named in a waiting job's message; the rest are counted.
const NAMED_IN_MESSAGE: usize = 4;

/// Places the job inside one HyperNode. `Some(more waiting)` when this decided the
/// job (placed it, or made it wait in hard mode); `None` when the job should be
/// placed as an unconstrained one (soft mode, nothing fits inside a HyperNode).
pub(super) fn allocate_job(
    session: &mut Session,
    key: &GangKey,
    constraint: &TopologyConstraint,
) -> Option<bool> {
    let topology = Arc::clone(&session.state.topology);
    let hard = constraint.mode == TopologyMode::Hard;
    let limit = if hard {
        constraint.highest_tier_in(&topology)?
    } else {
        u32::MAX
    };
    let reaches_root = reaches_root(&topology, limit);
    let span = job_span(session, key, &topology);
    if hard {
        match &span {
            Span::Scattered if !reaches_root => {
                return wait(
                    session,
                    key,
                    constraint,
                    "its placed members are not under one HyperNode".into(),
                );
            }
            Span::Within(s) if topology.get(s).is_none_or(|h| h.tier > limit) => {
                return wait(
                    session,
                    key,
                    constraint,
                    format!("its placed members already span HyperNode {s}"),
                );
            }
            _ => {}
        }
    }
    let mut tried: Vec<(String, usize)> = Vec::new();
    for &tier in topology.tiers.iter().filter(|t| **t <= limit) {
        let mut fitting: Vec<(String, f64)> = Vec::new();
        for (name, hyper_node) in topology.at_tier(tier) {
            if let Span::Within(s) = &span {
                let within_limit = match topology.common_ancestor(name, s) {
                    Some(c) => topology.get(c).is_some_and(|c| c.tier <= limit),
                    None => reaches_root,
                };
                if !within_limit {
                    continue;
                }
            }
            let positions = positions_of(session, hyper_node.nodes.iter());
            let attempt = Attempt::run(session, key, Some(&positions));
            // A job that was ready before placing anything here gains nothing.
            if session.job_ready(key) && !attempt.statement.is_empty() {
                fitting.push((name.to_string(), attempt.rank));
            } else {
                tried.push((name.to_string(), Attempt::ready(session, key)));
            }
            attempt.statement.discard(session);
        }
        if fitting.is_empty() {
            continue;
        }
        let best = best_hyper_node(session, key, fitting);
        let positions = topology
            .get(&best)
            .map(|h| positions_of(session, h.nodes.iter()))
            .unwrap_or_default();
        let attempt = Attempt::run(session, key, Some(&positions));
        if session.job_ready(key) {
            return Some(attempt.commit(session, key));
        }
        // The same tries on the same state give the same answer; this is only
        // reached if a plugin's answers depend on something else.
        attempt.statement.discard(session);
        break;
    }
    if !hard || reaches_root {
        return None;
    }
    if session.job_ready(key) {
        // It holds its minimum; its other members wait for room in reach.
        return Some(false);
    }
    let min_member = session.state.job(key).map_or(0, |j| j.min_member);
    let why = if topology.is_empty() {
        "no HyperNode exists".to_string()
    } else if tried.is_empty() {
        format!("no HyperNode of tier {limit} or lower can hold it")
    } else {
        tried.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut parts: Vec<String> = tried
            .iter()
            .take(NAMED_IN_MESSAGE)
            .map(|(h, ready)| format!("{h}: {ready} of minMember {min_member}"))
            .collect();
        if tried.len() > NAMED_IN_MESSAGE {
            parts.push(format!(
                "{} more HyperNodes hold fewer",
                tried.len() - NAMED_IN_MESSAGE
            ));
        }
        format!(
            "no HyperNode of tier {limit} or lower can hold minMember {min_member} ({})",
            parts.join("; ")
        )
    };
    wait(session, key, constraint, why)
}

/// Notes why a hard-constrained job waits; it is decided (nothing placed).
fn wait(
    session: &mut Session,
    key: &GangKey,
    constraint: &TopologyConstraint,
    why: String,
) -> Option<bool> {
    session.note_job(
        key,
        None,
        "NotEnoughResources",
        format!("gang unschedulable with {}: {why}", constraint.describe()),
    );
    Some(false)
}

/// Whether the job's placed and pipelined members stay within its hard
/// constraint (preempt and reclaim choose nodes by victims, not by topology: their
/// evictions are kept only when this holds).
pub(super) fn keeps_constraint(session: &Session, key: &GangKey) -> bool {
    let Some(constraint) = session
        .state
        .job(key)
        .and_then(|j| j.network_topology.as_ref())
    else {
        return true;
    };
    if constraint.mode == TopologyMode::Soft {
        return true;
    }
    let topology = &session.state.topology;
    let Some(limit) = constraint.highest_tier_in(topology) else {
        return true;
    };
    match job_span(session, key, topology) {
        Span::Nowhere => true,
        Span::Scattered => reaches_root(topology, limit),
        Span::Within(s) => topology.get(&s).is_some_and(|h| h.tier <= limit),
    }
}

/// Whether a job allowed up to tier `limit` may span the cluster-wide root above
/// every HyperNode. With no HyperNode at all that root is tier 1 and holds every
/// node, so a hard job is placed anywhere, as Volcano places it.
fn reaches_root(topology: &NetworkTopology, limit: u32) -> bool {
    topology.top_tier() <= limit
}

/// Where the job's placed members are. Members on nodes the session does not
/// have (a node deleted since) are left out: Volcano, recovering a job's
/// HyperNode from its members' nodes, finds none for them either.
fn job_span(session: &Session, key: &GangKey, topology: &NetworkTopology) -> Span {
    let Some(job) = session.state.job(key) else {
        return Span::Nowhere;
    };
    topology.span(
        job.placed_nodes()
            .filter(|node| session.state.nodes.position(node).is_some()),
    )
}

/// The positions of these nodes in the session's node set, ascending (nodes the
/// session does not have are skipped).
fn positions_of<'a>(session: &Session, nodes: impl Iterator<Item = &'a String>) -> Vec<usize> {
    let mut positions: Vec<usize> = nodes
        .filter_map(|n| session.state.nodes.position(n))
        .collect();
    positions.sort_unstable();
    positions
}

/// The HyperNode the job goes to among those that can hold it: the plugins'
/// HyperNode scores plus the node ranks of the try, ties to the smaller name.
fn best_hyper_node(session: &Session, key: &GangKey, fitting: Vec<(String, f64)>) -> String {
    let names: Vec<&str> = fitting.iter().map(|(n, _)| n.as_str()).collect();
    let plugin_scores = match session.state.job(key) {
        Some(job) => session
            .tiers()
            .hyper_node_order(&session.state, job, &names),
        None => vec![0.0; names.len()],
    };
    fitting
        .iter()
        .zip(plugin_scores)
        .map(|((name, rank), plugins)| (name, rank + plugins))
        .min_by(|(na, a), (nb, b)| b.total_cmp(a).then_with(|| na.cmp(nb)))
        .map(|(name, _)| name.clone())
        .unwrap_or_default()
}
