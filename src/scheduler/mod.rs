//! The scheduler core: the ledger plus the extender verbs. Decisions are pure
//! functions of the ledger and the pod (see `fit` and `policy`); this module does the
//! atomic check-and-reserve and hands writes to the cluster API.

#[cfg(test)]
mod admission_tests;
mod bind;
mod bind_patch;
mod binding_labels;
mod busy_nodes;
mod candidate_nodes;
#[cfg(test)]
mod card_quota_mig_tests;
pub mod claims;
mod debug_state;
#[cfg(test)]
mod deleted_members_tests;
#[cfg(test)]
mod event_order_tests;
mod events;
mod filter;
#[cfg(test)]
mod filter_only_tests;
#[cfg(test)]
mod forgetting_tests;
pub(crate) mod gang;
#[cfg(test)]
mod gang_invariant_tests;
#[cfg(test)]
mod gang_tests;
#[cfg(test)]
mod invariant_tests;
#[cfg(test)]
mod lock_handoff_tests;
mod lock_turns;
mod mig_claims;
#[cfg(test)]
mod mig_invariant_tests;
#[cfg(test)]
mod mig_tests;
mod namespaces;
pub mod node_metrics;
#[cfg(test)]
mod nodegroup_tests;
#[cfg(test)]
mod placement_tests;
mod pod_copies;
#[cfg(test)]
mod podgroup_before_pods_tests;
#[cfg(test)]
mod podgroup_recreated_tests;
mod pods_node_lock;
#[cfg(test)]
mod predicate_tests;
#[cfg(test)]
mod prioritize_pod_affinity_tests;
#[cfg(test)]
mod reason_wording_tests;
#[cfg(test)]
mod reclaim_invariant_tests;
#[cfg(test)]
mod reclaim_tests;
pub mod registration;
mod trace_hooks;
#[cfg(test)]
mod trace_tests;
pub mod tracking;
#[cfg(test)]
mod usage_tests;
mod yielding_reservations;

pub use crate::fit::PodContext;
pub use crate::gang::GangView;
pub use events::PlacementEvents;

use crate::clock::SharedClock;
use crate::cluster::api::{ClusterApi, MetadataPatch};
use crate::cluster::file::ClusterObjects;
use crate::device::device_config::NvidiaConfig;
use crate::freshness::LocalMark;
use crate::ledger::{Ledger, PodPhase, QuotaLimits};
use crate::metrics::Metrics;
use crate::object_namespace::namespace_of;
use crate::policy::{GpuPolicy, NodePolicy};
use crate::quantity::{quantity_to_count, quantity_to_mib};
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use parking_lot::{Mutex, RwLock};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How `/filter` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterMode {
    /// HAMi's way: choose one node and its GPUs in `/filter` and reserve them.
    #[default]
    Single,
    /// Return every fitting node, score them in `/prioritize`, pick GPUs in `/bind`.
    All,
}

/// Scheduler settings (from flags).
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Our scheduler name (event source).
    pub scheduler_name: String,
    /// Default node policy.
    pub node_policy: NodePolicy,
    /// Default GPU policy.
    pub gpu_policy: GpuPolicy,
    /// Resource names and request defaults.
    pub nvidia: NvidiaConfig,
    /// Filter mode.
    pub filter_mode: FilterMode,
    /// How long a `/filter` reservation waits for its `/bind`.
    pub reservation_ttl: Duration,
    /// Age after which a node lock is taken over.
    pub node_lock_timeout: Duration,
    /// Where the one-pod-at-a-time handoff to the device plugin is kept
    /// (`--node-lock`).
    pub node_lock: crate::node_lock::mode::NodeLockMode,
    /// How long `/bind` waits for a node lock held by another pod.
    pub node_lock_retry_timeout: Duration,
    /// Points of the node policy's preference a pod may give up to avoid a node
    /// busy with a bind (`None`: never; see `busy_nodes`).
    pub busy_node_tolerance: Option<f64>,
    /// Judge device plugin liveness from the handshake and allocatable GPUs (live
    /// clusters; a cluster file is a static picture).
    pub check_device_plugin_health: bool,
    /// Gang and queue scheduling.
    pub gang: GangConfig,
    /// Scheduler names of pods placed before a migration (HAMi's), whose device
    /// annotations the ledger books like those of our own pods (see `claims`).
    pub previous_schedulers: Vec<String>,
    /// Which placement events are recorded (`--placement-events`).
    pub placement_events: PlacementEvents,
}

