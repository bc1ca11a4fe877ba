//! The session's nodes kept from one cycle to the next. Copying every node's name,
//! CPU and memory into each cycle's picture, indexing them by name and dropping
//! them all after the session cost as much per cycle as the session itself
//! when one pod had arrived. Instead the picture keeps each node from the last
//! one while the ledger shows it unchanged (the very same GPU entry, labels and
//! pods, the same CPU and memory, the same members planned onto it) and builds
//! again only the nodes that changed; sessions share the nodes and their index.

use super::kept_holdings::KeptHoldings;
use crate::ledger::Ledger;
use crate::node_load::NodeResources;
use crate::resources::Resources;
use crate::volcano::framework::nodes::{SessionNode, position_index};
use rustc_hash::FxHashMap;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

/// The nodes of the last picture.
#[derive(Default)]
pub struct KeptNodes {
    /// Sorted by name.
    nodes: Vec<Arc<SessionNode>>,
    /// Their positions by name.
    index: Arc<FxHashMap<String, usize>>,
    /// Nodes whose GPU entry changed, came or went since last taken.
    entries_changed: HashSet<String>,
}

impl KeptNodes {
    /// Every node in the ledger when the set of nodes is not the one of the last
    /// picture; `None` when it is.
    pub fn names_if_changed(&self, ledger: &Ledger) -> Option<BTreeSet<String>> {
        let mut count = 0;
        let same = ledger.node_names().all(|name| {
            count += 1;
            self.index.contains_key(name)
        }) && count == self.nodes.len();
        (!same).then(|| ledger.node_names().cloned().collect())
    }

    /// The nodes as the ledger (locked for reading) has them, with what the
    /// members `holdings` hold as planned add to them, and their positions by
    /// name; nodes the ledger shows unchanged are the ones kept. `names`: what
    /// [`Self::names_if_changed`] said.
    pub fn refresh(
        &mut self,
        ledger: &Ledger,
        holdings: &KeptHoldings,
        names: Option<&BTreeSet<String>>,
    ) -> (Vec<Arc<SessionNode>>, Arc<FxHashMap<String, usize>>) {
        let node = |name: &String, kept: Option<&Arc<SessionNode>>| {
            let gpus = ledger.shared_node(name)?;
            let load = ledger.load().get(name);
            let planned = holdings.planned_on(name);
            if let Some(kept) = kept
                && Arc::ptr_eq(&kept.gpus, gpus)
                && same_resources(&kept.resources, load, planned)
            {
                return Some((kept.clone(), false));
            }
            let mut resources = load.cloned().unwrap_or_default();
            if let Some(planned) = planned {
                resources.requested.add(planned);
            }
            let entry_changed = kept.is_none_or(|k| !Arc::ptr_eq(&k.gpus, gpus));
            let fresh = SessionNode {
                name: name.clone(),
                gpus: gpus.clone(),
                resources,
            };
            Some((Arc::new(fresh), entry_changed))
        };
        match names {
            None => {
                let mut nodes = Vec::with_capacity(self.nodes.len());
                for kept in &self.nodes {
                    if let Some((n, entry_changed)) = node(&kept.name, Some(kept)) {
                        if entry_changed {
                            self.entries_changed.insert(n.name.clone());
                        }
                        nodes.push(n);
                    }
                }
                self.nodes = nodes;
            }
            Some(names) => {
                let mut nodes = Vec::with_capacity(names.len());
                for name in names {
                    let kept = self.index.get(name).map(|&i| &self.nodes[i]);
                    if let Some((n, entry_changed)) = node(name, kept) {
                        if entry_changed {
                            self.entries_changed.insert(n.name.clone());
                        }
                        nodes.push(n);
                    }
                }
                for gone in self.index.keys().filter(|n| !names.contains(*n)) {
                    self.entries_changed.insert(gone.clone());
                }
                self.index = Arc::new(position_index(&nodes));
                self.nodes = nodes;
            }
        }
        (self.nodes.clone(), self.index.clone())
    }

    /// The nodes whose GPU entry changed, came or went since the last call.
    pub fn take_entries_changed(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.entries_changed)
    }
}

/// Whether a kept node's CPU, memory, labels and pods are what the ledger's
/// `load` and the members planned onto it (`planned`) make them now. Labels and
/// pods are compared by address: the ledger replaces them when they change
/// while the kept node holds them.
fn same_resources(
    kept: &NodeResources,
    load: Option<&NodeResources>,
    planned: Option<&Resources>,
) -> bool {
    let Some(load) = load else {
        return *kept == NodeResources::default();
    };
    let same_traits = match (&kept.traits, &load.traits) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    };
    let same_requested = match planned {
        None => kept.requested == load.requested,
        Some(planned) => kept.requested == load.requested.plus(planned),
    };
    same_traits
        && Arc::ptr_eq(&kept.pods, &load.pods)
        && kept.allocatable == load.allocatable
        && same_requested
}
