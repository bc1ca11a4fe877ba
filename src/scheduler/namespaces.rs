//! The scheduler's side of Namespaces: their labels, taken in from the watch or
//! a cluster file, for the namespace selectors of pod (anti-)affinity terms.

use super::Scheduler;
use k8s_openapi::api::core::v1::Namespace;
use std::collections::HashSet;

impl Scheduler {
    /// Takes in a Namespace (added, or its labels changed).
    pub fn apply_namespace(&self, namespace: &Namespace) {
        self.ledger
            .write()
            .load_mut()
            .namespaces_mut()
            .set(namespace);
    }

    /// Forgets a deleted Namespace.
    pub fn forget_namespace(&self, name: &str) {
        self.ledger.write().load_mut().namespaces_mut().remove(name);
    }

    /// Forgets every Namespace not in `keep` (after a full list).
    pub fn retain_namespaces(&self, keep: &HashSet<String>) {
        self.ledger.write().load_mut().namespaces_mut().retain(keep);
    }
}
