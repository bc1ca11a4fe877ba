//! The configured plugins, tier by tier, and how their answers combine (Volcano's
//! rules):
//!
//! - **Orders** (job, task, queue): the first plugin, in tier order, whose answer is
//!   not "equal" decides; the caller breaks remaining ties.
//! - **Votes** (enqueueable, pipelined): any rejection refuses; otherwise a tier in
//!   which some plugin permits decides "yes" and later tiers are not asked; with no
//!   opinion at all the answer is "yes".
//! - **Victims** (preemptable, reclaimable, victim tasks): within a tier the
//!   deciding plugins' victims are intersected (a plugin that allows none ends the
//!   tier with none); the first tier in which some plugin decided gives the answer,
//!   even when it is "none"; with no decision there are no victims. (Volcano moves
//!   on to the next tier when a tier's answer is empty, so a lower tier could
//!   offer a victim a higher one refused; here a refusal stands.)
//! - **Checks** (allocatable, preemptive, job valid, job ready, predicates): every
//!   plugin must agree; the first refusal is the answer.
//! - **Job starving**: the first tier with a plugin that has an opinion decides,
//!   and every such plugin in it must say yes.
//! - **Overused**: any plugin saying so.
//! - **Node scores**: summed.
//!
//! An entry's `enableXxx: false` takes that plugin out of that point only.

use super::gang_eviction::GangEviction;
use super::job::{JobInfo, TaskInfo};
use super::plugin::{JobInvalid, KeptFigures, Plugin, TaskEvent, Vote};
use super::queue::QueueInfo;
use super::rejection::Rejection;
use super::report::QueueReport;
use super::state::SessionState;
use super::victims::EvictionGuard;
use crate::placement::{NodeFacts, NodeJudge, TaskFacts};
use crate::volcano::conf::{ExtensionPoint, PluginOption, SWITCHES};
use crate::volcano::objects::QueueSpec;
use std::cmp::Ordering;
use std::sync::Arc;

/// One configured plugin.
#[derive(Debug)]
pub struct Slot {
    /// The plugin.
    pub plugin: Box<dyn Plugin>,
    /// Its entry in the configuration (switches).
    pub option: Arc<PluginOption>,
    /// Which extension points are switched off (bit per point), read once: the
    /// node choice asks thousands of times per filter.
    off: u32,
}

impl Slot {
    /// A plugin with its configuration entry.
    pub fn new(plugin: Box<dyn Plugin>, option: impl Into<Arc<PluginOption>>) -> Self {
        let option = option.into();
        let off = SWITCHES
            .iter()
            .filter(|(_, point)| !option.switched_on(*point))
            .fold(0u32, |bits, (_, point)| bits | bit(*point));
        Self {
            plugin,
            option,
            off,
        }
    }

    fn on(&self, point: ExtensionPoint) -> bool {
        self.off & bit(point) == 0
    }
}

fn bit(point: ExtensionPoint) -> u32 {
    1 << (point as u32)
}

/// What each plugin kept from a session, in tier order, with the configuration
/// entry the plugin was built from: only a plugin built from an equal entry may
/// reuse it, so a reloaded configuration that changes a plugin's arguments or
/// switches has it derive everything again, whatever its figures depend on.
pub type KeptByPlugin = Vec<(Arc<PluginOption>, Option<Box<dyn KeptFigures>>)>;

/// The plugins, tier by tier.
#[derive(Debug, Default)]
pub struct Tiers {
    tiers: Vec<Vec<Slot>>,
    /// Some plugin has a predicate switched on.
    filters: bool,
    /// Some plugin has a node score switched on.
    scores: bool,
    /// Rules on victims the plugins registered to hold whatever is listed.
    eviction_guards: &'static [EvictionGuard],
}

impl Tiers {
    /// Tiers from built plugins.
    pub fn new(tiers: Vec<Vec<Slot>>) -> Self {
        let all = || tiers.iter().flatten();
        let filters = all().any(|s| s.on(ExtensionPoint::Predicate) && s.plugin.filters_nodes());
        let scores = all().any(|s| s.on(ExtensionPoint::NodeOrder) && s.plugin.scores_nodes());
        Self {
            tiers,
            filters,
            scores,
            eviction_guards: &[],
        }
    }

    /// The same tiers with `guards` in force: rules on victims that hold even
    /// where no listed plugin expresses them.
    pub fn with_eviction_guards(mut self, guards: &'static [EvictionGuard]) -> Self {
        self.eviction_guards = guards;
        self
    }

