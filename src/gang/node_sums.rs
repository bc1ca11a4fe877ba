//! What a session reads of all nodes together, kept as nodes change: the vGPUs
//! the usable nodes offer (part of the cluster's total), the largest card (what
//! a request without a node is charged against) and whether any pod on any node
//! carries required anti-affinity or preferred terms. Adding these up over a
//! thousand nodes and their GPUs every cycle cost more than the few nodes that
//! changed; each node's share is taken out and put back as it changes instead.

use crate::resources::{Resources, VgpuDims};
use crate::volcano::framework::nodes::SessionNode;
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
}

/// One node's share of the sums.
struct Share {
    vgpus: (i64, i64, i64),
    largest_card: Option<u64>,
    anti_affine: bool,
    preferring: bool,
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

    /// Whether a pod on some node carries required anti-affinity terms.
    pub fn anti_affine_pods(&self) -> bool {
        self.anti_affine > 0
    }

    /// Whether a pod on some node carries preferred (anti-)affinity terms.
    pub fn preferring_pods(&self) -> bool {
        self.preferring > 0
    }
}
