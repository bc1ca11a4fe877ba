//! PodDisruptionBudgets as the planner reads them: which pods each covers and how
//! many more of them it lets go (`status.disruptionsAllowed`, kept by the
//! disruption controller).

use crate::object_namespace::namespace_of;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::core::{Selector, SelectorExt};
use std::collections::BTreeMap;

/// One PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionBudget {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Which pods it covers (`None`: a selector that cannot be read covers nothing
    /// we may touch: see [`DisruptionBudget::covers`]).
    pub selector: Option<Selector>,
    /// `status.disruptionsAllowed`.
    pub allowed: i32,
}

impl DisruptionBudget {
    /// The budget of a PDB object.
    pub fn of(pdb: &PodDisruptionBudget) -> Option<Self> {
        let namespace = namespace_of(&pdb.metadata).to_owned();
        let name = pdb.metadata.name.clone()?;
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .map(Selector::try_from);
        let selector = match selector {
            None => Some(Selector::default()),
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                tracing::warn!(pdb = %format!("{namespace}/{name}"), error = %e, "unreadable PodDisruptionBudget selector: its namespace's pods are treated as covered with no disruption allowed");
                None
            }
        };
        Some(Self {
            namespace,
            name,
            selector,
            allowed: pdb
                .status
                .as_ref()
                .map_or(0, |s| s.disruptions_allowed.max(0)),
        })
    }

    /// Whether the budget covers a pod of `namespace` with these labels. An empty
    /// selector covers nothing (as the API server's eviction handler reads it); an
    /// unreadable one is taken to cover every pod of its namespace, so that no
    /// eviction slips past a budget we could not read.
    pub fn covers(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        if namespace != self.namespace {
            return false;
        }
        match &self.selector {
            None => true,
            Some(s) if s.selects_all() => false,
            Some(s) => s.matches(labels),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn budgets_cover_matching_pods_of_their_namespace() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"job": "llm"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
        }))
        .unwrap();
        let b = DisruptionBudget::of(&pdb).unwrap();
        assert_eq!(b.allowed, 1);
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert!(b.covers("ml", &labels(&[("job", "llm"), ("tier", "a")])));
        assert!(!b.covers("ml", &labels(&[("job", "llm"), ("tier", "c")])));
        assert!(!b.covers("other", &labels(&[("job", "llm"), ("tier", "a")])));
    }
}
