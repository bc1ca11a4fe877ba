//! capacity-card: per-card-type quotas from the Queue annotation
//! `volcano.sh/card.quota` (e.g. `{"NVIDIA-H100":4}`), matched against the card
//! types of the GPUs and MIG instances a queue's pods hold (or the
//! `volcano.sh/card.name` entries they are charged to); jobs may state the cards
//! they need with `volcano.sh/card.request`, checked at admission. Under hierarchical capacity a
//! quota binds the queue's whole subtree. See `volcano::card_quota`.
//!
//! It also carries the tidal-reclaim rules between service types
//! (`volcano.sh/service.type` on the PodGroup, or the kind of the pod's first owner
//! through `podOwnerReferenceToServiceType`): training reclaims nothing, inference
//! reclaims only from training, and a task of unknown type is never a victim. A
//! queue may reclaim for a task only while its allocated amount plus the task stays
//! within its capability on every dimension, cards included.
//!
//! Arguments, as this scheduler reads them:
//! - `overCommitFactor` (≥ 1, default 1): admission (enqueue) lets a queue's jobs
//!   ask for up to quota × factor cards in all, betting that running jobs finish;
//!   placement and reclaim still hold to the quota itself.
//! - `cardUnlimitedCpuMemory` (default false): a task that takes cards is not
//!   held to its queue's CPU and memory capability when reclaiming (the card quota
//!   is the limit that matters for it); tasks without cards still are.

use super::queue_tree::QueueTree;
use crate::volcano::card_quota::{
    CARD_DIMENSION_PREFIX, card_dimension, card_request, cards_in_resources, first_quota_excess,
};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::job::GpuAsk;
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
    /// `cardUnlimitedCpuMemory`.
    pub card_unlimited_cpu_memory: bool,
    /// `overCommitFactor` in thousandths (1000 = no overcommit).
    pub over_commit: i64,
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
        over_commit: crate::volcano::overcommit::factor_per_mille(
            args.number_at_least("overCommitFactor", 1.0)?
                .unwrap_or(1.0),
        ),
        owner_service_types: args
            .string_map("podOwnerReferenceToServiceType")?
            .unwrap_or_default(),
    })))
}

/// What kind of work a job is, for the tidal-reclaim rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceType {
    /// Online inference: may take cards back from training.
    Inference,
    /// Offline training: takes nothing from anyone; may give its cards back.
    Training,
    /// Not stated: never a victim.
    Unknown,
}

impl ServiceType {
    /// Reads `volcano.sh/service.type`; anything but the two known types is
    /// unknown.
    pub fn parse(value: &str) -> Self {
        match value.trim() {
            "inference" => ServiceType::Inference,
            "training" => ServiceType::Training,
            _ => ServiceType::Unknown,
        }
    }

    /// The type as a metric label: one of three values whatever the annotation says.
    pub fn label(self) -> &'static str {
        match self {
            ServiceType::Inference => "inference",
            ServiceType::Training => "training",
            ServiceType::Unknown => "",
        }
    }
}

impl CapacityCard {
    /// A task's service type: its job's `volcano.sh/service.type`, else the type
    /// configured for the kind of its pod's first owner, else unknown.
    pub fn service_type(&self, state: &SessionState, task: &TaskInfo) -> ServiceType {
        if let Some(st) = state.job(&task.job).and_then(|j| j.service_type.as_deref()) {
            return ServiceType::parse(st);
        }
        task.owner_kind
            .as_deref()
            .and_then(|kind| self.owner_service_types.get(kind))
            .map_or(ServiceType::Unknown, |st| ServiceType::parse(st))
    }

