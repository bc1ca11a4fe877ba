//! The network topology for `/debug/state`: the HyperNodes as the planner
//! resolves them against the GPU nodes.

use crate::ledger::Ledger;
use crate::scheduler::Scheduler;
use crate::volcano::topology::NetworkTopology;
use serde_json::{Value, json};
use std::collections::BTreeMap;

impl Scheduler {
    /// The HyperNodes as the planner resolves them against the GPU nodes: each
    /// one's tier, parent, children and nodes, what was found inconsistent, and
    /// the objects that could not be read.
    pub(crate) fn topology_view(&self, ledger: &Ledger) -> Value {
        let book = self.gang.book.read();
        let unlabelled = BTreeMap::new();
        let load = ledger.load();
        let resolved = NetworkTopology::resolve(
            book.hyper_nodes.values(),
            ledger.nodes().iter().map(|(name, _)| {
                let labels = load
                    .get(name)
                    .and_then(|l| l.traits.as_deref())
                    .map_or(&unlabelled, |t| &t.labels);
                (name.as_str(), labels)
            }),
        );
        json!({
            "hyperNodes": resolved.hyper_nodes,
            "tiers": resolved.tiers,
            "problems": resolved.problems,
            "unreadable": book.hyper_node_errors,
        })
    }
}
