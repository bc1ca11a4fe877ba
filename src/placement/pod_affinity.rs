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
//! A namespace selector is matched against the namespaces' labels as the
//! Namespace watch keeps them (`namespace_labels`); a namespace not seen yet is
//! known by the `kubernetes.io/metadata.name` label alone.

use super::namespace_labels::NamespaceLabels;
use crate::object_namespace::namespace_of;
use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};
use kube::core::{Selector, SelectorExt};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

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

    /// Whether the term selects a pod of `namespace` with `labels`, namespaces
    /// labelled as `namespaces` has them.
    pub fn selects(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        namespaces: &NamespaceLabels,
    ) -> bool {
        self.selects_where(namespace, labels, |s| {
            namespaces.selected(namespace, |l| s.matches(l))
        })
    }

    /// Whether the term selects a pod of `namespace` with `labels` under some
    /// labelling of the namespaces: a namespace selector is taken to select
    /// every namespace, since namespaces may be relabelled at any time.
    pub fn may_select(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.selects_where(namespace, labels, |_| true)
    }

    /// Whether the term selects a pod of `namespace` with `labels`, with
    /// `selector_holds` saying whether its namespace selector (if it has one)
    /// takes that namespace in.
    fn selects_where(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        selector_holds: impl FnOnce(&Selector) -> bool,
    ) -> bool {
        let Some(pods) = &self.pods else {
            return false;
        };
        let in_namespace = self.namespaces.iter().any(|n| n == namespace)
            || self.namespace_selector.as_ref().is_some_and(selector_holds);
        in_namespace && pods.matches(labels)
    }

    /// The node label whose value makes a topology domain.
    pub fn topology_key(&self) -> &str {
        &self.topology_key
    }

    /// The value of this term's topology label on a node with `labels`: its
    /// domain, if it has one.
    pub fn domain<'l>(&self, labels: &'l BTreeMap<String, String>) -> Option<&'l str> {
        labels.get(&self.topology_key).map(String::as_str)
    }
}

/// Topology domains: values of topology labels, by label.
#[derive(Debug, Clone, Default)]
struct Domains(HashMap<String, HashSet<String>>);

impl Domains {
    fn insert(&mut self, key: &str, value: &str) {
        self.0
            .entry(key.to_string())
            .or_default()
            .insert(value.to_string());
    }

    fn contains(&self, key: &str, value: &str) -> bool {
        self.0.get(key).is_some_and(|values| values.contains(value))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a node with `labels` lies in one of the domains.
    fn holds_node(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0
            .iter()
            .any(|(key, values)| labels.get(key).is_some_and(|v| values.contains(v)))
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
    /// Its preferred affinity (positive weight) and anti-affinity (negative
    /// weight) terms, which score nodes for pods they select.
    pub preferred: Box<[WeightedTerm]>,
}

/// A preferred pod (anti-)affinity term with its weight, negative for
/// anti-affinity.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedTerm {
    /// The term's weight (1..100), negated for anti-affinity.
    pub weight: i64,
    /// The term.
    pub term: AffinityTerm,
}

/// A pod's preferred affinity and anti-affinity terms, read once: anti-affinity
/// weights negated.
pub fn preferred_terms(pod: &Pod, namespace: &str) -> Box<[WeightedTerm]> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let attract = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
        .iter()
        .map(|w| (i64::from(w.weight), &w.pod_affinity_term));
    let repel = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
        .iter()
        .map(|w| (-i64::from(w.weight), &w.pod_affinity_term));
    attract
        .chain(repel)
        .map(|(weight, term)| WeightedTerm {
            weight,
            term: AffinityTerm::of(term, namespace),
        })
        .collect()
}

impl AffinityPod {
    /// What is kept of `pod`.
    pub fn of(pod: &Pod) -> Self {
        let namespace = namespace_of(&pod.metadata);
        Self {
            uid: pod.metadata.uid.as_deref().unwrap_or_default().into(),
            namespace: namespace.into(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            anti_affinity: required_terms(pod, true)
                .iter()
                .map(|t| AffinityTerm::of(t, namespace))
                .collect(),
            preferred: preferred_terms(pod, namespace),
        }
    }
}

/// A pod's required affinity (`anti` false) or anti-affinity terms.
pub fn required_terms(pod: &Pod, anti: bool) -> &[PodAffinityTerm] {
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
    affine_domains: Domains,
    /// Domains holding a pod some anti-affinity term of the incoming pod selects.
    repelled_domains: Domains,
    /// Domains holding a pod whose own anti-affinity selects the incoming pod.
    repelling_domains: Domains,
    /// The namespaces' labels, for namespace selectors.
    namespaces: Arc<NamespaceLabels>,
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
            affine_domains: Domains::default(),
            repelled_domains: Domains::default(),
            repelling_domains: Domains::default(),
            namespaces: Arc::default(),
        }
    }

    /// The same check, judging namespace selectors by these namespaces' labels.
    pub fn in_namespaces(mut self, namespaces: Arc<NamespaceLabels>) -> Self {
        self.namespaces = namespaces;
        self
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
                .all(|t| t.selects(&other.namespace, &other.labels, &self.namespaces))
        {
            for term in &self.affinity {
                if let Some(value) = term.domain(node_labels) {
                    self.affine_domains.insert(&term.topology_key, value);
                }
            }
        }
        for term in self.incoming.anti_affinity.iter() {
            if term.selects(&other.namespace, &other.labels, &self.namespaces)
                && let Some(value) = term.domain(node_labels)
            {
                self.repelled_domains.insert(&term.topology_key, value);
            }
        }
        for term in other.anti_affinity.iter() {
            if term.selects(
                &self.incoming.namespace,
                &self.incoming.labels,
                &self.namespaces,
            ) && let Some(value) = term.domain(node_labels)
            {
                self.repelling_domains.insert(&term.topology_key, value);
            }
        }
    }

    /// Whether the incoming pod may run on a node with `labels`; kube-scheduler's
    /// reason otherwise.
    pub fn admits(&self, labels: &BTreeMap<String, String>) -> Result<(), &'static str> {
        if self.repelling_domains.holds_node(labels) {
            return Err(EXISTING_ANTI_AFFINITY);
        }
        let mut all_present = true;
        for term in &self.affinity {
            // Every topology label must be on the node.
            match term.domain(labels) {
                Some(value) => {
                    all_present &= self.affine_domains.contains(&term.topology_key, value);
                }
                None => return Err(AFFINITY),
            }
        }
        let first_of_its_group = self.affine_domains.is_empty()
            && !self.affinity.is_empty()
            && self.affinity.iter().all(|t| {
                t.selects(
                    &self.incoming.namespace,
                    &self.incoming.labels,
                    &self.namespaces,
                )
            });
        if !all_present && !first_of_its_group {
            return Err(AFFINITY);
        }
        if self.incoming.anti_affinity.iter().any(|t| {
            t.domain(labels)
                .is_some_and(|value| self.repelled_domains.contains(&t.topology_key, value))
        }) {
            return Err(ANTI_AFFINITY);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "pod_affinity_tests.rs"]
mod tests;
