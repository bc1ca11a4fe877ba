//! The queue policy façade the planner asks: in which order to serve queues, whether
//! a PodGroup may be admitted (enqueue), whether a task may be placed (allocate), and
//! what each queue holds, for the debug endpoint and metrics.
//!
//! A [`QueueSession`] is built once per planning pass from the scheduler
//! configuration, the cluster total and per-queue usage, then updated in place as the
//! planner tentatively places tasks ([`QueueSession::allocate`]) and takes them back
//! when a gang does not fit ([`QueueSession::deallocate`], the exact inverse), like
//! Volcano's session and statement.
//!
//! Which plugins vote follows the configuration:
//! - **proportion** or **capacity** decide deserved amounts, quota checks and share.
//!   They are alternatives; when both are listed, capacity wins (its explicit
//!   `spec.deserved` is the more specific statement of intent, and Volcano documents
//!   the two as incompatible). With neither, queues have no quota, only their state
//!   is checked, and every share is 0.
//! - **overcommit** adds a cluster-wide admission check to enqueue only.
//! - **capacity-card** adds per-card-type quotas to enqueue and allocate. For enqueue
//!   the caller passes the job's card needs (from `volcano.sh/card.request`) inside
//!   `min_resources` under dimensions `card/<name>`, in milli-units (2 cards = 2000;
//!   see [`super::card_quota::card_request_resources`]); those dimensions are taken out
//!   before the resource checks. For allocate the caller passes the cards a task would
//!   take, per card type, as whole counts.
//!
//! Resource dimensions are opaque names: `nvidia.com/gpu`, `nvidia.com/gpumem` (MiB
//! counted in milli-units) and `nvidia.com/gpucores` are checked exactly like `cpu`.
//!
//! Each queue's `allocated`, `request`, `inqueue`, `elastic` and allocated cards are
//! that queue's own. With capacity's hierarchy on, a parent queue's figures include
//! its descendants', and `allocate` updates every ancestor.

use super::capacity::{self, CapacityInput};
use super::card_quota::{
    CARD_DIMENSION_PREFIX, card_dimension, cards_in_resources, first_quota_excess, use_by_quota_key,
};
use super::conf::SchedulerConf;
use super::objects::{QueueSpec, QueueState};
use super::overcommit;
use super::proportion::{self, ProportionInput};
use super::resources::{Excess, Resources, format_amount};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// One queue's inputs for a session.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueInput {
    /// The Queue object.
    pub spec: QueueSpec,
    /// Requests of the queue's tasks that hold resources (bound, binding, running).
    pub allocated: Resources,
    /// `allocated` plus the requests of pending tasks, on every dimension they
    /// request: proportion clamps the deserved amount to it, so a dimension missing
    /// here is one the queue deserves none of.
    pub request: Resources,
    /// Minimum resources of admitted jobs not yet running (Volcano's `inqueue`),
    /// including their `card/<name>` needs.
    pub inqueue: Resources,
    /// Allocation of running jobs beyond their minimum (may be given back).
    pub elastic: Resources,
    /// Physical GPUs held, per card type (see [`super::card_quota`]).
    pub allocated_cards: BTreeMap<String, i64>,
}

impl QueueInput {
    /// A queue with no usage.
    pub fn idle(spec: QueueSpec) -> Self {
        Self {
            spec,
            allocated: Resources::new(),
            request: Resources::new(),
            inqueue: Resources::new(),
            elastic: Resources::new(),
            allocated_cards: BTreeMap::new(),
        }
    }
}

/// Which plugin decides queue quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QuotaPolicy {
    /// No quota plugin: only queue state is checked.
    None,
    /// Weight-based water-filling.
    Proportion,
    /// Explicit deserved amounts, optionally hierarchical.
    Capacity {
        /// Whether `spec.parent` builds a tree.
        hierarchy: bool,
    },
}

impl QuotaPolicy {
    fn plugin(self) -> Option<&'static str> {
        match self {
            QuotaPolicy::None => None,
            QuotaPolicy::Proportion => Some("proportion"),
            QuotaPolicy::Capacity { .. } => Some("capacity"),
        }
    }
}

/// Why a queue refuses a job or a task. The dimension says what to fix: a resource
/// name, `card/<name>`, `state`, `hierarchy`, or `queue` for a queue that does not
/// exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// The plugin that refused (`proportion`, `capacity`, `overcommit`,
    /// `capacity-card`), the action (`enqueue`, `allocate`) for a queue that is not
    /// Open when no quota plugin runs, or `queue` for an unknown queue.
    pub plugin: &'static str,
    /// The queue asked about.
    pub queue: String,
    /// What is exceeded or wrong.
    pub dimension: String,
    /// Human-readable detail, e.g. `nvidia.com/gpu would be 10 > capability 8`.
    pub message: String,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.plugin == UNKNOWN_QUEUE {
            return f.write_str(&self.message);
        }
        write!(
            f,
            "queue {:?}: {} ({})",
            self.queue, self.message, self.plugin
        )
    }
}

impl std::error::Error for Rejection {}

const UNKNOWN_QUEUE: &str = "queue";

