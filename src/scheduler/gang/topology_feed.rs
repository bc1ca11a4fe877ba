//! Feeding the gang book Volcano's HyperNodes (`topology.volcano.sh`), which the
//! allocate action reads to keep a gang with `spec.networkTopology` inside one
//! part of the network.

use crate::scheduler::Scheduler;
use crate::volcano::topology::HyperNode;

impl Scheduler {
    /// Applies a HyperNode (JSON as the API serves it). A change wakes the planner:
    /// a gang waiting for a HyperNode that can hold it may now fit.
    pub fn apply_hyper_node(&self, object: &serde_json::Value) {
        let changed = match HyperNode::from_json(object) {
            Ok(hyper_node) => {
                let mut book = self.gang.book.write();
                book.hyper_node_errors.remove(&hyper_node.name);
                let changed = book.hyper_nodes.get(&hyper_node.name) != Some(&hyper_node);
                book.hyper_nodes.insert(hyper_node.name.clone(), hyper_node);
                changed
            }
            Err(e) => {
                tracing::warn!(error = %e, "HyperNode is unreadable; the topology is read without it");
                let mut book = self.gang.book.write();
                let removed = book.hyper_nodes.remove(&e.name).is_some();
                book.hyper_node_errors.insert(e.name.clone(), e.problem);
                removed
            }
        };
        if changed {
            self.gang.wake.notify_one();
        }
    }

    /// Forgets a deleted HyperNode.
    pub fn forget_hyper_node(&self, name: &str) {
        let removed = {
            let mut book = self.gang.book.write();
            book.hyper_node_errors.remove(name);
            book.hyper_nodes.remove(name).is_some()
        };
        if removed {
            self.gang.wake.notify_one();
        }
    }
}
