//! kube-scheduler's InterPodAffinity filter, for the planner: a pod's required
//! pod affinity and anti-affinity (`requiredDuringSchedulingIgnoredDuringExecution`)
//! against the pods already on nodes, and the required anti-affinity of those pods
//! against it (kube-scheduler checks both directions). A pod that asks for no vGPU
//! is pinned to the node the planner chose, so a node kube-scheduler would refuse
//! on these grounds would leave it Pending; and a gang whose members repel each
//! other must be planned onto as many topology domains.
//!
//! Semantics are kube-scheduler's: a term selects the pods its label selector
//! matches in its namespaces (the pod's own when none are named; an empty
//! namespace selector names them all) and is judged per topology domain, the
//! nodes sharing the value of its `topologyKey` label. A node without that label
//! satisfies no affinity term and no anti-affinity term refuses it. An affinity
//! term matching no pod anywhere is satisfiable only by a pod matching all its
//! own terms (the first of a group of pods affine to each other).
//!
//! Namespaces are known here by name only: a namespace selector is matched against
//! the `kubernetes.io/metadata.name` label every namespace carries, so a selector
//! on other namespace labels selects no namespace here.

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};
use kube::core::{Selector, SelectorExt};
use std::collections::{BTreeMap, HashSet};

/// The label every namespace carries, holding its name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// kube-scheduler's reasons, so users see the words they know.
pub const EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
/// See [`EXISTING_ANTI_AFFINITY`].
pub const AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// See [`EXISTING_ANTI_AFFINITY`].
pub const ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";

/// One required pod (anti-)affinity term, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct AffinityTerm {
    /// Which pods it selects; `None` (no selector, or one that cannot be read)
    /// selects none.
    pods: Option<Selector>,
    /// Namespaces named outright (the owner's own when the term names none).
    namespaces: Vec<String>,
    /// Namespaces selected by their labels.
    namespace_selector: Option<Selector>,
    /// The node label whose value makes a topology domain.
    topology_key: String,
}

impl AffinityTerm {
    /// The term as its owner in `namespace` declared it.
    pub fn of(term: &PodAffinityTerm, namespace: &str) -> Self {
        let named = term.namespaces.clone().unwrap_or_default();
        let namespaces = if named.is_empty() && term.namespace_selector.is_none() {
            vec![namespace.to_string()]
        } else {
            named
        };
        Self {
            pods: term
                .label_selector
                .clone()
                .and_then(|s| Selector::try_from(s).ok()),
            namespaces,
            namespace_selector: term
                .namespace_selector
                .clone()
                .and_then(|s| Selector::try_from(s).ok()),
            topology_key: term.topology_key.clone(),
        }
    }

    /// Whether the term selects a pod of `namespace` with `labels`.
    pub fn selects(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        let Some(pods) = &self.pods else {
            return false;
        };
        let in_namespace = self.namespaces.iter().any(|n| n == namespace)
            || self.namespace_selector.as_ref().is_some_and(|s| {
                s.matches(&BTreeMap::from([(
                    NAMESPACE_NAME_LABEL.to_string(),
                    namespace.to_string(),
                )]))
            });
        in_namespace && pods.matches(labels)
    }

    /// The topology domain of a node with `labels`, if it has one for this term.
    fn domain(&self, labels: &BTreeMap<String, String>) -> Option<(String, String)> {
        labels
            .get(&self.topology_key)
            .map(|v| (self.topology_key.clone(), v.clone()))
    }
}

/// What inter-pod affinity needs of a pod on a node: its namespace and labels
/// (for other pods' terms to select it) and its own required anti-affinity (for
/// it to repel newcomers). The pod watch keeps this much of every pod it counts
/// on a node, and nothing more.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AffinityPod {
    /// Its UID (the same pod may be seen through the watch and the plan).
    pub uid: Box<str>,
    /// Its namespace.
    pub namespace: Box<str>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its required anti-affinity terms.
    pub anti_affinity: Box<[AffinityTerm]>,
}