/// One queue's state, for `GET /debug/queues` and metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueReport {
    /// Queue name.
    pub name: String,
    /// `status.state` of the Queue object.
    pub state: QueueState,
    /// Set when the session treats the queue as closed although its state is Open
    /// (a broken hierarchy).
    pub state_reason: Option<String>,
    /// Weight.
    pub weight: u32,
    /// Priority.
    pub priority: i32,
    /// Parent queue (`None` for the top level).
    pub parent: Option<String>,
    /// Whether other queues may reclaim from it.
    pub reclaimable: bool,
    /// Whether the queue may hold jobs (no child queues).
    pub leaf: bool,
    /// Guarantee.
    pub guarantee: Option<Resources>,
    /// Capability in force (with dimensions inherited from the parent under
    /// hierarchical capacity).
    pub capability: Option<Resources>,
    /// The effective limit (`None` without a quota plugin or for a broken queue).
    pub real_capability: Option<Resources>,
    /// Deserved amount (`None` without a quota plugin).
    pub deserved: Option<Resources>,
    /// Allocated resources.
    pub allocated: Resources,
    /// Allocated plus pending.
    pub request: Resources,
    /// Admitted, not yet running.
    pub inqueue: Resources,
    /// Elastic part of running jobs.
    pub elastic: Resources,
    /// Dominant share of deserved in use.
    pub share: f64,
    /// Whether allocation skips the queue.
    pub overused: bool,
    /// `volcano.sh/card.quota`.
    pub card_quota: BTreeMap<String, i64>,
    /// Cards in use per quota key.
    pub card_used: BTreeMap<String, i64>,
    /// Cards in use per card type.
    pub cards_allocated: BTreeMap<String, i64>,
}

#[derive(Debug, Clone)]
struct Entry {
    spec: QueueSpec,
    allocated: Resources,
    request: Resources,
    inqueue: Resources,
    elastic: Resources,
    cards: BTreeMap<String, i64>,
    ancestors: Vec<usize>,
    leaf: bool,
    broken: Option<String>,
    capability: Option<Resources>,
    real_capability: Option<Resources>,
    deserved: Option<Resources>,
    share: f64,
}

/// Queue policy state for one planning pass.
#[derive(Debug, Clone)]
pub struct QueueSession {
    policy: QuotaPolicy,
    overcommit_per_mille: Option<i64>,
    card_quota: bool,
    total: Resources,
    used: Resources,
    inqueue: Resources,
    queues: Vec<Entry>,
    index: BTreeMap<String, usize>,
}

impl QueueSession {
    /// Builds the session. A queue name given twice keeps its first entry.
    pub fn new(conf: &SchedulerConf, total: Resources, queues: Vec<QueueInput>) -> Self {
        let policy = if conf.enabled("capacity") {
            QuotaPolicy::Capacity {
                hierarchy: conf.capacity_hierarchy(),
            }
        } else if conf.enabled("proportion") {
            QuotaPolicy::Proportion
        } else {
            QuotaPolicy::None
        };
        let overcommit_per_mille = conf
            .enabled("overcommit")
            .then(|| overcommit::factor_per_mille(conf.overcommit_factor()));

        let mut index = BTreeMap::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut used = Resources::new();
        let mut inqueue = Resources::new();
        for q in queues {
            if index.contains_key(&q.spec.name) {
                continue;
            }
            index.insert(q.spec.name.clone(), entries.len());
            used.add(&q.allocated);
            inqueue.add(&q.inqueue);
            entries.push(Entry {
                allocated: q.allocated.without_zeros(),
                request: q.request.without_zeros(),
                inqueue: q.inqueue.without_zeros(),
                elastic: q.elastic.without_zeros(),
                cards: q
                    .allocated_cards
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .collect(),
                spec: q.spec,
                ancestors: Vec::new(),
                leaf: true,
                broken: None,
                capability: None,
                real_capability: None,
                deserved: None,
                share: 0.0,
            });
        }

        match policy {
            QuotaPolicy::None => {
                for e in &mut entries {
                    e.capability = e.spec.capability.clone();
                }
            }
            QuotaPolicy::Proportion => {
                let inputs: Vec<ProportionInput> = entries
                    .iter()
                    .map(|e| ProportionInput {
                        weight: e.spec.weight,
                        guarantee: e.spec.guarantee.clone().unwrap_or_default(),
                        capability: e.spec.capability.clone(),
                        request: e.request.clone(),
                    })
                    .collect();
                for (e, out) in entries
                    .iter_mut()
                    .zip(proportion::water_fill(&total, &inputs))
                {
                    e.capability = e.spec.capability.clone();
                    e.real_capability = Some(out.real_capability);
                    e.deserved = Some(out.deserved);
                }
            }
            QuotaPolicy::Capacity { hierarchy } => {
                let inputs: Vec<CapacityInput> = entries
                    .iter()
                    .map(|e| CapacityInput {
                        name: e.spec.name.clone(),
                        parent: e.spec.parent.clone(),
                        capability: e.spec.capability.clone(),
                        deserved: e.spec.deserved.clone(),
                        guarantee: e.spec.guarantee.clone().unwrap_or_default(),
                    })
                    .collect();
                let nodes = capacity::build(&total, &inputs, hierarchy);
                for (e, node) in entries.iter_mut().zip(&nodes) {
                    e.ancestors = node.ancestors.clone();
                    e.leaf = node.is_leaf();
                    e.broken = node.error.as_ref().map(ToString::to_string);
                    e.capability = node.capability.clone();
                    e.real_capability = node.real_capability.clone();
                    e.deserved = Some(node.deserved.clone());
                }
                // A parent's figures include its descendants'.
                let own: Vec<Entry> = entries.clone();
                for (i, child) in own.iter().enumerate() {
                    for &p in &nodes[i].ancestors {
                        let anc = &mut entries[p];
                        anc.allocated.add(&child.allocated);
                        anc.request.add(&child.request);
                        anc.inqueue.add(&child.inqueue);
                        anc.elastic.add(&child.elastic);
                        add_cards(&mut anc.cards, &child.cards);
                    }
                }
            }
        }

        let mut session = Self {
            policy,
            overcommit_per_mille,
            card_quota: conf.enabled("capacity-card"),
            total,
            used: used.without_zeros(),
            inqueue: inqueue.without_zeros(),
            queues: entries,
            index,
        };
        for i in 0..session.queues.len() {
            session.update_share(i);
        }
        session
    }