/// Default of `--busy-node-tolerance`.
pub const DEFAULT_BUSY_NODE_TOLERANCE: f64 = 10.0;

/// Gang and queue scheduling settings.
#[derive(Debug, Clone)]
pub struct GangConfig {
    /// Whether gang and queue pods are planned (off: they are placed one by one).
    pub enabled: bool,
    /// How long a planned member's GPUs wait for its bind; a gang not started by
    /// then is released (and its started members evicted).
    pub timeout: Duration,
    /// Whether every gang waits at `/bind` for minMember members (PodGroups can
    /// override with `vgpu-scheduler.io/gang-strict`).
    pub strict: bool,
    /// How long a strict member waits at `/bind`; keep it under the extender's
    /// `httpTimeout` for the bind verb.
    pub strict_wait: Duration,
    /// How many pods known only from `/filter` are kept, and for how long.
    pub filter_only: crate::gang::filter_only::FilterOnlyLimits,
}

impl Default for GangConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: Duration::from_secs(300),
            strict: false,
            strict_wait: Duration::from_secs(25),
            filter_only: Default::default(),
        }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            scheduler_name: "vgpu-scheduler".into(),
            node_policy: NodePolicy::Binpack,
            gpu_policy: GpuPolicy::default(),
            nvidia: NvidiaConfig::default(),
            filter_mode: FilterMode::Single,
            reservation_ttl: Duration::from_secs(120),
            node_lock_timeout: Duration::from_secs(300),
            node_lock: Default::default(),
            node_lock_retry_timeout: Duration::from_secs(20),
            busy_node_tolerance: Some(DEFAULT_BUSY_NODE_TOLERANCE),
            check_device_plugin_health: false,
            gang: GangConfig::default(),
            previous_schedulers: vec!["hami-scheduler".into()],
            placement_events: PlacementEvents::default(),
        }
    }
}

/// The scheduler.
pub struct Scheduler {
    config: SchedulerConfig,
    ledger: RwLock<Ledger>,
    api: Arc<dyn ClusterApi>,
    metrics: Arc<Metrics>,
    lock_handoff: crate::node_lock::handoff::LockHandoff,
    /// Pods between their bind and the device plugin's answer, under
    /// `--node-lock pods`.
    allocating_pods: crate::node_lock::allocating_pods::AllocatingPods,
    last_prune: Mutex<Instant>,
    gang: gang::GangState,
    claims: claims::Conflicts,
    clock: SharedClock,
    /// Where what the scheduler sees is recorded (`serve --record-trace`), once
    /// set.
    trace: std::sync::OnceLock<Arc<crate::trace::TraceRecorder>>,
    /// Events recorded lately, so a repeat is not written again.
    recent_events: events::RecentEvents,
    /// The pods `/filter` was sent, for their `/bind`.
    pod_copies: pod_copies::PodCopies,
    /// Pods bound with the `hami.io/vgpu-node` label on their Binding, until the
    /// watch shows whether the label reached them.
    binding_labels: binding_labels::BindingLabels,
}

impl Scheduler {
    /// A scheduler over `api`, with an empty ledger, on the system clock.
    pub fn new(config: SchedulerConfig, api: Arc<dyn ClusterApi>, metrics: Arc<Metrics>) -> Self {
        Self::with_clock(config, api, metrics, crate::clock::system())
    }

    /// A scheduler over `api`, with an empty ledger, reading time from `clock`.
    pub fn with_clock(
        config: SchedulerConfig,
        api: Arc<dyn ClusterApi>,
        metrics: Arc<Metrics>,
        clock: SharedClock,
    ) -> Self {
        Self {
            config,
            ledger: RwLock::new(Ledger::with_clock(clock.clone())),
            api,
            metrics,
            lock_handoff: Default::default(),
            allocating_pods: Default::default(),
            last_prune: Mutex::new(clock.now()),
            gang: gang::GangState::default(),
            claims: claims::Conflicts::default(),
            clock,
            trace: std::sync::OnceLock::new(),
            recent_events: Default::default(),
            pod_copies: Default::default(),
            binding_labels: Default::default(),
        }
    }

