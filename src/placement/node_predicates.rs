//! kube-scheduler's own node filters, for the planner: a gang member is placed
//! before kube-scheduler sees it, so the planner must rule out the nodes
//! kube-scheduler would refuse, or the member's planned node is rejected later and
//! the gang loses its co-placement. These are the filters a node's own facts
//! decide: unschedulable, node selector and required node affinity, taints and
//! tolerations, and CPU/memory fit. Required inter-pod (anti-)affinity depends on
//! the other pods' labels and is checked by `pod_affinity`; topology spread is
//! left to kube-scheduler.
//!
//! Reasons use kube-scheduler's words, so users see the messages they know.

use super::node_traits::NodeTraits;
use crate::resources::Resources;
use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec, Toleration,
};
use std::collections::BTreeMap;

/// The taint kube-scheduler treats a cordoned node as carrying.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Resources kube-scheduler's fit checks that this planner can count: every pod
/// on every node is watched for them. Extended resources (the vGPU count among
/// them) are the GPU fit's business.
const FITTED: [&str; 2] = ["cpu", "memory"];

/// Whether kube-scheduler would let `pod` onto a node with `traits`, given the
/// node's allocatable and what the pods on it request.
pub fn admits(
    pod: &Pod,
    node_name: &str,
    traits: &NodeTraits,
    allocatable: &Resources,
    requested: &Resources,
    pod_requests: &Resources,
) -> Result<(), String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    if traits.unschedulable
        && !tolerations
            .iter()
            .any(|t| tolerates(t, UNSCHEDULABLE_TAINT, None, "NoSchedule"))
    {
        return Err("node(s) were unschedulable".into());
    }
    if !matches_node_selector(spec, node_name, &traits.labels) {
        return Err("node(s) didn't match Pod's node affinity/selector".into());
    }
    if let Some(taint) = traits
        .taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| {
            !tolerations
                .iter()
                .any(|tol| tolerates(tol, &t.key, t.value.as_deref(), &t.effect))
        })
    {
        return Err(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.key,
            taint.value.as_deref().unwrap_or("")
        ));
    }
    let short: Vec<&str> = FITTED
        .into_iter()
        .filter(|dim| {
            let want = pod_requests.get(dim);
            // A node that does not report the dimension is not judged on it.
            want > 0
                && allocatable.get(dim) > 0
                && requested.get(dim).saturating_add(want) > allocatable.get(dim)
        })
        .collect();
    if !short.is_empty() {
        return Err(short
            .iter()
            .map(|d| format!("Insufficient {d}"))
            .collect::<Vec<_>>()
            .join(", "));
    }
    Ok(())
}

/// `spec.nodeSelector` and the required node affinity, both of which must hold.
fn matches_node_selector(
    spec: &PodSpec,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let selector_holds = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let required = required_node_selector(spec);
    // Terms are ORed; an empty list of terms matches no node.
    let affinity_holds = required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|term| term_matches(term, node_name, labels))
    });
    selector_holds && affinity_holds
}

/// The pod's required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`).
pub fn required_node_selector(spec: &PodSpec) -> Option<&NodeSelector> {
    spec.affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
}

/// A term's requirements are ANDed; a term with none matches no node.
pub(super) fn term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            // The only field kube-scheduler selects nodes by.
            r.key == "metadata.name" && requirement_matches(r, Some(node_name))
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.trim().parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => match (
            value.and_then(number),
            values.first().and_then(|s| number(s)),
        ) {
            (Some(v), Some(bound)) if values.len() == 1 => {
                if r.operator == "Gt" {
                    v > bound
                } else {
                    v < bound
                }
            }
            _ => false,
        },
        // An operator the API server would have refused.
        _ => false,
    }
}

/// Whether `toleration` tolerates the taint `key=value:effect`.
pub(super) fn tolerates(
    toleration: &Toleration,
    key: &str,
    value: Option<&str>,
    effect: &str,
) -> bool {
    let effect_ok = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == effect);
    let exists = toleration.operator.as_deref() == Some("Exists");
    let key_ok = match toleration.key.as_deref() {
        None | Some("") => exists,
        Some(k) => k == key,
    };
    let value_ok = exists || toleration.value.as_deref().unwrap_or("") == value.unwrap_or("");
    effect_ok && key_ok && value_ok
}

#[cfg(test)]
#[path = "node_predicates_tests.rs"]
mod tests;
