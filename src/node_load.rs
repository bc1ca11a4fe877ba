//! Resources per node: what each node offers (allocatable) and what the pods
//! bound to it request, kept from Node and Pod events, and what it measurably uses
//! (`node_metrics`). Plugins that score or filter nodes by CPU and memory
//! (binpack, usage, and the queue totals) read it.

use crate::node_metrics::NodeMetricsBook;
use crate::placement::namespace_labels::NamespaceLabels;
use crate::placement::node_traits::NodeTraits;
use crate::placement::pod_affinity::AffinityPod;
mod allocatable_total;

use crate::ledger::ChangeJournal;
use crate::resources::{Resources, parse_milli};
use allocatable_total::AllocatableTotal;
use k8s_openapi::api::core::v1::{Node, Pod};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// One node's CPU and memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeResources {
    /// Allocatable CPU and memory (milli-units).
    pub allocatable: Resources,
    /// CPU and memory requested by the pods bound to the node (milli-units).
    pub requested: Resources,
    /// Labels, taints and cordon, the only copy of them (see `node_traits`);
    /// `None` until the Node is seen. Shared: sessions copy it per cycle.
    pub traits: Option<Arc<NodeTraits>>,
    /// The pods bound to the node, as inter-pod affinity sees them (namespace,
    /// labels, required anti-affinity). Shared: sessions copy it per cycle.
    pub pods: Arc<Vec<Arc<AffinityPod>>>,
}

/// Where a pod sits and what it takes there.
#[derive(Debug, Clone, PartialEq)]
pub struct Occupancy {
    /// Its node.
    pub node: String,
    /// Its requests and a pod slot.
    pub requests: Resources,
    /// What inter-pod affinity needs of it.
    pub pod: Arc<AffinityPod>,
}

/// CPU and memory of every node.
#[derive(Debug, Default)]
pub struct NodeLoad {
    nodes: FxHashMap<String, NodeResources>,
    /// Each counted pod's node and request, to take it back exactly.
    pods: FxHashMap<Box<str>, (String, Resources)>,
    /// Measured usage of every node; shared, so a planning session takes it
    /// without copying.
    measured: Arc<NodeMetricsBook>,
    /// Every namespace's labels, which inter-pod affinity's namespace selectors
    /// read of the pods counted here; shared like `measured`.
    namespaces: Arc<NamespaceLabels>,
    /// Every node's allocatable summed, kept as nodes change: planning reads it
    /// every cycle, and adding up a thousand nodes each time cost more than the
    /// few that changed.
    allocatable_total: AllocatableTotal,
    /// Nodes whose resources, traits or pods changed, for the planner's picture.
    journal: ChangeJournal,
}

/// A node's allocatable resources (unparsable quantities are left out).
pub fn allocatable_of(node: &Node) -> Resources {
    let mut r = Resources::default();
    if let Some(alloc) = node.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
        for (dim, q) in alloc {
            if let Ok(v) = parse_milli(dim, &q.0) {
                r.set(dim.as_str(), v);
            }
        }
    }
    r
}

/// The node a pod occupies and what it takes there (its requests and a pod
/// slot), if it occupies one: bound
/// (`spec.nodeName`) and not finished.
pub fn occupancy_of(pod: &Pod) -> Option<Occupancy> {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())?;
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    );
    // Each pod also takes one of the node's pod slots (`allocatable.pods`).
    (!finished).then(|| Occupancy {
        node: node.to_string(),
        requests: crate::placement::resource_fit::pod_footprint(pod),
        pod: Arc::new(AffinityPod::of(pod)),
    })
}

impl NodeLoad {
    /// Sets a node's allocatable CPU and memory.
    pub fn set_allocatable(&mut self, node: &str, allocatable: Resources) {
        let n = self.nodes.entry(node.to_string()).or_default();
        self.allocatable_total.replace(&n.allocatable, &allocatable);
        n.allocatable = allocatable;
        self.journal.note(node);
    }

    /// Sets a node's labels, taints and cordon from its Node object: the one
    /// update every reader of them sees (kept when unchanged, so sessions keep
    /// sharing them).
    pub fn set_traits_of(&mut self, node: &str, object: &Node) {
        let n = self.nodes.entry(node.to_string()).or_default();
        n.traits = Some(NodeTraits::shared(object, n.traits.as_ref()));
        self.journal.note(node);
    }

