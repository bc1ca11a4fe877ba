//! The scheduler's side of gang and queue scheduling: the state it keeps, and one
//! file per concern: feeding the book from events (`feed`), running and committing
//! planning cycles (`cycle`), publishing plans onto pods (`publish`), evicting
//! victims (`evict`) and following plans that wait for them (`pipelined`),
//! priorities and disruption budgets (`policy_feed`), namespace ResourceQuotas
//! (`quota_feed`), PodGroup and
//! Queue status (`report`), the watchdog (`watchdog`), members pinned to a node
//! that no longer takes them (`broken_pins`), the `/filter` and `/bind`
//! hooks (`hooks`) and the loop that runs cycles (`driver`).

mod broken_pins;
mod cycle;
pub mod driver;
mod evict;
mod eviction_report;
mod feed;
mod filter_only_feed;
mod hooks;
#[cfg(test)]
mod job_cache_tests;
mod kept_queue_counts;
mod pins_without_room;
#[cfg(test)]
mod pins_without_room_tests;
mod pipelined;
mod policy_feed;
mod publish;
#[cfg(test)]
mod queueing_hints_tests;
mod quota_feed;
mod report;
#[cfg(test)]
mod room_taken_tests;
#[cfg(test)]
mod task_cache_tests;
mod topology_feed;
mod topology_view;
mod watchdog;

use crate::gang::GangView;
use crate::gang::barrier::Barriers;
use crate::gang::book::{GangBook, GangKey};
use crate::gang::filter_only::FilterOnlyPods;
use crate::gang::kept_state::KeptState;
use crate::gang::native_sources::NativeSources;
use crate::gang::planner_book::PlannerBook;
use crate::gang::queueing_hints::QueueingHints;
use crate::placement::NodeJudge;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::session_memory::SessionMemory;
use crate::volcano::framework::{GangVerdict, Tiers};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use arc_swap::ArcSwap;
use foldhash::{HashMap, HashSet, HashSetExt};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the planner remembers between cycles.
#[derive(Default)]
pub(crate) struct PlannerMemory {
    /// Gangs admitted by enqueue, not yet placed.
    inqueue: BTreeSet<GangKey>,
    /// Each PodGroup's status as last written (without timestamps), with the
    /// verdict it was written from: a PodGroup whose verdict is unchanged needs
    /// no status built.
    written_groups: HashMap<GangKey, (Arc<GangVerdict>, serde_json::Value)>,
    /// The verdicts the PodGroups' statuses were last brought up to: the next
    /// cycle looks only at the gangs whose verdict differs from these, and at
    /// `statuses_owed`.
    statuses_from: crate::volcano::framework::Verdicts,
    /// Gangs whose status is owed although their verdict may not change again:
    /// the write failed, or their PodGroup was not known yet.
    statuses_owed: BTreeSet<GangKey>,
    /// What each Queue's status said when last written (its allocation and
    /// PodGroup counts): a status is built only when they differ.
    written_queues: BTreeMap<
        String,
        (
            crate::resources::Resources,
            crate::gang::status::QueueCounts,
        ),
    >,
    /// Why each gang waited when its members were last told (events), in gang
    /// order like the verdicts, so that both are read side by side.
    told: BTreeMap<GangKey, String>,
    /// The verdicts `told` was last brought up to: the next cycle looks only
    /// at the gangs whose verdict differs from these.
    told_from: crate::volcano::framework::Verdicts,
    /// The evictions asked: when each victim was last asked, and the last few.
    evictions: evict::EvictionLog,
    /// The planner's copy of the book, brought up to date each cycle (locked
    /// only by the cycle that holds this memory).
    book: Mutex<PlannerBook>,
    /// Holdings, tasks and jobs kept from the last cycle (locked only by the
    /// cycle that holds this memory).
    kept: Mutex<KeptState>,
    /// Jobs allocate could not place and need not try until something changes
    /// (locked only by the cycle that holds this memory).
    hints: Mutex<QueueingHints>,
    /// What the last session over every job left for the next (plugins'
    /// figures, verdicts; locked only by the cycle that holds this memory).
    session: Mutex<SessionMemory>,
    /// The gangs of each queue by phase, with the verdicts they were counted
    /// from.
    queue_counts: kept_queue_counts::KeptQueueCounts,
}

/// The configuration in force and the plugins built from it, swapped together.
pub(crate) struct ConfInForce {
    /// The Volcano-format configuration.
    pub conf: SchedulerConf,
    /// Its plugins, for `/filter`'s predicates and node scores (sessions build
    /// their own).
    pub judge: Tiers,
}

impl ConfInForce {
    /// The plugins of `conf`, shown the Queues (plugins that judge nodes by queue
    /// derive their rules from them), without those that only repeat
    /// kube-scheduler's own filters.
    fn new(conf: SchedulerConf, queues: &BTreeMap<String, QueueSpec>) -> Self {
        let mut judge = registry::build(&conf).map(Tiers::for_filter).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "scheduler configuration does not build; filtering without plugins");
            registry::without_plugins()
        });
        judge.observe_queues(queues);
        Self { conf, judge }
    }
}

