//! PriorityClasses: the value each class gives a PodGroup or a pod.

use k8s_openapi::api::scheduling::v1::PriorityClass;
use std::collections::BTreeMap;

/// PriorityClasses by name: value, and whether it is the cluster's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriorityClasses {
    classes: BTreeMap<String, (i32, bool)>,
}

/// The classes every cluster has, even before they are listed.
const BUILT_IN: [(&str, i32); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

impl PriorityClasses {
    /// Records a PriorityClass.
    pub fn apply(&mut self, class: &PriorityClass) {
        if let Some(name) = class.metadata.name.as_deref() {
            self.classes.insert(
                name.to_string(),
                (class.value, class.global_default.unwrap_or(false)),
            );
        }
    }

    /// Forgets a PriorityClass.
    pub fn forget(&mut self, name: &str) {
        self.classes.remove(name);
    }

    /// Keeps only the classes `keep` accepts by name.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.classes.retain(|name, _| keep(name));
    }

    /// The value of a class; `None` for a class nobody defined.
    pub fn value(&self, name: &str) -> Option<i32> {
        self.classes
            .get(name)
            .map(|(v, _)| *v)
            .or_else(|| BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
    }

    /// A priority as Kubernetes resolves it: the class's value, else the cluster's
    /// default class, else 0. A pod's own `spec.priority` (set at admission) comes
    /// first.
    pub fn resolve(&self, class: Option<&str>, spec_priority: Option<i32>) -> i32 {
        if let Some(p) = spec_priority {
            return p;
        }
        if let Some(v) = class.and_then(|c| self.value(c)) {
            return v;
        }
        self.classes
            .values()
            .find(|(_, default)| *default)
            .map_or(0, |(v, _)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn priorities_resolve_like_kubernetes() {
        let mut classes = PriorityClasses::default();
        for (name, value, default) in [("pc-high", 80000, false), ("pc-low", 20000, true)] {
            classes.apply(
                &serde_json::from_value(json!({
                    "metadata": {"name": name}, "value": value, "globalDefault": default
                }))
                .unwrap(),
            );
        }
        assert_eq!(classes.resolve(Some("pc-high"), None), 80000);
        assert_eq!(
            classes.resolve(Some("pc-high"), Some(5)),
            5,
            "admission's value first"
        );
        assert_eq!(classes.resolve(None, None), 20000, "the default class");
        assert_eq!(
            classes.resolve(Some("system-node-critical"), None),
            2_000_001_000
        );
        classes.forget("pc-low");
        assert_eq!(classes.resolve(Some("missing"), None), 0);
    }
}
