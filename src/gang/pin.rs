//! Pinning a gated pod to its planned node. kube-scheduler asks this extender
//! only about pods that request its resources, so a gang member asking only for
//! CPU and memory would otherwise be placed wherever kube-scheduler likes, and the
//! gang's plan (all-or-nothing, the room counted for it) would not hold.
//!
//! While a pod still has scheduling gates, Kubernetes lets its required node
//! affinity be narrowed: with no terms any may be set, and each existing term may
//! only gain requirements (they are ANDed). The pin is the requirement
//! `metadata.name In [node]` added to every term (or one term of its own), so the
//! pod's own constraints stay in force and only the planned node satisfies them.
//! It is set in the update that lifts the gate: that update is judged against the
//! pod as it was, gated.

use super::book::{Member, MemberPhase};
use crate::placement::node_predicates::required_node_selector;
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
};

/// The field node affinity selects a node's name by.
const NODE_NAME_FIELD: &str = "metadata.name";

fn pin_requirement(node: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: NODE_NAME_FIELD.to_string(),
        operator: "In".to_string(),
        values: Some(vec![node.to_string()]),
    }
}

/// The pod's required node selector narrowed to `node`.
pub fn pinned_selector(spec: &PodSpec, node: &str) -> NodeSelector {
    let existing = required_node_selector(spec)
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let pin = pin_requirement(node);
    let terms = if existing.is_empty() {
        vec![NodeSelectorTerm {
            match_fields: Some(vec![pin]),
            ..NodeSelectorTerm::default()
        }]
    } else {
        existing
            .into_iter()
            .map(|mut term| {
                let fields = term.match_fields.get_or_insert_with(Vec::new);
                if !fields.contains(&pin) {
                    fields.push(pin.clone());
                }
                term
            })
            .collect()
    };
    NodeSelector {
        node_selector_terms: terms,
    }
}

/// Whether the pod is pinned to `node`: every term of its required node
/// affinity names it. A member released without our gate (planned at its first
/// `/filter`) carries a planned node but no pin, and kube-scheduler may place it
/// anywhere.
pub fn is_pinned_to(spec: &PodSpec, node: &str) -> bool {
    let pin = pin_requirement(node);
    required_node_selector(spec).is_some_and(|r| {
        !r.node_selector_terms.is_empty()
            && r.node_selector_terms
                .iter()
                .all(|t| t.match_fields.as_ref().is_some_and(|f| f.contains(&pin)))
    })
}

/// The node a member is pinned to while it waits to be bound there: released
/// (not gated), Pending, not terminating, its spec pinned to its planned node.
pub fn waiting_pin(m: &Member) -> Option<&str> {
    let node = m.planned_node.as_deref()?;
    let waiting = m.phase == MemberPhase::Pending && !m.gated && !m.terminating;
    (waiting && m.pod.spec.as_ref().is_some_and(|s| is_pinned_to(s, node))).then_some(node)
}

/// Pins the pod to `node` (see the module documentation).
pub fn pin_to_node(spec: &mut PodSpec, node: &str) {
    let selector = pinned_selector(spec, node);
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(NodeAffinity::default)
        .required_during_scheduling_ignored_during_execution = Some(selector);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::node_predicates::admits;
    use crate::placement::node_traits::NodeTraits;
    use crate::resources::Resources;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
            .expect("pod")
    }

    fn allowed(pod: &Pod, node: &str, zone: &str) -> bool {
        let traits = NodeTraits {
            labels: [("zone".to_string(), zone.to_string())].into(),
            ..NodeTraits::default()
        };
        let none = Resources::default();
        admits(pod, node, &traits, &none, &none, &none).is_ok()
    }

    #[test]
    fn a_pod_without_node_affinity_gets_one_term_naming_the_node() {
        let mut p = pod(serde_json::json!({"containers": []}));
        assert!(allowed(&p, "n2", "a"));
        assert!(!is_pinned_to(p.spec.as_ref().expect("spec"), "n1"));
        pin_to_node(p.spec.as_mut().expect("spec"), "n1");
        assert!(is_pinned_to(p.spec.as_ref().expect("spec"), "n1"));
        assert!(!is_pinned_to(p.spec.as_ref().expect("spec"), "n2"));
        assert!(allowed(&p, "n1", "a"));
        assert!(!allowed(&p, "n2", "a"));
    }

    #[test]
    fn every_existing_term_keeps_its_requirements_and_gains_the_pin() {
        let mut p = pod(
            serde_json::json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
            ]}}}}),
        );
        let before = p.clone();
        let spec = p.spec.as_mut().expect("spec");
        pin_to_node(spec, "n1");
        // Pinning twice adds nothing more.
        pin_to_node(spec, "n1");
        let terms = &pinned_selector(spec, "n1").node_selector_terms;
        let old = &pinned_selector(before.spec.as_ref().expect("spec"), "n1").node_selector_terms;
        assert_eq!(terms, old);
        for term in terms {
            assert_eq!(term.match_expressions.as_ref().map(Vec::len), Some(1));
            assert_eq!(term.match_fields.as_ref().map(Vec::len), Some(1));
        }
        assert!(allowed(&p, "n1", "b"));
        assert!(!allowed(&p, "n1", "c"), "the pod's own terms still hold");
        assert!(!allowed(&p, "n2", "a"));
    }
}