    /// The quota plugin in force.
    pub fn policy(&self) -> QuotaPolicy {
        self.policy
    }

    /// The cluster total the session was built with.
    pub fn total(&self) -> &Resources {
        &self.total
    }

    /// What overcommit leaves for new jobs (`None` when the plugin is off). "Used" is
    /// the sum of the queues' allocations; pods outside every queue are not counted.
    pub fn overcommit_idle(&self) -> Option<Resources> {
        self.overcommit_per_mille
            .map(|f| overcommit::idle(&self.total, f, &self.used, &self.inqueue))
    }

    /// Queue order: higher `spec.priority` first, then lower share, then (under
    /// capacity) queues with a deserved amount before best-effort ones, then name.
    /// Unknown queues sort last.
    pub fn queue_order(&self, a: &str, b: &str) -> Ordering {
        match (self.index.get(a), self.index.get(b)) {
            (Some(&ia), Some(&ib)) => {
                let (ea, eb) = (&self.queues[ia], &self.queues[ib]);
                eb.spec
                    .priority
                    .cmp(&ea.spec.priority)
                    .then_with(|| ea.share.total_cmp(&eb.share))
                    .then_with(|| {
                        if matches!(self.policy, QuotaPolicy::Capacity { .. }) {
                            has_deserved(eb).cmp(&has_deserved(ea))
                        } else {
                            Ordering::Equal
                        }
                    })
                    .then_with(|| a.cmp(b))
            }
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => a.cmp(b),
        }
    }

    /// Every queue's name in [`Self::queue_order`].
    pub fn ordered_queues(&self) -> Vec<String> {
        let mut names: Vec<String> = self.index.keys().cloned().collect();
        names.sort_by(|a, b| self.queue_order(a, b));
        names
    }

    /// Whether allocation should skip the queue: under proportion, when it holds at
    /// least its deserved amount on every dimension. Capacity queues may grow up to
    /// their real capability and are never overused (as in Volcano).
    pub fn overused(&self, q: &str) -> bool {
        let Some(&i) = self.index.get(q) else {
            return false;
        };
        let e = &self.queues[i];
        match (self.policy, &e.deserved) {
            (QuotaPolicy::Proportion, Some(d)) => proportion::overused(d, &e.allocated),
            _ => false,
        }
    }

    /// May a PodGroup with these minimum resources (plus `card/<name>` needs) be
    /// admitted to queue `q`? Checks, in order: existence, state, quota plugin,
    /// card quota, overcommit; the first refusal is returned.
    pub fn enqueueable(&self, q: &str, min_resources: &Resources) -> Result<(), Rejection> {
        let i = self.lookup(q)?;
        self.check_state(i, "enqueue")?;
        let (cards, resources) = min_resources.split_prefix(CARD_DIMENSION_PREFIX);
        let has_min = !resources.is_empty();
        match self.policy {
            QuotaPolicy::None => {}
            QuotaPolicy::Proportion => {
                let e = &self.queues[i];
                if let (true, Some(real)) = (has_min, &e.real_capability)
                    && let Some(x) = proportion::enqueue_excess(
                        &resources,
                        &e.allocated,
                        &e.inqueue,
                        &e.elastic,
                        real,
                    )
                {
                    return Err(self.exceeded("proportion", i, i, x, "capability"));
                }
            }
            QuotaPolicy::Capacity { hierarchy } => {
                self.check_leaf(i, hierarchy)?;
                if has_min {
                    for n in self.chain(i) {
                        let e = &self.queues[n];
                        let Some(real) = &e.real_capability else {
                            continue;
                        };
                        if let Some(x) = proportion::enqueue_excess(
                            &resources,
                            &e.allocated,
                            &e.inqueue,
                            &e.elastic,
                            real,
                        ) {
                            return Err(self.exceeded("capacity", i, n, x, "capability"));
                        }
                    }
                }
            }
        }
        if self.card_quota {
            let wanted = cards_in_resources(&cards);
            if !wanted.is_empty() {
                for n in self.chain(i) {
                    let e = &self.queues[n];
                    let mut used = e.cards.clone();
                    add_cards(&mut used, &cards_in_resources(&e.inqueue));
                    self.check_cards(i, n, &used, &wanted)?;
                }
            }
        }
        if let (Some(factor), true) = (self.overcommit_per_mille, has_min) {
            let idle = overcommit::idle(&self.total, factor, &self.used, &self.inqueue);
            if let Some(x) = overcommit::first_excess(&resources, &idle) {
                return Err(Rejection {
                    plugin: "overcommit",
                    queue: self.queues[i].spec.name.clone(),
                    message: format!(
                        "{} would be {} > idle {} at overcommit factor {}",
                        x.dimension,
                        format_amount(&x.dimension, x.amount),
                        format_amount(&x.dimension, x.limit),
                        factor as f64 / 1000.0
                    ),
                    dimension: x.dimension,
                });
            }
        }
        Ok(())
    }