    /// Forgets a node's allocatable and traits (its pods stay counted until they
    /// go).
    pub fn remove_node(&mut self, node: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            self.allocatable_total
                .replace(&n.allocatable, &Resources::default());
            self.journal.note(node);
            n.allocatable = Resources::default();
            n.traits = None;
            if n.requested.is_empty() && n.pods.is_empty() {
                self.nodes.remove(node);
            }
        }
    }

    /// Records where a pod sits now (`None`: on no node, or finished).
    pub fn set_pod(&mut self, uid: &str, occupancy: Option<Occupancy>) {
        if let Some((node, requests)) = self.pods.remove(uid)
            && let Some(n) = self.nodes.get_mut(&node)
        {
            n.requested.saturating_sub(&requests);
            n.requested.prune_zeros();
            self.journal.note(&node);
            if n.pods.iter().any(|p| &*p.uid == uid) {
                Arc::make_mut(&mut n.pods).retain(|p| &*p.uid != uid);
            }
            if n.requested.is_empty() && n.allocatable.is_empty() && n.pods.is_empty() {
                self.nodes.remove(&node);
            }
        }
        if let Some(Occupancy {
            node,
            requests,
            pod,
        }) = occupancy
        {
            let n = self.nodes.entry(node.clone()).or_default();
            n.requested.add(&requests);
            n.requested.prune_zeros();
            self.journal.note(&node);
            Arc::make_mut(&mut n.pods).push(pod);
            self.pods.insert(uid.into(), (node, requests));
        }
    }

    /// Drops every pod not in `keep` (after a full list).
    pub fn retain_pods(&mut self, keep: &std::collections::HashSet<String>) {
        let gone: Vec<Box<str>> = self
            .pods
            .keys()
            .filter(|uid| !keep.contains(&***uid))
            .cloned()
            .collect();
        for uid in gone {
            self.set_pod(&uid, None);
        }
    }

    /// Every node's measured usage.
    pub fn measured(&self) -> &Arc<NodeMetricsBook> {
        &self.measured
    }

    /// Every node's measured usage, to change (copied first if a session still
    /// holds the current book).
    pub fn measured_mut(&mut self) -> &mut NodeMetricsBook {
        Arc::make_mut(&mut self.measured)
    }

    /// Replaces every node's measured usage (a new list).
    pub fn set_measured(&mut self, book: Arc<NodeMetricsBook>) {
        self.measured = book;
    }

    /// Every namespace's labels.
    pub fn namespaces(&self) -> &Arc<NamespaceLabels> {
        &self.namespaces
    }

    /// Every namespace's labels, to change (copied first if a session still
    /// holds them).
    pub fn namespaces_mut(&mut self) -> &mut NamespaceLabels {
        Arc::make_mut(&mut self.namespaces)
    }

    /// A node's CPU and memory.
    pub fn get(&self, node: &str) -> Option<&NodeResources> {
        self.nodes.get(node)
    }

    /// Every node's resources, traits and pods.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, &NodeResources)> {
        self.nodes.iter().map(|(name, n)| (name.as_str(), n))
    }

    /// Allocatable CPU and memory of every node, summed.
    pub fn total_allocatable(&self) -> &Resources {
        self.allocatable_total.get()
    }

    /// Which nodes' resources, traits or pods changed, in order.
    pub fn journal(&self) -> &ChangeJournal {
        &self.journal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, cpu: &str, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"nodeName": node, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    #[test]
    fn pods_are_counted_on_their_node_until_they_finish_or_move() {
        let mut load = NodeLoad::default();
        load.set_allocatable("a", Resources::from_units([("cpu", 8)]));
        load.set_pod("u", occupancy_of(&pod("a", "2", "Running")));
        assert_eq!(load.get("a").unwrap().requested.get("cpu"), 2000);
        load.set_pod("u", occupancy_of(&pod("a", "3", "Running")));
        assert_eq!(load.get("a").unwrap().requested.get("cpu"), 3000);
        load.set_pod("u", occupancy_of(&pod("a", "3", "Succeeded")));
        assert!(load.get("a").unwrap().requested.is_empty());
        load.set_pod("u", occupancy_of(&pod("b", "1", "Running")));
        load.retain_pods(&Default::default());
        assert!(load.get("b").is_none());
        assert_eq!(load.total_allocatable().get("cpu"), 8000);
    }
}