    /// Whether every eviction guard lets this task be evicted.
    pub fn guards_let_evict(&self, task: &TaskInfo) -> bool {
        self.eviction_guards.iter().all(|guard| guard(task))
    }

    /// The tiers `/filter` judges nodes with: without the plugins that only
    /// repeat kube-scheduler's own filters and scores (see
    /// [`Plugin::planner_only`]).
    pub fn for_filter(self) -> Self {
        let guards = self.eviction_guards;
        Self::new(
            self.tiers
                .into_iter()
                .map(|tier| {
                    tier.into_iter()
                        .filter(|s| !s.plugin.planner_only())
                        .collect()
                })
                .collect(),
        )
        .with_eviction_guards(guards)
    }

    /// Every plugin in order.
    pub fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.tiers.iter().flatten()
    }

    fn slots_on(&self, point: ExtensionPoint) -> impl Iterator<Item = &Slot> {
        self.slots().filter(move |s| s.on(point))
    }

    /// Names of the plugins in force, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.slots().map(|s| s.plugin.name()).collect()
    }

    /// Lets every plugin derive what it keeps from a freshly opened session.
    pub fn open(&mut self, state: &SessionState) {
        for slot in self.tiers.iter_mut().flatten() {
            slot.plugin.open(state);
        }
    }

    /// What every plugin kept from the session that opened them (see
    /// [`Plugin::keep`]), with the entry each was built from, in tier order.
    pub fn keep(&mut self) -> KeptByPlugin {
        self.tiers
            .iter_mut()
            .flatten()
            .map(|slot| (slot.option.clone(), slot.plugin.keep()))
            .collect()
    }

    /// Hands every plugin what the plugin at the same place, built from an
    /// equal configuration entry (name, arguments and switches), kept from the
    /// last session; a configuration that lists other plugins, or the same ones
    /// with other arguments or switches, leaves them to derive everything again.
    pub fn reuse(&mut self, kept: KeptByPlugin) {
        if self.tiers.iter().map(Vec::len).sum::<usize>() != kept.len() {
            return;
        }
        for (slot, (built_from, figures)) in self.tiers.iter_mut().flatten().zip(kept) {
            if let Some(figures) = figures
                && slot.option == built_from
            {
                slot.plugin.reuse(figures);
            }
        }
    }

    /// Shows every plugin the Queues as they are now (for the plugins `/filter`
    /// consults; see [`Plugin::observe_queues`]).
    pub fn observe_queues(&mut self, queues: &std::collections::BTreeMap<String, QueueSpec>) {
        for slot in self.tiers.iter_mut().flatten() {
            slot.plugin.observe_queues(queues);
        }
    }

    /// First non-equal answer of the job-order plugins.
    pub fn job_order(&self, state: &SessionState, a: &JobInfo, b: &JobInfo) -> Ordering {
        first_unequal(
            self.slots_on(ExtensionPoint::JobOrder)
                .map(|s| s.plugin.job_order(state, a, b)),
        )
    }

    /// First non-equal answer of the task-order plugins.
    pub fn task_order(&self, a: &TaskInfo, b: &TaskInfo) -> Ordering {
        first_unequal(
            self.slots_on(ExtensionPoint::TaskOrder)
                .map(|s| s.plugin.task_order(a, b)),
        )
    }

    /// First non-equal answer of the queue-order plugins.
    pub fn queue_order(&self, state: &SessionState, a: &QueueInfo, b: &QueueInfo) -> Ordering {
        first_unequal(
            self.slots_on(ExtensionPoint::QueueOrder)
                .map(|s| s.plugin.queue_order(state, a, b)),
        )
    }

    /// The first plugin that finds the job invalid.
    pub fn job_valid(&self, state: &SessionState, job: &JobInfo) -> Result<(), JobInvalid> {
        for s in self.slots() {
            s.plugin.job_valid(state, job)?;
        }
        Ok(())
    }

    /// Whether every plugin with an opinion finds the job ready (yes without one).
    pub fn job_ready(&self, job: &JobInfo) -> bool {
        self.slots_on(ExtensionPoint::JobReady)
            .all(|s| s.plugin.job_ready(job) != Some(false))
    }

    /// Whether the job is pipelined (vote).
    pub fn job_pipelined(&self, job: &JobInfo) -> bool {
        self.vote(ExtensionPoint::JobPipelined, |p| p.job_pipelined(job))
            .is_ok()
    }

    /// Whether the job still wants more (see the module documentation).
    pub fn job_starving(&self, job: &JobInfo) -> bool {
        for tier in &self.tiers {
            let mut found = false;
            for s in tier.iter().filter(|s| s.on(ExtensionPoint::JobStarving)) {
                match s.plugin.job_starving(job) {
                    None => {}
                    Some(false) => return false,
                    Some(true) => found = true,
                }
            }
            if found {
                return true;
            }
        }
        false
    }

    /// Whether the job may be admitted (vote); the first rejection says why not.
    pub fn job_enqueueable(&self, state: &SessionState, job: &JobInfo) -> Result<(), Rejection> {
        self.vote(ExtensionPoint::JobEnqueued, |p| {
            p.job_enqueueable(state, job)
        })
    }

    /// Tells the plugins that the job was admitted.
    pub fn job_enqueued(&mut self, state: &SessionState, job: &JobInfo) {
        for s in self
            .tiers
            .iter_mut()
            .flatten()
            .filter(|s| s.on(ExtensionPoint::JobEnqueued))
        {
            s.plugin.job_enqueued(state, job);
        }
    }

    fn vote<'a>(
        &'a self,
        point: ExtensionPoint,
        ask: impl Fn(&'a dyn Plugin) -> Vote,
    ) -> Result<(), Rejection> {
        for tier in &self.tiers {
            let mut permitted = false;
            for s in tier.iter().filter(|s| s.on(point)) {
                match ask(s.plugin.as_ref()) {
                    Vote::Abstain => {}
                    Vote::Permit => permitted = true,
                    Vote::Reject(why) => return Err(why),
                }
            }
            if permitted {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Whether the task may be placed in its queue: every plugin must agree.
    pub fn allocatable(
        &self,
        state: &SessionState,
        queue: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        for s in self.slots_on(ExtensionPoint::Allocatable) {
            s.plugin.allocatable(state, queue, task)?;
        }
        Ok(())
    }

    /// Whether any plugin finds the queue overused.
    pub fn overused(&self, state: &SessionState, queue: &QueueInfo) -> bool {
        self.slots_on(ExtensionPoint::Overused)
            .any(|s| s.plugin.overused(state, queue))
    }

    /// Whether the queue may reclaim for the task: every plugin must agree.
    pub fn preemptive(
        &self,
        state: &SessionState,
        queue: &QueueInfo,
        task: &TaskInfo,
    ) -> Result<(), Rejection> {
        for s in self.slots_on(ExtensionPoint::Preemptive) {
            s.plugin.preemptive(state, queue, task)?;
        }
        Ok(())
    }

    /// Victims the preemptor may evict (UIDs, in candidate order).
    pub fn preemptable(
        &self,
        state: &SessionState,
        preemptor: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Vec<String> {
        self.victims(ExtensionPoint::Preemptable, |p| {
            p.preemptable(state, preemptor, candidates)
        })
    }

    /// Victims the reclaimer may evict (UIDs, in candidate order).
    pub fn reclaimable(
        &self,
        state: &SessionState,
        reclaimer: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Vec<String> {
        self.victims(ExtensionPoint::Reclaimable, |p| {
            p.reclaimable(state, reclaimer, candidates)
        })
    }

    /// Victims the gang eviction actions may evict (UIDs, in candidate order), as
    /// Volcano combines its unified evictable hook: within a tier the answering
    /// plugins' victims are intersected, a plugin allowing none ends the tier with
    /// none, and the first tier left with some victims gives them; otherwise none.
    /// No switch takes a plugin out of it.
    pub fn gang_evictable(
        &self,
        state: &SessionState,
        eviction: &GangEviction<'_>,
        candidates: &[&TaskInfo],
    ) -> Vec<String> {
        for tier in &self.tiers {
            let mut victims: Option<Vec<String>> = None;
            for s in tier {
                let Some(allowed) = s.plugin.gang_evictable(state, eviction, candidates) else {
                    continue;
                };
                if allowed.is_empty() {
                    victims = None;
                    break;
                }
                victims = Some(match victims {
                    None => allowed,
                    Some(v) => v.into_iter().filter(|u| allowed.contains(u)).collect(),
                });
            }
            if let Some(v) = victims {
                return v;
            }
        }
        Vec::new()
    }

    /// How many HyperNodes the gang eviction actions search for a hard-constrained
    /// gang: the answer of the first plugin with HyperNode gradients switched on
    /// that has gradients (Volcano asks only that one); `None` when none has.
    pub fn eviction_hyper_nodes(&self) -> Option<usize> {
        self.slots_on(ExtensionPoint::HyperNodeGradient)
            .find_map(|s| s.plugin.eviction_hyper_nodes())
    }

    /// First non-equal answer of the plugins on which victim queue goes first.
    pub fn victim_queue_order(
        &self,
        state: &SessionState,
        a: &str,
        b: &str,
        preemptor: &str,
    ) -> Ordering {
        first_unequal(
            self.slots()
                .map(|s| s.plugin.victim_queue_order(state, a, b, preemptor)),
        )
    }

    /// Tasks plugins want evicted on their own account.
    pub fn victim_tasks(&self, state: &SessionState) -> Vec<String> {
        self.victims(ExtensionPoint::Victim, |p| p.victim_tasks(state))
    }

    fn victims<'a>(
        &'a self,
        point: ExtensionPoint,
        ask: impl Fn(&'a dyn Plugin) -> Option<Vec<String>>,
    ) -> Vec<String> {
        for tier in &self.tiers {
            let mut decided: Option<Vec<String>> = None;
            for s in tier.iter().filter(|s| s.on(point)) {
                let Some(candidates) = ask(s.plugin.as_ref()) else {
                    continue;
                };
                if candidates.is_empty() {
                    decided = Some(Vec::new());
                    break;
                }
                decided = Some(match decided {
                    None => candidates,
                    Some(victims) => victims
                        .into_iter()
                        .filter(|v| candidates.contains(v))
                        .collect(),
                });
            }
            if let Some(victims) = decided {
                return victims;
            }
        }
        Vec::new()
    }

    /// The plugins' summed scores of the HyperNodes a job could be placed in, one
    /// per candidate.
    pub fn hyper_node_order(
        &self,
        state: &SessionState,
        job: &JobInfo,
        candidates: &[&str],
    ) -> Vec<f64> {
        let mut sum = vec![0.0; candidates.len()];
        for s in self.slots_on(ExtensionPoint::HyperNodeOrder) {
            let scores = s.plugin.hyper_node_order(state, job, candidates);
            for (total, score) in sum.iter_mut().zip(scores) {
                *total += score;
            }
        }
        sum
    }

    /// Tells the plugins a task was placed.
    pub fn on_allocate(&mut self, state: &SessionState, event: &TaskEvent<'_>) {
        for s in self.tiers.iter_mut().flatten() {
            s.plugin.on_allocate(state, event);
        }
    }

    /// Tells the plugins a placement was taken back.
    pub fn on_deallocate(&mut self, state: &SessionState, event: &TaskEvent<'_>) {
        for s in self.tiers.iter_mut().flatten() {
            s.plugin.on_deallocate(state, event);
        }
    }

    /// Lets every plugin add what it derives about the queue to its report.
    pub fn describe_queue(
        &self,
        state: &SessionState,
        queue: &QueueInfo,
        report: &mut QueueReport,
    ) {
        for s in self.slots() {
            s.plugin.describe_queue(state, queue, report);
        }
    }

    /// Every plugin's remarks.
    pub fn notes(&self) -> Vec<String> {
        self.slots().flat_map(|s| s.plugin.notes()).collect()
    }
}

impl NodeJudge for Tiers {
    fn filters(&self) -> bool {
        self.filters
    }

    fn scores(&self) -> bool {
        self.scores
    }

    fn scores_task(&self, task: &TaskFacts<'_>) -> bool {
        self.scores
            && self
                .slots_on(ExtensionPoint::NodeOrder)
                .any(|s| s.plugin.scores_nodes() && s.plugin.scores_task(task))
    }

    fn predicate(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> Result<(), String> {
        for s in self.slots_on(ExtensionPoint::Predicate) {
            s.plugin.predicate(task, node)?;
        }
        Ok(())
    }

    fn score(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        self.slots_on(ExtensionPoint::NodeOrder)
            .map(|s| s.plugin.node_order(task, node))
            .sum()
    }

    fn pod_affinity_weight(&self) -> f64 {
        if !self.scores {
            return 0.0;
        }
        self.slots_on(ExtensionPoint::NodeOrder)
            .map(|s| s.plugin.pod_affinity_weight())
            .sum()
    }
}

fn first_unequal(answers: impl Iterator<Item = Ordering>) -> Ordering {
    answers
        .into_iter()
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}