    /// May a task with request `candidate` holding `cards` (per card type) be placed
    /// in queue `q` now?
    pub fn allocatable(
        &self,
        q: &str,
        candidate: &Resources,
        cards: &BTreeMap<String, i64>,
    ) -> Result<(), Rejection> {
        let i = self.lookup(q)?;
        self.check_state(i, "allocate")?;
        let (_, resources) = candidate.split_prefix(CARD_DIMENSION_PREFIX);
        match self.policy {
            QuotaPolicy::None => {}
            QuotaPolicy::Proportion => {
                let e = &self.queues[i];
                if let Some(deserved) = &e.deserved
                    && let Some(x) =
                        proportion::allocatable_excess(&e.allocated, &resources, deserved)
                {
                    return Err(self.exceeded("proportion", i, i, x, "deserved"));
                }
            }
            QuotaPolicy::Capacity { hierarchy } => {
                self.check_leaf(i, hierarchy)?;
                for n in self.chain(i) {
                    let e = &self.queues[n];
                    let Some(real) = &e.real_capability else {
                        continue;
                    };
                    if let Some(x) = capacity::allocatable_excess(&e.allocated, &resources, real) {
                        return Err(self.exceeded("capacity", i, n, x, "capability"));
                    }
                }
            }
        }
        if self.card_quota && cards.values().any(|n| *n > 0) {
            for n in self.chain(i) {
                self.check_cards(i, n, &self.queues[n].cards, cards)?;
            }
        }
        Ok(())
    }

    /// Records a tentative placement: `allocated += r` and the cards, for the queue
    /// and (hierarchical capacity) its ancestors; shares follow. An unknown queue is
    /// ignored.
    pub fn allocate(&mut self, q: &str, r: &Resources, cards: &BTreeMap<String, i64>) {
        let Some(&i) = self.index.get(q) else { return };
        for n in self.chain(i) {
            let e = &mut self.queues[n];
            e.allocated.add(r);
            e.allocated.prune_zeros();
            add_cards(&mut e.cards, cards);
            self.update_share(n);
        }
        self.used.add(r);
        self.used.prune_zeros();
    }

    /// Takes back a placement recorded with [`Self::allocate`] (a discarded
    /// statement): the exact inverse, so every report returns to what it was.
    pub fn deallocate(&mut self, q: &str, r: &Resources, cards: &BTreeMap<String, i64>) {
        let Some(&i) = self.index.get(q) else { return };
        for n in self.chain(i) {
            let e = &mut self.queues[n];
            e.allocated.saturating_sub(r);
            e.allocated.prune_zeros();
            sub_cards(&mut e.cards, cards);
            self.update_share(n);
        }
        self.used.saturating_sub(r);
        self.used.prune_zeros();
    }

    /// Records an admitted job: its minimum resources (and `card/<name>` needs) count
    /// as in queue for later enqueue checks.
    pub fn mark_inqueue(&mut self, q: &str, min_resources: &Resources) {
        let Some(&i) = self.index.get(q) else { return };
        for n in self.chain(i) {
            let e = &mut self.queues[n];
            e.inqueue.add(min_resources);
            e.inqueue.prune_zeros();
        }
        self.inqueue.add(min_resources);
        self.inqueue.prune_zeros();
    }

    /// Every queue's state, in name order (stable for dashboards and diffs).
    pub fn report(&self) -> Vec<QueueReport> {
        self.index
            .values()
            .map(|&i| {
                let e = &self.queues[i];
                QueueReport {
                    name: e.spec.name.clone(),
                    state: e.spec.state,
                    state_reason: e.broken.clone(),
                    weight: e.spec.weight,
                    priority: e.spec.priority,
                    parent: e.spec.parent.clone(),
                    reclaimable: e.spec.reclaimable,
                    leaf: e.leaf,
                    guarantee: e.spec.guarantee.clone(),
                    capability: e.capability.clone(),
                    real_capability: e.real_capability.clone(),
                    deserved: e.deserved.clone(),
                    allocated: e.allocated.clone(),
                    request: e.request.clone(),
                    inqueue: e.inqueue.clone(),
                    elastic: e.elastic.clone(),
                    share: e.share,
                    overused: self.overused(&e.spec.name),
                    card_quota: e.spec.card_quota.clone(),
                    card_used: use_by_quota_key(&e.spec.card_quota, &e.cards),
                    cards_allocated: e.cards.clone(),
                }
            })
            .collect()
    }

