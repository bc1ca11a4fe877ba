//! Queues as a session sees them: the Queue object and what its jobs hold and ask
//! for. Plugins derive their own figures (deserved, shares, trees) from these.

use super::job::JobInfo;
use crate::volcano::objects::QueueSpec;
use crate::volcano::resources::Resources;
use std::collections::BTreeMap;

/// One queue in a session. The figures are the queue's own (without child queues):
/// a plugin that builds a hierarchy sums them itself.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueInfo {
    /// The Queue object.
    pub spec: QueueSpec,
    /// Charges of the queue's tasks that hold resources.
    pub allocated: Resources,
    /// `allocated` plus the charges of pending tasks, on every dimension they ask
    /// for: proportion clamps the deserved amount to it.
    pub request: Resources,
    /// Minimum resources of admitted jobs not yet running (Volcano's `inqueue`),
    /// including their `card/<name>` needs.
    pub inqueue: Resources,
    /// What running jobs hold beyond their minimum (may be given back).
    pub elastic: Resources,
    /// Physical GPUs held, per card type.
    pub cards: BTreeMap<String, i64>,
}

impl QueueInfo {
    /// A queue with nothing held or asked.
    pub fn idle(spec: QueueSpec) -> Self {
        Self {
            spec,
            allocated: Resources::new(),
            request: Resources::new(),
            inqueue: Resources::new(),
            elastic: Resources::new(),
            cards: BTreeMap::new(),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Counts one of the queue's jobs as a session opens: what its live tasks ask
    /// for and hold, what it holds beyond its minimum (elastic), and, once
    /// `admitted`, what its minimum still needs beyond what it holds (Volcano's
    /// `inqueue`: minResources minus allocated). A task bound but not yet running
    /// holds what it asks, so an admitted gang whose pods are binding reserves
    /// nothing twice.
    pub fn charge_job(&mut self, job: &JobInfo, admitted: bool) {
        super::job_figures::JobFigures::of(job, admitted).add_to(self);
    }

    /// Drops zero amounts, so that figures compare equal however they were summed.
    pub fn prune_zeros(&mut self) {
        self.allocated.prune_zeros();
        self.request.prune_zeros();
        self.inqueue.prune_zeros();
        self.elastic.prune_zeros();
    }
}

/// Adds per-card counts.
pub fn add_cards(into: &mut BTreeMap<String, i64>, cards: &BTreeMap<String, i64>) {
    for (k, v) in cards {
        if *v > 0 {
            let slot = into.entry(k.clone()).or_insert(0);
            *slot = slot.saturating_add(*v);
        }
    }
}

/// Takes per-card counts back (the exact inverse of [`add_cards`]).
pub fn sub_cards(from: &mut BTreeMap<String, i64>, cards: &BTreeMap<String, i64>) {
    for (k, v) in cards {
        if *v > 0
            && let Some(slot) = from.get_mut(k)
        {
            *slot = slot.saturating_sub(*v).max(0);
        }
    }
    from.retain(|_, v| *v > 0);
}
