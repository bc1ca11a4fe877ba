//! The session's nodes kept from one cycle to the next. Copying every node's name,
//! CPU and memory into each cycle's picture, indexing them by name and dropping
//! them all after the session cost as much per cycle as the session itself
//! when one pod had arrived. Instead the picture keeps each node from the last
//! one while the ledger shows it unchanged (the very same GPU entry, labels and
//! pods, the same CPU and memory, the same members planned onto it) and builds
//! again only the nodes that changed; sessions share the nodes and their index.
//! Which nodes may have changed is read from the ledger's journals (GPU entries,
//! and CPU, memory, traits and pods) and from the members whose plans moved, so
//! a cycle looks at those nodes only, not at every node; every node is looked at
//! again only when a journal no longer reaches back to the last picture.

use super::kept_holdings::KeptHoldings;
use super::node_sums::NodeSums;
use super::registered_gpus::same_registered_gpus;
use crate::ledger::{ChangeJournal, JournalCursor, Ledger};
use crate::node_load::NodeResources;
use crate::resources::Resources;
use crate::volcano::framework::nodes::{SessionNode, SharedNodes, position_index};
use crate::volcano::framework::score_order::ScoreOrder;
use foldhash::HashSet;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The nodes of the last picture.
#[derive(Default)]
pub struct KeptNodes {
    /// Sorted by name; the list itself is shared with the last session (which
    /// has closed by the time the next picture changes it).
    nodes: SharedNodes,
    /// Their positions by name.
    index: Arc<FxHashMap<String, usize>>,
    /// Those that can take a GPU, in score order (shared like the list).
    order: Arc<ScoreOrder>,
    /// What sessions read of all of them together.
    sums: NodeSums,
    /// Nodes whose registered GPUs changed, came or went since last taken
    /// (not their usage: what members held there are charged reads only
    /// these, see [`super::registered_gpus`]).
    registrations_changed: HashSet<String>,
    /// Where the ledger's journals of GPU entries and of CPU, memory, traits and
    /// pods were read up to when the last picture was taken.
    read_up_to: Option<(JournalCursor, JournalCursor)>,
    /// The nodes replaced, added or removed here, in order: what a reader of
    /// the pictures (the queueing hints) compares again.
    journal: ChangeJournal,
}

/// What the ledger's journals say changed since the last picture.
enum Since {
    /// These nodes (some may repeat).
    Nodes(Vec<String>),
    /// Not known: every node is looked at.
    Unknown,
}

impl KeptNodes {
    /// The nodes the ledger's journals name since the last picture.
    fn since(&self, ledger: &Ledger) -> Since {
        let Some((entries, load)) = self.read_up_to else {
            return Since::Unknown;
        };
        match (
            ledger.nodes_journal().since(entries),
            ledger.load().journal().since(load),
        ) {
            (Some(entries), Some(load)) => {
                Since::Nodes(entries.chain(load).map(|name| name.to_string()).collect())
            }
            _ => Since::Unknown,
        }
    }

    /// Every node in the ledger when the set of nodes is not the one of the last
    /// picture; `None` when it is.
    pub fn names_if_changed(&self, ledger: &Ledger) -> Option<BTreeSet<String>> {
        let same = match self.since(ledger) {
            // A node comes or goes only through its entry, which the journal
            // names.
            Since::Nodes(names) => names
                .iter()
                .all(|name| ledger.shared_node(name).is_some() == self.index.contains_key(name)),
            Since::Unknown => {
                let mut count = 0;
                ledger.node_names().all(|name| {
                    count += 1;
                    self.index.contains_key(name)
                }) && count == self.nodes.len()
            }
        };
        (!same).then(|| ledger.node_names().cloned().collect())
    }