    fn lookup(&self, q: &str) -> Result<usize, Rejection> {
        self.index.get(q).copied().ok_or_else(|| Rejection {
            plugin: UNKNOWN_QUEUE,
            queue: q.to_owned(),
            dimension: "queue".to_owned(),
            message: format!("queue {q:?} does not exist"),
        })
    }

    fn check_state(&self, i: usize, action: &'static str) -> Result<(), Rejection> {
        let e = &self.queues[i];
        if let Some(reason) = &e.broken {
            return Err(Rejection {
                plugin: "capacity",
                queue: e.spec.name.clone(),
                dimension: "state".to_owned(),
                message: format!("treated as Closed: {reason}"),
            });
        }
        if e.spec.state != QueueState::Open {
            return Err(Rejection {
                plugin: self.policy.plugin().unwrap_or(action),
                queue: e.spec.name.clone(),
                dimension: "state".to_owned(),
                message: format!("state is {}, not Open", e.spec.state.as_str()),
            });
        }
        Ok(())
    }

    fn check_leaf(&self, i: usize, hierarchy: bool) -> Result<(), Rejection> {
        let e = &self.queues[i];
        if hierarchy && !e.leaf {
            return Err(Rejection {
                plugin: "capacity",
                queue: e.spec.name.clone(),
                dimension: "hierarchy".to_owned(),
                message: "has child queues; only leaf queues hold jobs".to_owned(),
            });
        }
        Ok(())
    }

    /// Card quota of queue `n` (the asked queue `i` or an ancestor) against `used`
    /// plus `wanted`, both per card type or quota key.
    fn check_cards(
        &self,
        i: usize,
        n: usize,
        used: &BTreeMap<String, i64>,
        wanted: &BTreeMap<String, i64>,
    ) -> Result<(), Rejection> {
        let quota = &self.queues[n].spec.card_quota;
        match first_quota_excess(quota, used, wanted) {
            None => Ok(()),
            Some(x) => Err(Rejection {
                plugin: "capacity-card",
                queue: self.queues[i].spec.name.clone(),
                dimension: card_dimension(&x.key),
                message: format!(
                    "card {} would be {} > quota {}{}",
                    x.key,
                    x.amount,
                    x.quota,
                    self.of_ancestor(i, n)
                ),
            }),
        }
    }

    fn exceeded(
        &self,
        plugin: &'static str,
        i: usize,
        n: usize,
        x: Excess,
        label: &str,
    ) -> Rejection {
        Rejection {
            plugin,
            queue: self.queues[i].spec.name.clone(),
            message: format!(
                "{} would be {} > {label} {}{}",
                x.dimension,
                format_amount(&x.dimension, x.amount),
                format_amount(&x.dimension, x.limit),
                self.of_ancestor(i, n)
            ),
            dimension: x.dimension,
        }
    }

    fn of_ancestor(&self, i: usize, n: usize) -> String {
        if i == n {
            String::new()
        } else {
            format!(" of ancestor queue {:?}", self.queues[n].spec.name)
        }
    }

    /// The queue and its ancestors (ancestors only under hierarchical capacity).
    fn chain(&self, i: usize) -> Vec<usize> {
        std::iter::once(i)
            .chain(self.queues[i].ancestors.iter().copied())
            .collect()
    }

    fn update_share(&mut self, i: usize) {
        let e = &mut self.queues[i];
        e.share = match (self.policy, &e.deserved) {
            (QuotaPolicy::Proportion, Some(d)) => proportion::share(&e.allocated, d),
            (QuotaPolicy::Capacity { .. }, Some(d)) => capacity::share(&e.allocated, d),
            _ => 0.0,
        };
    }
}

fn has_deserved(e: &Entry) -> bool {
    e.deserved.as_ref().is_some_and(|d| !d.is_empty())
}

fn add_cards(into: &mut BTreeMap<String, i64>, cards: &BTreeMap<String, i64>) {
    for (k, v) in cards {
        if *v > 0 {
            let slot = into.entry(k.clone()).or_insert(0);
            *slot = slot.saturating_add(*v);
        }
    }
}