    /// Where the scheduler's time comes from.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Settings in force.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Read access to the ledger (metrics, debug dump, tests).
    pub fn with_ledger<T>(&self, f: impl FnOnce(&Ledger) -> T) -> T {
        f(&self.ledger.read())
    }

    #[cfg(test)]
    pub(crate) fn with_ledger_mut<T>(&self, f: impl FnOnce(&mut Ledger) -> T) -> T {
        f(&mut self.ledger.write())
    }

    /// Loads nodes, pods and quotas (a cluster file, or a full resync).
    pub fn load(&self, objects: &ClusterObjects) {
        for namespace in &objects.namespaces {
            self.apply_namespace(namespace);
        }
        for node in &objects.nodes {
            self.apply_node(node);
        }
        for quota in &objects.quotas {
            self.apply_quota(quota);
        }
        for queue in &objects.queues {
            self.apply_queue(queue);
        }
        for group in &objects.podgroups {
            self.apply_any_podgroup(group);
        }
        for workload in &objects.workloads {
            self.apply_workload(workload);
        }
        for class in &objects.priority_classes {
            self.apply_priority_class(class);
        }
        for budget in &objects.budgets {
            self.apply_disruption_budget(budget);
        }
        for metrics in &objects.node_metrics {
            self.apply_node_metrics(metrics);
        }
        for pod in &objects.pods {
            self.apply_pod(pod);
        }
    }

    /// Applies one object of a cluster file (the store that keeps the file's
    /// nodes and pods is the caller's).
    pub fn apply_cluster_object(&self, object: &crate::cluster::file::ClusterObject) {
        use crate::cluster::file::ClusterObject;
        match object {
            ClusterObject::Node(node) => self.apply_node(node),
            ClusterObject::Pod(pod) => self.apply_pod(pod),
            ClusterObject::Quota(quota) => self.apply_quota(quota),
            ClusterObject::PodGroup(group) => self.apply_any_podgroup(group),
            ClusterObject::Workload(workload) => self.apply_workload(workload),
            ClusterObject::Queue(queue) => self.apply_queue(queue),
            ClusterObject::PriorityClass(class) => self.apply_priority_class(class),
            ClusterObject::DisruptionBudget(budget) => self.apply_disruption_budget(budget),
            ClusterObject::HyperNode(hyper_node) => self.apply_hyper_node(hyper_node),
            ClusterObject::NodeMetrics(metrics) => self.apply_node_metrics(metrics),
            ClusterObject::Namespace(namespace) => self.apply_namespace(namespace),
        }
    }

