//! kube-scheduler's node scores, for the planner (Volcano's `nodeorder`): each is
//! 0..=100, higher preferred. kube-scheduler normalises some of them across the
//! nodes it scores; one node at a time, these use the largest value a node could
//! reach instead, which orders nodes the same way.

use super::node_traits::NodeTraits;
use crate::resources::Resources;
use k8s_openapi::api::core::v1::Pod;

/// The highest score.
const MAX: f64 = 100.0;

/// Preferred node affinity: the weights of the pod's preferred terms the node
/// matches, as a share of all its preferred weights. 0 when it prefers nothing.
pub fn node_affinity(pod: &Pod, node_name: &str, traits: &NodeTraits) -> f64 {
    let preferred = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    let total: i64 = preferred.iter().map(|p| i64::from(p.weight.max(0))).sum();
    if total == 0 {
        return 0.0;
    }
    let matched: i64 = preferred
        .iter()
        .filter(|p| super::node_predicates::term_matches(&p.preference, node_name, &traits.labels))
        .map(|p| i64::from(p.weight.max(0)))
        .sum();
    MAX * matched as f64 / total as f64
}

/// Taint toleration: fewer `PreferNoSchedule` taints the pod does not tolerate is
/// better; 100 with none, halving with each.
pub fn taint_toleration(pod: &Pod, traits: &NodeTraits) -> f64 {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let untolerated = traits
        .taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule")
        .filter(|t| {
            !tolerations.iter().any(|tol| {
                super::node_predicates::tolerates(tol, &t.key, t.value.as_deref(), &t.effect)
            })
        })
        .count();
    MAX / f64::from(1u32 << untolerated.min(16))
}

/// CPU and memory left free once the pod is placed, as a share of allocatable
/// (kube-scheduler's LeastAllocated), averaged over the two.
pub fn least_requested(allocatable: &Resources, requested: &Resources, pod: &Resources) -> f64 {
    average(allocatable, |dim, alloc| {
        let used = requested.get(dim).saturating_add(pod.get(dim));
        (alloc - used).max(0) as f64 / alloc as f64
    })
}

/// CPU and memory used once the pod is placed, as a share of allocatable
/// (kube-scheduler's MostAllocated), averaged over the two.
pub fn most_requested(allocatable: &Resources, requested: &Resources, pod: &Resources) -> f64 {
    average(allocatable, |dim, alloc| {
        let used = requested.get(dim).saturating_add(pod.get(dim));
        used.min(alloc) as f64 / alloc as f64
    })
}

/// How evenly CPU and memory are used once the pod is placed (kube-scheduler's
/// BalancedAllocation): 100 when both are the same share of allocatable.
pub fn balanced(allocatable: &Resources, requested: &Resources, pod: &Resources) -> f64 {
    let share = |dim: &str| {
        let alloc = allocatable.get(dim);
        (alloc > 0).then(|| {
            let used = requested.get(dim).saturating_add(pod.get(dim));
            (used as f64 / alloc as f64).min(1.0)
        })
    };
    match (share("cpu"), share("memory")) {
        (Some(c), Some(m)) => MAX * (1.0 - (c - m).abs()),
        _ => 0.0,
    }
}

/// `f(dim, allocatable)` averaged over CPU and memory the node reports, × 100.
fn average(allocatable: &Resources, f: impl Fn(&str, i64) -> f64) -> f64 {
    let shares: Vec<f64> = ["cpu", "memory"]
        .into_iter()
        .filter_map(|dim| {
            let alloc = allocatable.get(dim);
            (alloc > 0).then(|| f(dim, alloc))
        })
        .collect();
    if shares.is_empty() {
        return 0.0;
    }
    MAX * shares.iter().sum::<f64>() / shares.len() as f64
}

#[cfg(test)]
#[path = "node_preferences_tests.rs"]
mod tests;