fn sub_cards(from: &mut BTreeMap<String, i64>, cards: &BTreeMap<String, i64>) {
    for (k, v) in cards {
        if *v > 0
            && let Some(slot) = from.get_mut(k)
        {
            *slot = slot.saturating_sub(*v).max(0);
        }
    }
    from.retain(|_, v| *v > 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GPU: &str = "nvidia.com/gpu";

    fn conf(text: &str) -> SchedulerConf {
        SchedulerConf::parse(text).unwrap()
    }

    fn gpus(n: i64) -> Resources {
        Resources::from_units([(GPU, n)])
    }

    fn spec(name: &str) -> QueueSpec {
        QueueSpec::new(name)
    }

    fn busy(spec: QueueSpec, allocated: i64, request: i64) -> QueueInput {
        QueueInput {
            allocated: gpus(allocated),
            request: gpus(request),
            ..QueueInput::idle(spec)
        }
    }

    fn no_cards() -> BTreeMap<String, i64> {
        BTreeMap::new()
    }

    const CAPACITY: &str = "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n";

    #[test]
    fn default_conf_uses_proportion_and_overcommit() {
        // 60 GPUs, weights 1:2:3, all want 100: deserved 10/20/30.
        let queues = (1..=3)
            .map(|w| {
                busy(
                    QueueSpec {
                        weight: w,
                        ..spec(&format!("q{w}"))
                    },
                    0,
                    100,
                )
            })
            .collect();
        let mut s = QueueSession::new(&SchedulerConf::default(), gpus(60), queues);
        assert_eq!(s.policy(), QuotaPolicy::Proportion);
        let r = s.report();
        assert_eq!(r[0].deserved, Some(Resources::from_units([(GPU, 10)])));
        assert_eq!(r[2].deserved, Some(Resources::from_units([(GPU, 30)])));
        // q1 may take 10 but not 11.
        assert!(s.allocatable("q1", &gpus(10), &no_cards()).is_ok());
        let e = s.allocatable("q1", &gpus(11), &no_cards()).unwrap_err();
        assert_eq!(e.dimension, GPU);
        assert_eq!(
            e.to_string(),
            "queue \"q1\": nvidia.com/gpu would be 11 > deserved 10 (proportion)"
        );
        // After taking 10 it is overused and sorts after the others.
        s.allocate("q1", &gpus(10), &no_cards());
        assert!(s.overused("q1"));
        assert_eq!(s.ordered_queues(), vec!["q2", "q3", "q1"]);
        // proportion admits up to q3's realCapability 60, but overcommit looks at the
        // whole cluster: after q2 takes 20, idle = 60 × 1.2 − 10 − 20 = 42.
        s.allocate("q2", &gpus(20), &no_cards());
        assert_eq!(s.overcommit_idle(), Some(gpus(42)));
        let e = s.enqueueable("q3", &gpus(43)).unwrap_err();
        assert_eq!(e.plugin, "overcommit");
        assert_eq!(
            e.to_string(),
            "queue \"q3\": nvidia.com/gpu would be 43 > idle 42 at overcommit factor 1.2 (overcommit)"
        );
        assert!(s.enqueueable("q3", &gpus(42)).is_ok());
        // Admitted jobs count against idle: after 40 more in queue, 3 is too much.
        s.mark_inqueue("q3", &gpus(40));
        assert_eq!(
            s.enqueueable("q3", &gpus(3)).unwrap_err().plugin,
            "overcommit"
        );
        let e = s.enqueueable("q3", &gpus(30)).unwrap_err();
        assert_eq!(
            e.plugin, "proportion",
            "40 in queue + 30 > realCapability 60"
        );
    }

    #[test]
    fn capability_rejects_with_the_named_dimension_and_missing_dimensions_are_unlimited() {
        let team = QueueSpec {
            capability: Some(Resources::from_units([(GPU, 8)])),
            ..spec("team-a")
        };
        let s = QueueSession::new(
            &conf(CAPACITY),
            Resources::from_units([(GPU, 64), ("cpu", 256)]),
            vec![busy(team, 6, 6)],
        );
        let e = s.allocatable("team-a", &gpus(4), &no_cards()).unwrap_err();
        assert_eq!(e.dimension, GPU);
        assert_eq!(
            e.to_string(),
            "queue \"team-a\": nvidia.com/gpu would be 10 > capability 8 (capacity)"
        );
        // cpu is not in the capability: unlimited up to the cluster's 256.
        assert!(
            s.allocatable(
                "team-a",
                &Resources::from_units([("cpu", 200), (GPU, 2)]),
                &no_cards()
            )
            .is_ok()
        );
        let e = s
            .allocatable(
                "team-a",
                &Resources::from_units([("cpu", 300)]),
                &no_cards(),
            )
            .unwrap_err();
        assert_eq!(e.dimension, "cpu");
        // gpumem is in neither: unlimited.
        assert!(
            s.allocatable(
                "team-a",
                &Resources::from_units([("nvidia.com/gpumem", 80_000)]),
                &no_cards()
            )
            .is_ok()
        );
        // Enqueue: min 4 + allocated 6 = 10 > 8.
        let e = s.enqueueable("team-a", &gpus(4)).unwrap_err();
        assert_eq!(e.message, "nvidia.com/gpu would be 10 > capability 8");
        assert!(
            s.enqueueable("team-a", &Resources::new()).is_ok(),
            "no minResources: admitted"
        );
    }

    #[test]
    fn unknown_and_closed_queues() {
        let closed = QueueSpec {
            state: QueueState::Closed,
            ..spec("old")
        };
        let s = QueueSession::new(&conf(CAPACITY), gpus(8), vec![QueueInput::idle(closed)]);
        let e = s.enqueueable("nope", &gpus(1)).unwrap_err();
        assert_eq!(e.dimension, "queue");
        assert_eq!(e.to_string(), "queue \"nope\" does not exist");
        let e = s.allocatable("old", &gpus(1), &no_cards()).unwrap_err();
        assert_eq!(e.dimension, "state");
        assert_eq!(
            e.to_string(),
            "queue \"old\": state is Closed, not Open (capacity)"
        );
        // Without a quota plugin the action refuses.
        let s = QueueSession::new(
            &conf("actions: enqueue\n"),
            gpus(8),
            vec![QueueInput::idle(QueueSpec {
                state: QueueState::Closing,
                ..spec("old")
            })],
        );
        assert_eq!(
            s.enqueueable("old", &gpus(1)).unwrap_err().plugin,
            "enqueue"
        );
        assert_eq!(s.policy(), QuotaPolicy::None);
        assert!(s.report()[0].deserved.is_none());
    }

    #[test]
    fn card_quota_rejects_per_card_key() {
        let conf = conf(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity-card\n  - name: proportion\n",
        );
        let team = QueueSpec {
            card_quota: BTreeMap::from([("NVIDIA-H200".to_owned(), 8)]),
            ..spec("team")
        };
        let input = QueueInput {
            allocated_cards: BTreeMap::from([("NVIDIA-H200-141GB-HBM3".to_owned(), 6)]),
            ..busy(team, 6, 20)
        };
        let mut s = QueueSession::new(&conf, gpus(32), vec![input]);
        let h200 = |n| BTreeMap::from([("NVIDIA-H200-141GB-HBM3".to_owned(), n)]);
        assert!(s.allocatable("team", &gpus(2), &h200(2)).is_ok());
        let e = s.allocatable("team", &gpus(3), &h200(3)).unwrap_err();
        assert_eq!(e.dimension, "card/NVIDIA-H200");
        assert_eq!(
            e.to_string(),
            "queue \"team\": card NVIDIA-H200 would be 9 > quota 8 (capacity-card)"
        );
        // Cards without a quota key are unlimited.
        let l4 = BTreeMap::from([("NVIDIA-L4".to_owned(), 50)]);
        assert!(s.allocatable("team", &gpus(1), &l4).is_ok());
        // Enqueue with card/<name> dimensions: 6 used + 3 requested > 8.
        let min = Resources::from_units([("card/NVIDIA-H200", 3), (GPU, 1)]);
        let e = s.enqueueable("team", &min).unwrap_err();
        assert_eq!(e.dimension, "card/NVIDIA-H200");
        let min2 = Resources::from_units([("card/NVIDIA-H200", 2), (GPU, 1)]);
        assert!(s.enqueueable("team", &min2).is_ok());
        // Once that job is in queue, its cards count too: 6 + 2 + 1 > 8.
        s.mark_inqueue("team", &min2);
        let min1 = Resources::from_units([("card/NVIDIA-H200", 1)]);
        assert_eq!(
            s.enqueueable("team", &min1).unwrap_err().dimension,
            "card/NVIDIA-H200"
        );
        assert_eq!(
            s.report()[0].card_used,
            BTreeMap::from([("NVIDIA-H200".to_owned(), 6)])
        );
    }

    #[test]
    fn hierarchy_limits_children_by_ancestors_and_breaks_cycles() {
        let conf = conf(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n",
        );
        let queues = vec![
            QueueInput::idle(spec("root")),
            QueueInput::idle(QueueSpec {
                capability: Some(gpus(10)),
                ..spec("org")
            }),
            busy(
                QueueSpec {
                    parent: Some("org".into()),
                    capability: Some(gpus(8)),
                    guarantee: Some(gpus(2)),
                    ..spec("team-a")
                },
                4,
                4,
            ),
            busy(
                QueueSpec {
                    parent: Some("org".into()),
                    guarantee: Some(gpus(3)),
                    ..spec("team-b")
                },
                3,
                3,
            ),
            QueueInput::idle(QueueSpec {
                parent: Some("loop-b".into()),
                ..spec("loop-a")
            }),
            QueueInput::idle(QueueSpec {
                parent: Some("loop-a".into()),
                ..spec("loop-b")
            }),
        ];
        let mut s = QueueSession::new(&conf, gpus(32), queues);
        // org: realCapability min(32, 10) = 10, allocated 4 + 3 = 7.
        // team-a: min((10 − 5) + 2, 8) = 7; team-b: (10 − 5) + 3 = 8.
        let report = s.report();
        let by_name = |n: &str| report.iter().find(|r| r.name == n).unwrap().clone();
        assert_eq!(by_name("org").allocated, gpus(7));
        assert_eq!(by_name("org").real_capability, Some(gpus(10)));
        assert_eq!(by_name("team-a").real_capability, Some(gpus(7)));
        assert_eq!(by_name("team-b").real_capability, Some(gpus(8)));
        // team-a: 4 + 3 = 7 ≤ 7, but org: 7 + 3 = 10 ≤ 10: fits.
        assert!(s.allocatable("team-a", &gpus(3), &no_cards()).is_ok());
        // team-b: 3 + 4 = 7 ≤ 8, but org: 7 + 4 = 11 > 10.
        let e = s.allocatable("team-b", &gpus(4), &no_cards()).unwrap_err();
        assert_eq!(
            e.message,
            "nvidia.com/gpu would be 11 > capability 10 of ancestor queue \"org\""
        );
        // Parents hold no jobs.
        assert_eq!(
            s.allocatable("org", &gpus(1), &no_cards())
                .unwrap_err()
                .dimension,
            "hierarchy"
        );
        // Allocation climbs the tree and is undone exactly.
        s.allocate("team-a", &gpus(3), &no_cards());
        assert_eq!(
            s.allocatable("team-b", &gpus(1), &no_cards())
                .unwrap_err()
                .dimension,
            GPU
        );
        s.deallocate("team-a", &gpus(3), &no_cards());
        assert_eq!(s.report(), report);
        // The cycle closes its two queues and nothing else.
        let e = s.enqueueable("loop-a", &gpus(1)).unwrap_err();
        assert_eq!(e.dimension, "state");
        assert!(e.message.contains("cycle"), "{e}");
        assert!(by_name("loop-b").state_reason.is_some());
        assert!(s.enqueueable("team-a", &gpus(1)).is_ok());
    }

    #[test]
    fn both_quota_plugins_let_capacity_decide() {
        let conf = conf(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: capacity\n",
        );
        let q = QueueSpec {
            deserved: Some(gpus(2)),
            ..spec("a")
        };
        let s = QueueSession::new(&conf, gpus(16), vec![busy(q, 1, 10)]);
        assert_eq!(s.policy(), QuotaPolicy::Capacity { hierarchy: false });
        assert_eq!(s.report()[0].deserved, Some(gpus(2)));
        // Capacity lets the queue grow past deserved up to the cluster.
        assert!(s.allocatable("a", &gpus(15), &no_cards()).is_ok());
        assert!(!s.overused("a"));
    }

    #[test]
    fn queue_order_is_priority_then_share_then_name() {
        let queues = vec![
            busy(spec("b"), 5, 10),
            busy(spec("a"), 5, 10),
            busy(
                QueueSpec {
                    priority: 10,
                    ..spec("z")
                },
                10,
                10,
            ),
            busy(spec("c"), 1, 10),
        ];
        // 30 GPUs, equal weights, each wants 10: deserved 10 each.
        let s = QueueSession::new(&SchedulerConf::default(), gpus(30), queues);
        // z first (priority); then c (share 0.1); then a, b (share 0.5, by name).
        assert_eq!(s.ordered_queues(), vec!["z", "c", "a", "b"]);
        assert_eq!(s.queue_order("a", "missing"), Ordering::Less);
    }

    fn arb_session() -> impl Strategy<Value = (String, QueueSession, Vec<(usize, i64, i64)>)> {
        let confs = prop_oneof![
            Just(String::from(
                "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: capacity-card\n"
            )),
            Just(String::from(
                "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n  - name: capacity-card\n"
            )),
            Just(String::from(
                "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n"
            )),
        ];
        (
            confs,
            proptest::collection::vec((1_u32..5, 0_i64..20_000, 0_i64..40_000, 0_i64..3), 1..5),
            proptest::collection::vec((0_usize..5, 0_i64..5_000, 0_i64..3), 1..8),
        )
            .prop_map(|(text, queues, ops)| {
                let inputs: Vec<QueueInput> = queues
                    .iter()
                    .enumerate()
                    .map(|(i, (w, alloc, extra, cards))| QueueInput {
                        spec: QueueSpec {
                            weight: *w,
                            parent: (i > 1).then(|| "q1".to_owned()),
                            card_quota: BTreeMap::from([("NVIDIA-A100".to_owned(), 4)]),
                            ..QueueSpec::new(format!("q{i}"))
                        },
                        allocated: Resources::from_milli([(GPU, *alloc), ("cpu", *alloc * 3)]),
                        request: Resources::from_milli([(GPU, alloc + extra), ("cpu", *alloc * 3)]),
                        inqueue: Resources::new(),
                        elastic: Resources::new(),
                        allocated_cards: BTreeMap::from([(
                            "NVIDIA-A100-SXM4-80GB".to_owned(),
                            *cards,
                        )]),
                    })
                    .collect();
                let total = Resources::from_units([(GPU, 64), ("cpu", 512)]);
                let session = QueueSession::new(&conf(&text), total, inputs);
                (text, session, ops)
            })
    }

    proptest! {
        #[test]
        fn allocate_then_deallocate_restores_every_report((_text, mut s, ops) in arb_session()) {
            let before = s.report();
            let names = s.ordered_queues();
            let mut done = Vec::new();
            for (q, amount, cards) in ops {
                let name = names[q % names.len()].clone();
                let r = Resources::from_milli([(GPU, amount), ("nvidia.com/gpumem", amount * 7)]);
                let c = BTreeMap::from([("NVIDIA-A100-SXM4-80GB".to_owned(), cards)]);
                s.allocate(&name, &r, &c);
                done.push((name, r, c));
            }
            for (name, r, c) in done.iter().rev() {
                s.deallocate(name, r, c);
            }
            prop_assert_eq!(s.report(), before);
        }
    }
}