    /// Registers or refreshes a node from its annotations.
    pub fn apply_node(&self, node: &Node) {
        let Some(name) = node.metadata.name.as_deref() else {
            return;
        };
        self.lock_handoff.observe_node(
            name,
            node.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::annotations::NODE_LOCK))
                .map(String::as_str),
            node.metadata.resource_version.as_deref(),
            self.clock.now(),
        );
        let mut ledger = self.ledger.write();
        let mut entry = registration::node_entry(node, ledger.node(name));
        entry.source_version = node.metadata.resource_version.as_deref().map(Box::from);
        if self.config.check_device_plugin_health {
            let ready = registration::device_plugin_ready(
                node,
                &self.config.nvidia.resource_count_name,
                self.clock
                    .wall()
                    .with_timezone(&chrono::Local)
                    .naive_local(),
            );
            registration::apply_health(&mut entry, ready);
        }
        ledger.upsert_node(name, entry);
        let load = ledger.load_mut();
        load.set_allocatable(name, crate::node_load::allocatable_of(node));
        load.set_traits_of(name, node);
    }

    /// Applies a pod as a watch event shows it (events of one pod arrive in order).
    /// See `freshness` for why an event may be ignored.
    pub fn apply_pod(&self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        self.trace_pod_event(pod);
        self.pod_copies.refresh(pod);
        self.ledger
            .write()
            .load_mut()
            .set_pod(&uid, crate::node_load::occupancy_of(pod));
        self.gang_apply_pod(pod);
        self.nudge_lock_of_answered_pod(pod);
        self.follow_allocating_pod(pod);
        self.label_if_binding_did_not(pod);
        let finished = tracking::pod_finished(pod);
        let parsed = match tracking::pod_entry(pod, self.config.reservation_ttl, &*self.clock) {
            Ok(parsed) => parsed,
            Err(e) => {
                tracing::warn!(
                    pod = %format!("{}/{}", namespace_of(&pod.metadata), pod.metadata.name.as_deref().unwrap_or("")),
                    error = %e,
                    "ignoring pod with malformed device annotations"
                );
                return;
            }
        };
        let now = self.clock.now();
        let mut ledger = self.ledger.write();
        if ledger.meta(&uid).is_some_and(|m| m.finished) {
            return;
        }
        if finished {
            ledger.mark_finished(&uid);
            self.wake_for_booked_plans(&ledger);
            return;
        }
        ledger.heard_of(&uid);
        let mark = ledger.meta(&uid).and_then(|m| m.active_mark(now)).cloned();
        if parsed.is_none() {
            if matches!(mark, Some(LocalMark::Released))
                && crate::gang::pipelined_plan::carries_plan(pod)
            {
                // We withdrew this plan since the event was written: stale.
                return;
            }
            self.recover_pipelined_plan(&mut ledger, pod, &uid);
        }
        match (mark, parsed) {
            (Some(LocalMark::Held { node, devices }), Some(entry)) => {
                if entry.node == node && entry.devices == devices {
                    // The event echoes our placement: from now on events are newer.
                    ledger.confirm_local(&uid);
                    if matches!(entry.phase, PodPhase::Bound) {
                        ledger.set_phase(&uid, PodPhase::Bound);
                    }
                }
            }
            (Some(LocalMark::Released), None) => ledger.confirm_local(&uid),
            // Contradicts our own newer write: a stale event.
            (Some(_), _) => {}
            (None, Some(mut entry)) => {
                let mig_problems = mig_claims::reconcile(ledger.node(&entry.node), &mut entry);
                if let Some(existing) = ledger.pod(&uid) {
                    let same_place =
                        existing.node == entry.node && existing.devices == entry.devices;
                    match (&existing.phase, &entry.phase) {
                        (PodPhase::Binding | PodPhase::Bound, PodPhase::Reserved { .. })
                            if same_place =>
                        {
                            entry.phase = existing.phase.clone();
                        }
                        (PodPhase::Reserved { deadline }, PodPhase::Reserved { .. })
                            if same_place =>
                        {
                            entry.phase = PodPhase::Reserved {
                                deadline: *deadline,
                            };
                        }
                        _ => {}
                    }
                }
                if let Some(displaced) = self.admit_claim(&ledger, pod, &entry, mig_problems) {
                    for uid in &displaced {
                        tracing::info!(pod = %entry.name, node = %entry.node, displaced = %uid, "a pod bound to GPUs this replica had reserved for another takes them; the other chooses again at its bind");
                        ledger.remove_pod(uid);
                    }
                    ledger.add_pod(entry);
                }
            }
            (None, None) => {
                ledger.remove_pod(&uid);
            }
        }
    }

    /// Applies a pod from a list that started at `since`: pods the ledger heard of
    /// after that, or that carry our own unconfirmed write, are left alone.
    pub fn apply_pod_snapshot(&self, pod: &Pod, since: Instant) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        let may = self
            .ledger
            .read()
            .meta(uid)
            .is_none_or(|m| m.snapshot_may_change(since, self.clock.now()));
        if may {
            self.apply_pod(pod);
        }
    }

    /// Releases a deleted pod's GPUs; the pod is never tracked again.
    pub fn forget_pod(&self, uid: &str) {
        self.trace_gone(uid);
        self.pod_copies.drop_copy(uid);
        self.give_up_node_claim(uid);
        {
            let mut ledger = self.ledger.write();
            if let Some(pod) = ledger.pod(uid) {
                // It may hold its node's lock, which may now be taken over.
                self.lock_handoff.nudge(&pod.node);
            }
            ledger.mark_finished(uid);
            ledger.load_mut().set_pod(uid, None);
            self.wake_for_booked_plans(&ledger);
        }
        self.claims.forget(uid);
        self.binding_labels.forget(uid);
        self.gang_forget_pod(uid);
    }

    /// Forgets a deleted node.
    pub fn forget_node(&self, name: &str) {
        self.lock_handoff.forget_node(name);
        self.ledger.write().remove_node(name);
    }

    /// Forgets a deleted ResourceQuota.
    pub fn forget_quota(&self, namespace: &str, name: &str) {
        self.ledger.write().remove_quota(namespace, name);
        self.forget_namespace_quota(namespace, name);
    }

    /// After a full list of ResourceQuotas: forgets those the list did not contain
    /// (deleted while the watch was down).
    pub fn retain_quotas(&self, existing: &std::collections::HashSet<(String, String)>) {
        {
            let mut ledger = self.ledger.write();
            for (namespace, name) in ledger.quota_keys() {
                if !existing.contains(&(namespace.clone(), name.clone())) {
                    ledger.remove_quota(&namespace, &name);
                }
            }
        }
        self.retain_namespace_quotas(existing);
    }

    /// After a list that started at `since`: releases every tracked pod the list did
    /// not contain (a missed delete), unless the ledger heard of it after the list
    /// started. Returns what was released.
    pub fn retain_pods(
        &self,
        existing: &std::collections::HashSet<String>,
        since: Instant,
    ) -> Vec<String> {
        let now = self.clock.now();
        let mut ledger = self.ledger.write();
        let gone: Vec<(String, String)> = ledger
            .pods()
            .filter(|p| !existing.contains(&p.uid))
            .filter(|p| {
                ledger
                    .meta(&p.uid)
                    .is_none_or(|m| m.snapshot_may_change(since, now))
            })
            .map(|p| {
                (
                    p.uid.clone(),
                    format!("{}/{} on {}", p.namespace, p.name, p.node),
                )
            })
            .collect();
        for (uid, _) in &gone {
            ledger.mark_finished(uid);
            self.trace_gone(uid);
        }
        ledger.load_mut().retain_pods(existing);
        drop(ledger);
        self.trace_retain(existing, since);
        self.gang_retain_pods(existing);
        gone.into_iter().map(|(_, shown)| shown).collect()
    }

    /// After a full list: forgets nodes that no longer exist.
    pub fn retain_nodes(&self, existing: &std::collections::HashSet<String>) {
        let mut ledger = self.ledger.write();
        let gone: Vec<String> = ledger
            .node_names()
            .filter(|n| !existing.contains(*n))
            .cloned()
            .collect();
        for n in &gone {
            ledger.remove_node(n);
        }
    }

    /// Applies a ResourceQuota: the namespace's vGPU limits in the ledger (HAMi's
    /// `limits.` or `requests.` prefixed vGPU memory/cores; memory scaled by the
    /// memory factor like requests), and the whole quota for admission.
    pub fn apply_quota(&self, quota: &ResourceQuota) {
        self.apply_namespace_quota(quota);
        let ns = namespace_of(&quota.metadata);
        let name = quota.metadata.name.as_deref().unwrap_or_default();
        let hard = quota.spec.as_ref().and_then(|s| s.hard.as_ref());
        let pick = |resource: &str, parse: &dyn Fn(&str) -> Option<u64>| {
            hard.and_then(|h| {
                [format!("limits.{resource}"), format!("requests.{resource}")]
                    .iter()
                    .filter_map(|k| h.get(k))
                    .filter_map(|q| {
                        let v = parse(&q.0);
                        if v.is_none() {
                            tracing::warn!(namespace = ns, quota = name, resource, value = %q.0, "ignoring unparsable quota value");
                        }
                        v
                    })
                    .min()
            })
        };
        let factor = u64::from(self.config.nvidia.memory_factor.max(1));
        let limits = QuotaLimits {
            memory: pick(&self.config.nvidia.resource_memory_name, &|v| {
                quantity_to_mib(v).ok().map(|m| m.saturating_mul(factor))
            }),
            cores: pick(&self.config.nvidia.resource_core_name, &|v| {
                quantity_to_count(v).ok()
            }),
        };
        let mut ledger = self.ledger.write();
        if limits == QuotaLimits::default() {
            ledger.remove_quota(ns, name);
        } else {
            ledger.upsert_quota(ns, name, limits);
        }
    }

    /// Parses the pod; `Ok(None)` when it asks for no vGPU.
    pub(crate) fn pod_context(&self, pod: &Pod) -> Result<Option<PodContext>, String> {
        PodContext::parse(
            pod,
            &self.config.nvidia,
            self.config.node_policy,
            &self.config.gpu_policy,
        )
    }

    /// Releases reservations whose `/bind` never came and clears their annotations,
    /// so a filtered-but-abandoned pod does not hold GPUs forever.
    pub async fn expire_reservations(&self, clear_annotations: bool) -> usize {
        let expired: Vec<_> = {
            let mut ledger = self.ledger.write();
            let now = self.clock.now();
            let uids = ledger.expired_reservations(now);
            let expired: Vec<_> = uids
                .iter()
                .filter_map(|u| {
                    let entry = ledger.pod(u).cloned();
                    ledger.mark_local_released(u);
                    self.gang_forget_plan(u);
                    entry
                })
                .collect();
            let mut last = self.last_prune.lock();
            if now.duration_since(*last) >= crate::freshness::PRUNE_EVERY {
                ledger.prune_meta(now);
                *last = now;
            }
            expired
        };
        for entry in &expired {
            tracing::info!(pod = %format!("{}/{}", entry.namespace, entry.name), node = %entry.node, "reservation expired without a bind; GPUs released");
            self.metrics.reservations_expired.inc();
            self.pod_copies.drop_copy(&entry.uid);
            if !clear_annotations {
                continue;
            }
            if let Err(e) = self
                .api
                .patch_pod_metadata(&entry.namespace, &entry.name, &clear_allocation_patch())
                .await
            {
                tracing::debug!(pod = %entry.name, error = %e, "could not clear annotations of an expired reservation");
            }
            self.api.forget_pod(&entry.namespace, &entry.name).await;
        }
        self.expire_pledges(clear_annotations).await;
        self.drop_stale_filter_only_pods().await;
        expired.len()
    }
}

