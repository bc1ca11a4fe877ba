//! Kubernetes' own PodGroups and Workloads as the API serves them, so a
//! PodGroup can be read again when the Workload it was made from arrives,
//! changes or goes (the watches of the two kinds deliver them in any order).

use super::workload_template::{complete, template_ref};
use crate::object_namespace::namespace_in;
use serde_json::Value;
use std::collections::BTreeMap;

type Key = (String, String);

fn key_of(object: &Value) -> Key {
    let text = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    (
        namespace_in(object).to_owned(),
        text("/metadata/name").unwrap_or_default().to_owned(),
    )
}

/// The served objects, by (namespace, name).
#[derive(Debug, Default)]
pub struct NativeSources {
    podgroups: BTreeMap<Key, Value>,
    workloads: BTreeMap<Key, Value>,
}

impl NativeSources {
    /// Keeps a PodGroup and returns it completed from its Workload, if known.
    pub fn podgroup(&mut self, object: &Value) -> Value {
        let key = key_of(object);
        let completed = self.completed(&key.0, object);
        self.podgroups.insert(key, object.clone());
        completed
    }

    /// Forgets a deleted PodGroup.
    pub fn forget_podgroup(&mut self, namespace: &str, name: &str) {
        self.podgroups
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Keeps a Workload and returns the PodGroups made from it, completed anew.
    pub fn workload(&mut self, object: &Value) -> Vec<Value> {
        let (namespace, name) = key_of(object);
        self.workloads
            .insert((namespace.clone(), name.clone()), object.clone());
        self.made_from(&namespace, &name)
    }

    /// Forgets a deleted Workload and returns the PodGroups made from it, now
    /// read as they say themselves.
    pub fn forget_workload(&mut self, namespace: &str, name: &str) -> Vec<Value> {
        self.workloads
            .remove(&(namespace.to_owned(), name.to_owned()));
        self.made_from(namespace, name)
    }

    fn made_from(&self, namespace: &str, workload: &str) -> Vec<Value> {
        self.podgroups
            .iter()
            .filter(|((ns, _), pg)| {
                ns == namespace && template_ref(pg).is_some_and(|(w, _)| w == workload)
            })
            .map(|((ns, _), pg)| self.completed(ns, pg))
            .collect()
    }

    fn completed(&self, namespace: &str, podgroup: &Value) -> Value {
        match template_ref(podgroup)
            .and_then(|(w, _)| self.workloads.get(&(namespace.to_owned(), w.to_owned())))
        {
            Some(workload) => complete(podgroup, workload),
            None => podgroup.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_podgroup_is_completed_whichever_arrives_first_and_again_when_its_workload_goes() {
        let pg = json!({"metadata": {"name": "job-0", "namespace": "ml"}, "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "job", "podGroupTemplateName": "w"}},
            "schedulingPolicy": {"gang": {"minCount": 2}}}});
        let workload = json!({"metadata": {"name": "job", "namespace": "ml"},
            "spec": {"podGroupTemplates": [{"name": "w", "disruptionMode": "PodGroup"}]}});
        let elsewhere = json!({"metadata": {"name": "job", "namespace": "other"},
            "spec": {"podGroupTemplates": [{"name": "w", "disruptionMode": "Pod"}]}});
        let mut sources = NativeSources::default();
        assert_eq!(sources.podgroup(&pg), pg);
        assert!(sources.workload(&elsewhere).is_empty());
        let updated = sources.workload(&workload);
        assert_eq!(updated.len(), 1);
        assert_eq!(updated[0]["spec"]["disruptionMode"], "PodGroup");
        assert_eq!(sources.podgroup(&pg)["spec"]["disruptionMode"], "PodGroup");
        assert_eq!(sources.forget_workload("ml", "job"), vec![pg.clone()]);
        sources.forget_podgroup("ml", "job-0");
        assert!(sources.workload(&workload).is_empty());
    }
}
