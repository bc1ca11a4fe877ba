//! Feeding the gang book the cluster policy that decides evictions:
//! PriorityClasses (who outranks whom) and PodDisruptionBudgets (how many pods of
//! an application may be gone at once).

use crate::object_namespace::namespace_of;
use crate::scheduler::Scheduler;
use crate::volcano::disruption_budget::DisruptionBudget;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use std::collections::HashSet;

impl Scheduler {
    /// Applies a PriorityClass.
    pub fn apply_priority_class(&self, class: &PriorityClass) {
        self.gang.book.write().priority_classes.apply(class);
        self.gang.wake.notify_one();
    }

    /// Forgets a deleted PriorityClass.
    pub fn forget_priority_class(&self, name: &str) {
        self.gang.book.write().priority_classes.forget(name);
        self.gang.wake.notify_one();
    }

    /// Applies a PodDisruptionBudget (its status says how many more pods it lets
    /// go).
    pub fn apply_disruption_budget(&self, pdb: &PodDisruptionBudget) {
        let Some(budget) = DisruptionBudget::of(pdb) else {
            return;
        };
        let key = (budget.namespace.clone(), budget.name.clone());
        self.gang.book.write().budgets.insert(key, budget);
        self.gang.wake.notify_one();
    }

    /// Forgets a deleted PodDisruptionBudget.
    pub fn forget_disruption_budget(&self, namespace: &str, name: &str) {
        self.gang
            .book
            .write()
            .budgets
            .remove(&(namespace.to_string(), name.to_string()));
        self.gang.wake.notify_one();
    }

    /// Keeps only the PriorityClasses named in `existing` (after a relist).
    pub fn retain_priority_classes(&self, existing: &HashSet<String>) {
        self.gang
            .book
            .write()
            .priority_classes
            .retain(|name| existing.contains(name));
    }

    /// Keeps only the budgets in `existing` (after a relist).
    pub fn retain_disruption_budgets(&self, existing: &HashSet<(String, String)>) {
        self.gang
            .book
            .write()
            .budgets
            .retain(|key, _| existing.contains(key));
    }

    /// Whether a PodDisruptionBudget covers the pod (evicting it may be refused).
    pub(crate) fn budget_covers(&self, pod: &k8s_openapi::api::core::v1::Pod) -> bool {
        let namespace = namespace_of(&pod.metadata);
        let empty = Default::default();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        self.gang
            .book
            .read()
            .budgets
            .values()
            .any(|b| b.covers(namespace, labels))
    }
}
