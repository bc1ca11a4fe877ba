//! capacity-card: per-card-type quotas from the Queue annotation
//! `volcano.sh/card.quota` (e.g. `{"NVIDIA-H100":4}`), matched against the card
//! types of the GPUs a queue's pods hold; jobs may state the cards they need with
//! `volcano.sh/card.request`, checked at admission. Under hierarchical capacity a
//! quota binds the queue's whole subtree. See `volcano::card_quota`.

use super::queue_tree::QueueTree;
use crate::volcano::card_quota::{
    CARD_DIMENSION_PREFIX, card_dimension, cards_in_resources, first_quota_excess,
};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::{Plugin, Vote};
use crate::volcano::framework::queue::add_cards;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::rejection::of_ancestor;
use crate::volcano::framework::{JobInfo, QueueInfo, Rejection, SessionState, TaskInfo};
use std::collections::BTreeMap;

/// The capacity-card plugin.
#[derive(Debug, Default)]
pub struct CapacityCard {
    hierarchy: bool,
    tree: QueueTree,
    /// `cardUnlimitedCpuMemory`: read, applied with preemption and reclaim.
    pub card_unlimited_cpu_memory: bool,
    /// `overCommitFactor`: read, applied with preemption and reclaim.
    pub over_commit_factor: Option<f64>,
    /// `podOwnerReferenceToServiceType`: owner kind → service type.
    pub owner_service_types: BTreeMap<String, String>,
}

/// Builds the plugin.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    let args = &ctx.args;
    args.only(&[
        "cardUnlimitedCpuMemory",
        "overCommitFactor",
        "podOwnerReferenceToServiceType",
    ])?;
    Ok(Some(Box::new(CapacityCard {
        hierarchy: ctx.conf.enabled("capacity") && ctx.conf.capacity_hierarchy(),
        tree: QueueTree::default(),
        card_unlimited_cpu_memory: args.boolean("cardUnlimitedCpuMemory")?.unwrap_or(false),
        over_commit_factor: args.number_at_least("overCommitFactor", 1.0)?,
        owner_service_types: args
            .string_map("podOwnerReferenceToServiceType")?
            .unwrap_or_default(),
    })))
}

impl CapacityCard {
    /// The quota of queue `n` (the asked queue `i` or an ancestor) against `used`
    /// plus `wanted`.
    fn check(
        &self,
        i: usize,
        n: usize,
        state: &SessionState,
        used: &BTreeMap<String, i64>,
        wanted: &BTreeMap<String, i64>,
    ) -> Result<(), Rejection> {
        let Some(quota) = state.queue(&self.tree.names[n]).map(|q| &q.spec.card_quota) else {
            return Ok(());
        };
        match first_quota_excess(quota, used, wanted) {
            None => Ok(()),
            Some(x) => Err(Rejection {
                plugin: "capacity-card",
                queue: self.tree.names[i].clone(),
                dimension: card_dimension(&x.key),
                message: format!(
                    "card {} would be {} > quota {}{}",
                    x.key,
                    x.amount,
                    x.quota,
                    of_ancestor(self.tree.ancestor_name(i, n))
                ),
            }),
        }
    }
}

impl Plugin for CapacityCard {
    fn name(&self) -> &'static str {
        "capacity-card"
    }

    fn open(&mut self, state: &SessionState) {
        self.tree = QueueTree::build(state, self.hierarchy);
    }

    fn job_enqueueable(&self, state: &SessionState, job: &JobInfo) -> Vote {
        let mut asked = job.min_request().unwrap_or_default();
        asked.add(&job.card_request);
        let wanted = cards_in_resources(&asked.split_prefix(CARD_DIMENSION_PREFIX).0);
        if wanted.is_empty() {
            return Vote::Abstain;
        }
        let Some(i) = self.tree.position(&job.queue) else {
            return Vote::Abstain;
        };
        for n in self.tree.chain(i) {
            let mut used = self.tree.cards(state, n);
            let inqueue = self.tree.sum(state, n, |q| &q.inqueue);
            add_cards(&mut used, &cards_in_resources(&inqueue));
            if let Err(r) = self.check(i, n, state, &used, &wanted) {
                return Vote::Reject(r);
            }
        }
        Vote::Permit
    }

    fn allocatable(
        &self,
        state: &SessionState,
        q: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        if !task.cards.values().any(|n| *n > 0) {
            return Ok(());
        }
        let Some(i) = self.tree.position(q.name()) else {
            return Ok(());
        };
        for n in self.tree.chain(i) {
            self.check(i, n, state, &self.tree.cards(state, n), &task.cards)?;
        }
        Ok(())
    }
}
