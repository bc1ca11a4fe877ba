//! What a session reads of all nodes together, kept as nodes change: the vGPUs
//! the usable nodes offer (part of the cluster's total), the largest card (what
//! a request without a node is charged against), whether any pod on any node
//! carries required anti-affinity or preferred terms, and whether any node has
//! a soft taint. Adding these up over a thousand nodes and their GPUs every
//! cycle cost more than the few nodes that changed; each node's share is taken
//! out and put back as it changes instead.

use crate::resources::{Resources, VgpuDims};
use crate::volcano::framework::nodes::{AcrossNodes, SessionNode, soft_tainted};
use std::collections::BTreeMap;

/// The sums over the kept nodes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NodeSums {
    /// vGPU count, memory (MiB) and cores of the usable nodes.
    vgpus: (i64, i64, i64),
    /// The largest card of each usable node with cards, counted by size.
    largest_cards: BTreeMap<u64, usize>,
    /// Nodes with a pod carrying required anti-affinity terms.
    anti_affine: usize,
    /// Nodes with a pod carrying preferred (anti-)affinity terms.
    preferring: usize,
    /// Nodes with a `PreferNoSchedule` taint.
    soft_tainted: usize,
}

/// One node's share of the sums.
struct Share {
    vgpus: (i64, i64, i64),
    largest_card: Option<u64>,
    anti_affine: bool,
    preferring: bool,
    soft_tainted: bool,
}

impl Share {
    fn of(node: &SessionNode) -> Self {
        let gpus = &node.gpus;
        let usable = gpus.unusable_reason.is_none();
        let mut vgpus = (0, 0, 0);
        if usable {
            for d in &gpus.devices {
                vgpus.0 += i64::from(d.count);
                vgpus.1 += d.devmem as i64;
                vgpus.2 += i64::from(d.devcore);
            }
        }
        let pods = &node.resources.pods;
        Self {
            vgpus,
            largest_card: usable
                .then(|| gpus.devices.iter().map(|d| d.devmem).max())
                .flatten(),
            anti_affine: pods.iter().any(|p| !p.anti_affinity.is_empty()),
            preferring: pods.iter().any(|p| !p.preferred.is_empty()),
            soft_tainted: soft_tainted(node),
        }
    }
}

impl NodeSums {
    /// The sums over `nodes`, added up whole.
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a SessionNode>) -> Self {
        let mut sums = Self::default();
        for node in nodes {
            sums.add(node);
        }
        sums
    }

    /// Counts a node in.
    pub fn add(&mut self, node: &SessionNode) {
        let share = Share::of(node);
        self.vgpus.0 += share.vgpus.0;
        self.vgpus.1 += share.vgpus.1;
        self.vgpus.2 += share.vgpus.2;
        if let Some(card) = share.largest_card {
            *self.largest_cards.entry(card).or_default() += 1;
        }
        self.anti_affine += usize::from(share.anti_affine);
        self.preferring += usize::from(share.preferring);
        self.soft_tainted += usize::from(share.soft_tainted);
    }

    /// Counts out a node counted in before.
    pub fn remove(&mut self, node: &SessionNode) {
        let share = Share::of(node);
        self.vgpus.0 -= share.vgpus.0;
        self.vgpus.1 -= share.vgpus.1;
        self.vgpus.2 -= share.vgpus.2;
        if let Some(card) = share.largest_card
            && let Some(count) = self.largest_cards.get_mut(&card)
        {
            *count -= 1;
            if *count == 0 {
                self.largest_cards.remove(&card);
            }
        }
        self.anti_affine = self
            .anti_affine
            .saturating_sub(usize::from(share.anti_affine));
        self.preferring = self
            .preferring
            .saturating_sub(usize::from(share.preferring));
        self.soft_tainted = self
            .soft_tainted
            .saturating_sub(usize::from(share.soft_tainted));
    }

    /// Everything the usable nodes offer as vGPUs (as `charge::vgpu_total`).
    pub fn vgpu_total(&self, dims: &VgpuDims) -> Resources {
        let mut vgpu = Resources::default();
        vgpu.set(&dims.count, self.vgpus.0 * 1000);
        vgpu.set(&dims.memory, self.vgpus.1 * 1000);
        vgpu.set(&dims.cores, self.vgpus.2 * 1000);
        vgpu
    }

    /// The largest card of any usable node, 0 without any (as
    /// `charge::largest_card_mib`).
    pub fn largest_card(&self) -> u64 {
        self.largest_cards.keys().next_back().copied().unwrap_or(0)
    }

    /// What the nodes have in common.
    pub fn across(&self) -> AcrossNodes {
        AcrossNodes {
            anti_affine_pods: self.anti_affine > 0,
            preferring_pods: self.preferring > 0,
            soft_taints: self.soft_tainted > 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_load::NodeResources;
    use crate::placement::node_traits::NodeTraits;
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;
    use std::sync::Arc;

    fn node(name: &str, effect: Option<&str>) -> SessionNode {
        let mut object = json!({"metadata": {"name": name}});
        if let Some(effect) = effect {
            object["spec"] = json!({"taints": [{"key": "k", "effect": effect}]});
        }
        let object: Node = serde_json::from_value(object).expect("node");
        let resources = NodeResources {
            traits: Some(NodeTraits::shared(&object, None)),
            ..Default::default()
        };
        SessionNode::new(name.into(), Arc::default(), resources)
    }

    #[test]
    fn soft_taints_are_counted_in_and_out_node_by_node() {
        let soft = node("a", Some("PreferNoSchedule"));
        let hard = node("b", Some("NoSchedule"));
        let plain = node("c", None);
        let mut sums = NodeSums::of([&hard, &plain]);
        assert!(!sums.across().soft_taints, "NoSchedule is not a soft taint");
        sums.add(&soft);
        assert!(sums.across().soft_taints);
        let also_soft = node("d", Some("PreferNoSchedule"));
        sums.add(&also_soft);
        sums.remove(&soft);
        assert!(sums.across().soft_taints, "one softly tainted node is left");
        sums.remove(&also_soft);
        assert!(!sums.across().soft_taints);
        assert_eq!(sums, NodeSums::of([&hard, &plain]));
    }
}