impl AffinityPod {
    /// What is kept of `pod`.
    pub fn of(pod: &Pod) -> Self {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        Self {
            uid: pod.metadata.uid.as_deref().unwrap_or_default().into(),
            namespace: namespace.into(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            anti_affinity: required_terms(pod, true)
                .iter()
                .map(|t| AffinityTerm::of(t, namespace))
                .collect(),
        }
    }
}

/// A pod's required affinity (`anti` false) or anti-affinity terms.
fn required_terms(pod: &Pod, anti: bool) -> &[PodAffinityTerm] {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let required = if anti {
        affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
    } else {
        affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
    };
    required.map(Vec::as_slice).unwrap_or_default()
}

/// The inter-pod affinity verdicts for one incoming pod, gathered once over every
/// pod on a node (kube-scheduler's PreFilter) and then asked per node.
#[derive(Debug, Clone)]
pub struct InterPodAffinity {
    incoming: AffinityPod,
    affinity: Vec<AffinityTerm>,
    /// Domains holding a pod that matches every affinity term.
    affine_domains: HashSet<(String, String)>,
    /// Domains holding a pod some anti-affinity term of the incoming pod selects.
    repelled_domains: HashSet<(String, String)>,
    /// Domains holding a pod whose own anti-affinity selects the incoming pod.
    repelling_domains: HashSet<(String, String)>,
}

impl InterPodAffinity {
    /// The check for `pod`, with no other pod seen yet.
    pub fn new(pod: &Pod) -> Self {
        let incoming = AffinityPod::of(pod);
        let affinity = required_terms(pod, false)
            .iter()
            .map(|t| AffinityTerm::of(t, &incoming.namespace))
            .collect();
        Self {
            incoming,
            affinity,
            affine_domains: HashSet::new(),
            repelled_domains: HashSet::new(),
            repelling_domains: HashSet::new(),
        }
    }

    /// Whether the incoming pod has terms of its own: then every pod matters,
    /// otherwise only pods with anti-affinity terms do.
    pub fn has_own_terms(&self) -> bool {
        !self.affinity.is_empty() || !self.incoming.anti_affinity.is_empty()
    }

    /// Counts `other`, on a node with `node_labels`.
    pub fn add(&mut self, other: &AffinityPod, node_labels: &BTreeMap<String, String>) {
        if other.uid == self.incoming.uid && !other.uid.is_empty() {
            return;
        }
        if !self.affinity.is_empty()
            && self
                .affinity
                .iter()
                .all(|t| t.selects(&other.namespace, &other.labels))
        {
            self.affine_domains
                .extend(self.affinity.iter().filter_map(|t| t.domain(node_labels)));
        }
        for term in self.incoming.anti_affinity.iter() {
            if term.selects(&other.namespace, &other.labels)
                && let Some(d) = term.domain(node_labels)
            {
                self.repelled_domains.insert(d);
            }
        }
        for term in other.anti_affinity.iter() {
            if term.selects(&self.incoming.namespace, &self.incoming.labels)
                && let Some(d) = term.domain(node_labels)
            {
                self.repelling_domains.insert(d);
            }
        }
    }

    /// Whether the incoming pod may run on a node with `labels`; kube-scheduler's
    /// reason otherwise.
    pub fn admits(&self, labels: &BTreeMap<String, String>) -> Result<(), &'static str> {
        if labels
            .iter()
            .any(|(k, v)| self.repelling_domains.contains(&(k.clone(), v.clone())))
        {
            return Err(EXISTING_ANTI_AFFINITY);
        }
        let mut domains = Vec::with_capacity(self.affinity.len());
        for term in &self.affinity {
            // Every topology label must be on the node.
            match term.domain(labels) {
                Some(d) => domains.push(d),
                None => return Err(AFFINITY),
            }
        }
        let all_present = domains.iter().all(|d| self.affine_domains.contains(d));
        let first_of_its_group = self.affine_domains.is_empty()
            && !self.affinity.is_empty()
            && self
                .affinity
                .iter()
                .all(|t| t.selects(&self.incoming.namespace, &self.incoming.labels));
        if !all_present && !first_of_its_group {
            return Err(AFFINITY);
        }
        if self
            .incoming
            .anti_affinity
            .iter()
            .filter_map(|t| t.domain(labels))
            .any(|d| self.repelled_domains.contains(&d))
        {
            return Err(ANTI_AFFINITY);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "pod_affinity_tests.rs"]
mod tests;