/// Gang state held by the scheduler.
pub(crate) struct GangState {
    book: RwLock<GangBook>,
    /// Held for a whole cycle (plan, commit, publish): one cycle at a time.
    planner: tokio::sync::Mutex<PlannerMemory>,
    view: RwLock<Arc<GangView>>,
    conf: ArcSwap<ConfInForce>,
    /// Pods whose plan is reserved and written on the pod (the plan `/filter`
    /// honours).
    planned: Mutex<HashSet<String>>,
    /// Members known only from `/filter` (see `filter_only`). Locked only while
    /// the book is write-locked, so a member and its being known only from
    /// `/filter` change together.
    filter_only: Mutex<FilterOnlyPods>,
    barriers: Barriers,
    wake: Arc<tokio::sync::Notify>,
    /// Kubernetes' own PodGroups and Workloads as served, to read a PodGroup
    /// again when its Workload changes. Locked before the book, never after.
    native_sources: Mutex<NativeSources>,
    /// Pinned members whose node has no room for them, since when.
    pins_without_room: Mutex<pins_without_room::PinsWithoutRoom>,
}

impl Default for GangState {
    fn default() -> Self {
        Self {
            book: RwLock::new(GangBook::default()),
            planner: tokio::sync::Mutex::new(PlannerMemory::default()),
            view: RwLock::new(Arc::new(GangView::default())),
            conf: ArcSwap::from_pointee(ConfInForce::new(
                SchedulerConf::default(),
                &BTreeMap::new(),
            )),
            planned: Mutex::new(HashSet::new()),
            filter_only: Mutex::new(FilterOnlyPods::default()),
            barriers: Barriers::default(),
            wake: Arc::new(tokio::sync::Notify::new()),
            native_sources: Mutex::new(NativeSources::default()),
            pins_without_room: Mutex::new(Default::default()),
        }
    }
}

/// What `/filter` should do with a gang or queue pod.
pub(crate) enum GangFilter {
    /// Not a gang matter: filter as usual.
    Usual,
    /// The plan puts the pod on this node.
    Planned(String),
    /// The gang cannot be placed now: this reason for every node.
    Wait(String),
}

impl crate::scheduler::Scheduler {
    /// Woken when gang pods, PodGroups or Queues change, so the planner runs soon.
    pub fn gang_wake(&self) -> Arc<tokio::sync::Notify> {
        self.gang.wake.clone()
    }

    /// Replaces the Volcano-format scheduler configuration (hot reload).
    pub fn set_gang_conf(&self, conf: SchedulerConf) {
        for note in conf.notes() {
            tracing::info!(note = %note, "scheduler configuration");
        }
        // Under the book's lock, so that a Queue change cannot slip between reading
        // the queues and storing the plugins built on them.
        let book = self.gang.book.read();
        self.gang
            .conf
            .store(Arc::new(ConfInForce::new(conf, &book.queues)));
    }

    /// Rebuilds `/filter`'s plugins on the Queues as `book` has them now (call with
    /// the book locked, after a Queue changed).
    fn queues_changed(&self, book: &GangBook) {
        let conf = self.gang.conf.load().conf.clone();
        self.gang
            .conf
            .store(Arc::new(ConfInForce::new(conf, &book.queues)));
    }

    /// The queue `/filter`'s plugins judge the pod by: its PodGroup's queue, or the
    /// queue it names; `None` for a pod outside queue scheduling.
    pub(crate) fn queue_of_pod(&self, pod: &k8s_openapi::api::core::v1::Pod) -> Option<String> {
        if !self.config.gang.enabled {
            return None;
        }
        let member = crate::gang::book::member_key(pod)?;
        Some(
            self.gang
                .book
                .read()
                .queue_of(&member.gang, member.membership.queue.as_deref()),
        )
    }

    /// The plugins' predicates and node scores in force, for `/filter`.
    pub(crate) fn node_judge(&self) -> arc_swap::Guard<Arc<ConfInForce>> {
        self.gang.conf.load()
    }

    /// The last cycle's picture.
    pub fn gang_view(&self) -> Arc<GangView> {
        self.gang.view.read().clone()
    }
}

impl ConfInForce {
    /// The plugins as a node judge.
    pub fn judge(&self) -> &dyn NodeJudge {
        &self.judge
    }
}

/// Runs CPU-heavy work (a planning session: over 100 gangs at 5,000 nodes it takes
/// a good part of a second) without stalling the tasks queued on this worker (on the
/// background runtime: the watches): on a multi-threaded runtime the worker hands
/// its queue to another thread meanwhile.
fn off_the_workers<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}