    /// The nodes as the ledger (locked for reading) has them, with what the
    /// members `holdings` hold as planned add to them, and their positions by
    /// name; nodes the ledger shows unchanged are the ones kept. `names`: what
    /// [`Self::names_if_changed`] said; `planned_moved`: the nodes whose planned
    /// members changed since the last picture, `None` when not known.
    pub fn refresh(
        &mut self,
        ledger: &Ledger,
        holdings: &KeptHoldings,
        names: Option<&BTreeSet<String>>,
        planned_moved: Option<&BTreeSet<String>>,
    ) -> (SharedNodes, Arc<FxHashMap<String, usize>>) {
        let since = self.since(ledger);
        self.read_up_to = Some((ledger.nodes_journal().end(), ledger.load().journal().end()));
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
            let registration_changed = kept.is_none_or(|k| !same_registered_gpus(&k.gpus, gpus));
            let fresh = match kept {
                Some(kept) => kept.again(gpus, resources),
                None => SessionNode::new(name.clone(), gpus.clone(), resources),
            };
            Some((Arc::new(fresh), registration_changed))
        };
        match (names, since, planned_moved) {
            (None, Since::Nodes(changed), Some(planned_moved)) => {
                let look_at: BTreeSet<&String> = changed.iter().chain(planned_moved).collect();
                for name in look_at {
                    let Some(&i) = self.index.get(name) else {
                        continue;
                    };
                    let kept = &self.nodes[i];
                    // The set of nodes is unchanged: the ledger has this one.
                    let Some((n, registration_changed)) = node(name, Some(kept)) else {
                        continue;
                    };
                    if Arc::ptr_eq(&n, kept) {
                        continue;
                    }
                    if registration_changed {
                        self.registrations_changed.insert(name.clone());
                    }
                    self.journal.note(name.as_str());
                    self.sums.remove(kept);
                    self.sums.add(&n);
                    Arc::make_mut(&mut self.order).replace(i, kept, &n);
                    Arc::make_mut(&mut self.nodes)[i] = n;
                }
            }
            (None, _, _) => {
                let mut nodes = Vec::with_capacity(self.nodes.len());
                for kept in self.nodes.iter() {
                    if let Some((n, registration_changed)) = node(&kept.name, Some(kept)) {
                        if registration_changed {
                            self.registrations_changed.insert(n.name.clone());
                        }
                        if !Arc::ptr_eq(&n, kept) {
                            self.journal.note(n.name.as_str());
                        }
                        nodes.push(n);
                    }
                }
                self.sums = NodeSums::of(nodes.iter().map(|n| &**n));
                self.order = Arc::new(ScoreOrder::of(&nodes));
                self.nodes = Arc::new(nodes);
            }
            (Some(names), _, _) => {
                let mut nodes = Vec::with_capacity(names.len());
                for name in names {
                    let kept = self.index.get(name).map(|&i| &self.nodes[i]);
                    if let Some((n, registration_changed)) = node(name, kept) {
                        if registration_changed {
                            self.registrations_changed.insert(n.name.clone());
                        }
                        if kept.is_none_or(|k| !Arc::ptr_eq(&n, k)) {
                            self.journal.note(name.as_str());
                        }
                        nodes.push(n);
                    }
                }
                for gone in self.index.keys().filter(|n| !names.contains(*n)) {
                    self.registrations_changed.insert(gone.clone());
                    self.journal.note(gone.as_str());
                }
                self.sums = NodeSums::of(nodes.iter().map(|n| &**n));
                self.index = Arc::new(position_index(&nodes));
                self.order = Arc::new(ScoreOrder::of(&nodes));
                self.nodes = Arc::new(nodes);
            }
        }
        (self.nodes.clone(), self.index.clone())
    }

    /// What sessions read of all the nodes of the last picture together.
    pub fn sums(&self) -> &NodeSums {
        &self.sums
    }

    /// The nodes of the last picture that can take a GPU, in score order.
    pub fn score_order(&self) -> &Arc<ScoreOrder> {
        &self.order
    }

    /// The nodes replaced, added or removed from one picture to the next.
    pub fn journal(&self) -> &ChangeJournal {
        &self.journal
    }

    /// The nodes whose registered GPUs changed, came or went since the last
    /// call.
    pub fn take_registrations_changed(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.registrations_changed)
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
