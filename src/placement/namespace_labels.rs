//! The labels of every namespace, as the Namespace watch keeps them: a pod
//! (anti-)affinity term's `namespaceSelector` selects the namespaces whose labels
//! it matches, so judging one needs them. Only labels are kept.
//!
//! Every namespace carries `kubernetes.io/metadata.name` with its own name (the
//! API server sets it); a namespace not seen yet (the watch has not listed it, or
//! Namespaces cannot be read) is known by that label alone.

use k8s_openapi::api::core::v1::Namespace;
use std::collections::{BTreeMap, HashSet};

/// The label every namespace carries, holding its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Labels per namespace name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamespaceLabels(BTreeMap<String, BTreeMap<String, String>>);

impl NamespaceLabels {
    /// Records a namespace's labels (with its name label, which the API server
    /// always sets).
    pub fn set(&mut self, namespace: &Namespace) {
        let Some(name) = namespace.metadata.name.as_deref() else {
            return;
        };
        let mut labels = namespace.metadata.labels.clone().unwrap_or_default();
        labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.to_string());
        self.0.insert(name.to_string(), labels);
    }

    /// Forgets a namespace.
    pub fn remove(&mut self, name: &str) {
        self.0.remove(name);
    }

    /// Forgets every namespace not in `keep` (after a full list).
    pub fn retain(&mut self, keep: &HashSet<String>) {
        self.0.retain(|name, _| keep.contains(name));
    }

    /// Whether the namespace `name` has labels `selects` accepts.
    pub fn selected(
        &self,
        name: &str,
        selects: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> bool {
        match self.0.get(name) {
            Some(labels) => selects(labels),
            None => selects(&BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_string(),
                name.to_string(),
            )])),
        }
    }
}