/// The webhook's quota check reads the same quotas and usage as `/filter`.
impl crate::webhook::QuotaLookup for Scheduler {
    fn headroom(&self, namespace: &str) -> crate::fit::QuotaHeadroom {
        self.ledger.read().quota_headroom(namespace)
    }
}

/// The annotations (and label) that hand a placement to HAMi's device plugin.
pub(crate) fn allocation_patch(
    node: &str,
    devices: &crate::device::model::PodDevices,
    now: chrono::DateTime<chrono::Utc>,
) -> MetadataPatch {
    use crate::annotations::*;
    let encoded = crate::device::allocation_codec::encode_pod_devices(devices);
    let mut patch = MetadataPatch::default();
    let mut set = |k: &str, v: String| {
        patch.annotations.insert(k.to_string(), Some(v));
    };
    set(VGPU_NODE, node.to_string());
    set(VGPU_TIME, now.timestamp().to_string());
    set(DEVICES_TO_ALLOCATE, encoded.clone());
    set(DEVICES_ALLOCATED, encoded);
    // MIG instances go next to the device lists; a placement without any removes
    // what an earlier placement of the pod may have written.
    patch.annotations.insert(
        MIG_ALLOCATIONS.to_string(),
        crate::device::mig_allocations::encode_mig_allocations(devices),
    );
    // A label value holds at most 63 characters, a node name up to 253: the API
    // server would refuse the whole patch, so a longer name gets no label (the
    // annotation above carries it either way), and a label from an earlier
    // placement on another node is removed.
    let label = (node.len() <= LABEL_VALUE_MAX).then(|| node.to_string());
    patch.labels.insert(VGPU_NODE.to_string(), label);
    patch
}

/// Longest value a Kubernetes label may have.
const LABEL_VALUE_MAX: usize = 63;

/// A patch removing our allocation annotations from a pod.
pub(crate) fn clear_allocation_patch() -> MetadataPatch {
    use crate::annotations::*;
    let mut p = MetadataPatch::default();
    for k in [
        VGPU_NODE,
        VGPU_TIME,
        DEVICES_TO_ALLOCATE,
        DEVICES_ALLOCATED,
        MIG_ALLOCATIONS,
        crate::gang::PLAN_DEADLINE,
        crate::gang::pipelined_plan::PIPELINED_PLAN,
    ] {
        p.annotations.insert(k.to_string(), None);
    }
    p.labels.insert(VGPU_NODE.to_string(), None);
    p
}