    /// The cards a pending task will take: what it holds if placed, else its pod's
    /// `volcano.sh/card.request`, else, when its `volcano.sh/card.name` names one
    /// card type, as many of those as it asks for GPUs (with several names the
    /// card it will get is not known before it is placed).
    fn wanted_cards(task: &TaskInfo) -> BTreeMap<String, i64> {
        if !task.cards.is_empty() {
            return task.cards.clone();
        }
        let requested = task
            .pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| card_request(a).ok().flatten());
        if let Some(cards) = requested {
            return cards;
        }
        match &task.gpu {
            GpuAsk::Vgpu(ctx) => match ctx.selectors.card_names.names() {
                [name] => {
                    let app: u32 = ctx.request.app().iter().flatten().map(|c| c.nums).sum();
                    let init = ctx.request.init().iter().flatten().map(|c| c.nums).max();
                    let n = app.max(init.unwrap_or(0));
                    BTreeMap::from([(name.clone(), i64::from(n))])
                }
                _ => BTreeMap::new(),
            },
            _ => BTreeMap::new(),
        }
    }

    /// The quota of queue `n` (the asked queue `i` or an ancestor), scaled by
    /// `factor` per mille, against `used` plus `wanted`.
    fn check(
        &self,
        i: usize,
        n: usize,
        state: &SessionState,
        used: &BTreeMap<String, i64>,
        wanted: &BTreeMap<String, i64>,
    ) -> Result<(), Rejection> {
        self.check_scaled(i, n, state, used, wanted, 1000)
    }

    fn check_scaled(
        &self,
        i: usize,
        n: usize,
        state: &SessionState,
        used: &BTreeMap<String, i64>,
        wanted: &BTreeMap<String, i64>,
        factor_per_mille: i64,
    ) -> Result<(), Rejection> {
        let Some(quota) = state.queue(&self.tree.names[n]).map(|q| &q.spec.card_quota) else {
            return Ok(());
        };
        let scaled: BTreeMap<String, i64> = quota
            .iter()
            .map(|(k, v)| (k.clone(), v.saturating_mul(factor_per_mille) / 1000))
            .collect();
        let quota = &scaled;
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
            if let Err(r) = self.check_scaled(i, n, state, &used, &wanted, self.over_commit) {
                return Vote::Reject(r);
            }
        }
        Vote::Permit
    }

    /// Training reclaims nothing; others take only from training.
    fn reclaimable(
        &self,
        state: &SessionState,
        reclaimer: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        if self.service_type(state, reclaimer) == ServiceType::Training {
            return Some(Vec::new());
        }
        Some(
            candidates
                .iter()
                .filter(|c| self.service_type(state, c) == ServiceType::Training)
                .map(|c| c.uid.clone())
                .collect(),
        )
    }

    /// The queue stays within its capability on every dimension the task asks
    /// for (CPU and memory aside for a card task under `cardUnlimitedCpuMemory`),
    /// and within its card quota.
    fn preemptive(
        &self,
        state: &SessionState,
        q: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        let wanted = Self::wanted_cards(task);
        if let Some(capability) = &q.spec.capability {
            let mut asked = task.resreq.split_prefix(CARD_DIMENSION_PREFIX).1;
            // A task takes cards when it asks for GPUs at all: it may not have
            // stated which (`volcano.sh/card.request`) nor been placed yet.
            let takes_cards = !wanted.is_empty() || matches!(task.gpu, GpuAsk::Vgpu(_));
            if self.card_unlimited_cpu_memory && takes_cards {
                asked.set("cpu", 0);
                asked.set("memory", 0);
            }
            if let Some(x) =
                crate::volcano::proportion::allocatable_excess(&q.allocated, &asked, capability)
            {
                return Err(Rejection::exceeded(
                    "capacity-card",
                    q.name(),
                    x,
                    "capability",
                    None,
                ));
            }
        }
        if wanted.values().any(|n| *n > 0)
            && let Some(i) = self.tree.position(q.name())
        {
            for n in self.tree.chain(i) {
                self.check(i, n, state, &self.tree.cards(state, n), &wanted)?;
            }
        }
        Ok(())
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
