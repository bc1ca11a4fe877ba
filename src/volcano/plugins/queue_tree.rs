//! The queue tree the capacity plugins share: each queue's ancestors (only under
//! hierarchical capacity) and figures summed over a queue and its descendants.

use crate::placement::resource_fit::POD_COUNT;
use crate::resources::Resources;
use crate::volcano::capacity::{self, CapacityInput, CapacityNode};
use crate::volcano::framework::SessionState;
use crate::volcano::framework::queue::{QueueInfo, add_cards};
use std::collections::BTreeMap;

/// The queues of a session as a tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct QueueTree {
    /// Queue names, in name order (the order of `nodes`).
    pub names: Vec<String>,
    index: BTreeMap<String, usize>,
    /// Capacity's view of each queue.
    pub nodes: Vec<CapacityNode>,
}

impl QueueTree {
    /// Resolves the tree over the session's queues (flat without `hierarchy`).
    pub fn build(state: &SessionState, hierarchy: bool) -> Self {
        let names: Vec<String> = state.queues.keys().cloned().collect();
        let inputs: Vec<CapacityInput> = state
            .queues
            .values()
            .map(|q| CapacityInput {
                name: q.spec.name.clone(),
                parent: q.spec.parent.clone(),
                capability: q.spec.capability.clone(),
                deserved: q.spec.deserved.clone(),
                guarantee: q.spec.guarantee.clone().unwrap_or_default(),
            })
            .collect();
        let nodes = capacity::build(&state.total, &inputs, hierarchy);
        let index = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        Self {
            names,
            index,
            nodes,
        }
    }

    /// A queue's position.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The queue and its ancestors, nearest first.
    pub fn chain(&self, i: usize) -> Vec<usize> {
        std::iter::once(i)
            .chain(self.nodes[i].ancestors.iter().copied())
            .collect()
    }

    /// ` of ancestor queue "<name>"` when `n` is an ancestor of `i`.
    pub fn ancestor_name(&self, i: usize, n: usize) -> Option<&str> {
        (i != n).then(|| self.names[n].as_str())
    }

    /// The queues in `i`'s subtree (itself and its descendants).
    fn subtree<'s>(
        &'s self,
        state: &'s SessionState,
        i: usize,
    ) -> impl Iterator<Item = &'s QueueInfo> + 's {
        self.names.iter().enumerate().filter_map(move |(j, name)| {
            (j == i || self.nodes[j].ancestors.contains(&i))
                .then(|| state.queue(name))
                .flatten()
        })
    }

    /// A figure summed over `i`'s subtree.
    pub fn sum(
        &self,
        state: &SessionState,
        i: usize,
        figure: impl Fn(&QueueInfo) -> &Resources,
    ) -> Resources {
        let mut total = Resources::default();
        for q in self.subtree(state, i) {
            total.add(figure(q));
        }
        total.prune_zeros();
        total
    }

    /// What `i`'s subtree holds with its pod count: one `pods` per task that
    /// holds resources, as Volcano charges queues (see `pod_charge`). The count
    /// is taken only when `i`'s deserved amount (which covers its guarantee)
    /// names `pods`: no other comparison reads it, and it costs a walk over
    /// every task.
    pub fn held_with_pods(&self, state: &SessionState, i: usize) -> Resources {
        let held = self.sum(state, i, |q| &q.allocated);
        if self.nodes[i].deserved.get(POD_COUNT) <= 0 {
            return held;
        }
        let in_subtree = |queue: &str| {
            self.position(queue)
                .is_some_and(|q| q == i || self.nodes[q].ancestors.contains(&i))
        };
        let pods = state
            .jobs
            .values()
            .filter(|j| in_subtree(&j.queue))
            .flat_map(|j| &j.tasks)
            .filter(|t| t.holds_resources())
            .count();
        super::pod_charge::plus_pods(held, pods)
    }

    /// Cards held over `i`'s subtree.
    pub fn cards(&self, state: &SessionState, i: usize) -> BTreeMap<String, i64> {
        let mut total = BTreeMap::new();
        for q in self.subtree(state, i) {
            add_cards(&mut total, &q.cards);
        }
        total
    }
}
