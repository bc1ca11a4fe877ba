//! Who holds what: registered GPUs per node and the usage of every pod we track,
//! kept incrementally so a decision never rescans all pods.

mod change_journal;
#[cfg(test)]
mod named_tests;
mod pledges;
pub use change_journal::{ChangeJournal, JournalCursor};
pub use pledges::Pledge;

use crate::clock::{ClockHandle, SharedClock};
use crate::device::model::{GpuDevice, PodDevices};

use crate::fit::QuotaHeadroom;
use crate::freshness::{FORGET_AFTER, LocalMark, PodMeta};
use crate::node_load::NodeLoad;
use crate::rank_index::{Rank, RankIndex, rooms_of};
use crate::usage::{GpuUsage, collapse_pod_usage, usage_totals};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

#[cfg(test)]
thread_local! {
    static RANK_LOOKUPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Low-cardinality reason for nodes without a usable registration.
pub const NODE_UNREGISTERED: &str = "node unregistered";

/// A node as the scheduler knows it.
#[derive(Debug, Clone, Default)]
pub struct NodeEntry {
    /// Registered GPUs (empty when registration failed).
    pub devices: Vec<GpuDevice>,
    /// Why the node's GPUs are unusable, if they are (bad annotation, no devices,
    /// device plugin gone), in words for operators.
    pub registration_error: Option<String>,
    /// The same as a low-cardinality reason for kube-scheduler.
    pub unusable_reason: Option<&'static str>,
    /// GPU UUIDs an administrator excluded with `hami.io/device-cordon`.
    pub cordoned: BTreeSet<String>,
    /// Fingerprint of the register and pair-score annotations, to skip re-decoding
    /// unchanged nodes on every watch event without keeping the text around.
    pub source_fingerprint: Option<u64>,
    /// `resourceVersion` of the Node object this entry was built from, so that the
    /// same object sent again (every full-Node `/filter` sends every candidate) is
    /// recognised without decoding anything.
    pub source_version: Option<Box<str>>,
    /// Current usage per device, parallel to `devices` (kept by the ledger): what
    /// the pods it tracks hold. Never more than a device registered.
    pub usage: Vec<GpuUsage>,
    /// Usage pledged to pipelined plans, parallel to `devices`: room that pods
    /// being evicted still hold and that is promised to the pods they make room for.
    pub pledged: Vec<GpuUsage>,
    /// `usage` plus `pledged`: what every fit and ranking sees, so that nobody else
    /// is placed on room promised to a pipelined plan.
    pub effective: Vec<GpuUsage>,
    /// Whether each device is an NVIDIA GPU (model contains "nvidia").
    pub is_vendor: Vec<bool>,
    /// Each device's model in lower case, for type selectors.
    pub model_lower: Vec<String>,
    /// Node score (utilisation before placing), kept current with `effective`, so
    /// ranking thousands of nodes per filter costs a lookup each.
    pub score: f64,
    /// Changes with every change to the entry (registration or usage), so a plan
    /// made on a snapshot can tell whether the node is still as it saw it.
    pub generation: u64,
}

impl NodeEntry {
    /// The node as the fit sees it.
    pub fn view(&self) -> crate::fit::NodeView<'_> {
        crate::fit::NodeView {
            devices: &self.devices,
            usage: &self.effective,
            cordoned: &self.cordoned,
            is_vendor: &self.is_vendor,
            model_lower: &self.model_lower,
        }
    }

    /// The entry with its per-device fields filled and nothing booked, for a node
    /// fitted without being registered (a template node).
    pub fn indexed(mut self) -> Self {
        self.index_devices(None);
        self
    }

    /// Fills the per-device fields derived from `devices`, once per registration
    /// instead of once per decision.
    fn index_devices(&mut self, usage: Option<&BTreeMap<Arc<str>, GpuUsage>>) {
        self.model_lower = self
            .devices
            .iter()
            .map(|d| d.model.to_lowercase())
            .collect();
        self.is_vendor = self
            .model_lower
            .iter()
            .map(|m| m.contains("nvidia"))
            .collect();
        self.usage = self
            .devices
            .iter()
            .map(|d| {
                usage
                    .and_then(|m| m.get(&d.id))
                    .copied()
                    .unwrap_or_default()
            })
            .collect();
        self.pledged = vec![GpuUsage::default(); self.devices.len()];
        self.refresh();
    }

    /// Recomputes what fits see, and the score, after `usage` or `pledged` changed.
    fn refresh(&mut self) {
        self.effective = self
            .usage
            .iter()
            .zip(
                self.pledged
                    .iter()
                    .chain(std::iter::repeat(&GpuUsage::default())),
            )
            .map(|(u, p)| {
                let mut e = *u;
                e.add(p);
                e
            })
            .collect();
        self.score = crate::fit::node_score(&self.devices, &self.effective);
    }

    /// Whether the node's GPUs can take pods at all (registered, and registered
    /// well).
    pub fn usable(&self) -> bool {
        self.unusable().is_none()
    }

    /// Why the node's GPUs cannot take pods, if they cannot (low-cardinality words).
    pub fn unusable(&self) -> Option<&'static str> {
        if let Some(reason) = self.unusable_reason {
            return Some(reason);
        }
        if self.devices.is_empty() {
            return Some(NODE_UNREGISTERED);
        }
        None
    }

    /// Puts the node's current score and room into the ranking index.
    fn index_rank(&self, name: &str, rank: &mut RankIndex) {
        rank.set(name, self.score, self.usable(), rooms_of(&self.view()));
    }

    /// Points a pod's GPU UUIDs at this node's registered ones, so every pod on a
    /// GPU shares one copy of its UUID (a decoded annotation brings its own).
    fn share_uuids(&self, entry: &mut PodEntry) {
        let share = |uuid: &mut Arc<str>| {
            if let Some(d) = self.devices.iter().find(|d| d.id == *uuid)
                && !Arc::ptr_eq(&d.id, uuid)
            {
                *uuid = d.id.clone();
            }
        };
        for device in entry.devices.iter_mut().flatten() {
            share(&mut device.uuid);
        }
        for (uuid, _) in &mut entry.usage {
            share(uuid);
        }
    }

    fn device_position(&self, uuid: &str) -> Option<usize> {
        self.devices.iter().position(|d| &*d.id == uuid)
    }
}

/// Where a tracked pod stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum PodPhase {
    /// Placed by `/filter`, not yet bound; released at the deadline.
    Reserved {
        #[serde(skip)]
        deadline: Instant,
    },
    /// `/bind` is under way: not expired by the sweeper, whatever the lock wait.
    Binding,
    /// Bound to its node (or observed with our annotations in the cluster).
    Bound,
}

/// One pod's hold on GPUs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodEntry {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Node the GPUs are on.
    pub node: String,
    /// Devices per container (init containers first).
    pub devices: PodDevices,
    /// How many entries of `devices` are init containers.
    pub init_count: usize,
    /// Reservation state.
    pub phase: PodPhase,
    /// Collapsed usage per GPU UUID, sorted by UUID (a small vector: a map per pod
    /// costs more memory than the pod's whole record).
    #[serde(skip)]
    pub usage: Vec<(Arc<str>, GpuUsage)>,
}

impl PodEntry {
    /// Builds an entry, computing its collapsed usage.
    pub fn new(
        uid: String,
        namespace: String,
        name: String,
        node: String,
        devices: PodDevices,
        init_count: usize,
        phase: PodPhase,
    ) -> Self {
        // Decoders and placements grow their vectors by pushing (room for four
        // devices per container); the entry lives as long as the pod, so it keeps
        // only what it holds.
        let mut devices = devices;
        for container in &mut devices {
            container.shrink_to_fit();
        }
        devices.shrink_to_fit();
        let usage = collapse_pod_usage(&devices, init_count)
            .into_iter()
            .collect();
        Self {
            uid,
            namespace,
            name,
            node,
            devices,
            init_count,
            phase,
            usage,
        }
    }
}

impl PodEntry {
    /// Recomputes the collapsed usage after `devices` changed.
    pub fn recompute_usage(&mut self) {
        self.usage = collapse_pod_usage(&self.devices, self.init_count)
            .into_iter()
            .collect();
    }
}

/// vGPU limits of one ResourceQuota object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QuotaLimits {
    /// Memory limit, MiB (scaled by the memory factor).
    pub memory: Option<u64>,
    /// Cores limit, percent.
    pub cores: Option<u64>,
}

/// Where a pod's namespace and name fall in `Ledger::named`.
fn name_key(namespace: &str, name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = rustc_hash::FxHasher::default();
    namespace.hash(&mut hasher);
    name.hash(&mut hasher);
    hasher.finish()
}

/// The scheduler's books.
#[derive(Debug, Default)]
pub struct Ledger {
    /// A fast non-cryptographic hash: node names come from the API server, not
    /// from untrusted clients.
    nodes: FxHashMap<String, Arc<NodeEntry>>,
    /// The last generation given to a node entry.
    generation: u64,
    /// CPU and memory per node (allocatable, and requested by the pods on it).
    load: NodeLoad,
    /// What ranking reads of every node in `nodes`, kept in step with it.
    rank: RankIndex,
    /// Usage per node per GPU UUID (includes UUIDs not, or no longer, registered).
    node_usage: HashMap<String, BTreeMap<Arc<str>, GpuUsage>>,
    /// Boxed: the table holds tens of thousands of pods and doubles as it grows, so
    /// its slots stay a pointer wide instead of a whole entry.
    pods: HashMap<Box<str>, Box<PodEntry>>,
    /// The UIDs in `pods` by a hash of each pod's namespace and name: a node lock
    /// names its owner by namespace and name, and each look at a held lock asks
    /// whether that pod is still on its way, with thousands of pods tracked.
    named: FxHashMap<u64, Vec<Box<str>>>,
    /// Deadlines of the pods in `Reserved`, so the sweeper looks at the few pods
    /// between filter and bind instead of every pod, under the write lock, every
    /// second.
    reserved: HashMap<Box<str>, Instant>,
    /// ResourceQuota limits by namespace, then quota name.
    quotas: BTreeMap<String, BTreeMap<String, QuotaLimits>>,
    /// vGPU memory and cores used per namespace.
    namespace_usage: HashMap<String, (u64, u64)>,
    /// How new our knowledge of each pod is (see `freshness`).
    meta: HashMap<Box<str>, PodMeta>,
    /// Where "now" comes from for freshness marks.
    clock: ClockHandle,
    /// Pipelined plans by the UID of the pod they are for.
    pledges: HashMap<Box<str>, Pledge>,
    /// Plans whose victims are all gone and that are now booked, for the
    /// scheduler to publish.
    converted: Vec<String>,
    /// Pods whose holding changed, for the planner's picture.
    holdings_journal: ChangeJournal,
    /// Nodes whose entry changed, came or went, for the planner's picture.
    nodes_journal: ChangeJournal,
}

impl Ledger {
    /// An empty ledger reading time from `clock`.
    pub fn with_clock(clock: SharedClock) -> Self {
        Self {
            clock: ClockHandle(clock),
            ..Self::default()
        }
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// Registers or updates a node.
    pub fn upsert_node(&mut self, name: &str, mut entry: NodeEntry) {
        entry.index_devices(self.node_usage.get(name));
        for p in self.pledges.values().filter(|p| p.entry.node == name) {
            for (uuid, need) in &p.entry.usage {
                if let Some(i) = entry.device_position(uuid) {
                    entry.pledged[i].add(need);
                }
            }
        }
        entry.refresh();
        entry.index_rank(name, &mut self.rank);
        entry.generation = self.next_generation();
        self.nodes.insert(name.to_string(), Arc::new(entry));
        self.nodes_journal.note(name);
    }

    /// Forgets a node (its pods stay tracked until they go).
    pub fn remove_node(&mut self, name: &str) {
        self.nodes.remove(name);
        self.nodes_journal.note(name);
        self.rank.remove(name);
        self.load.remove_node(name);
    }

    /// Which pods' holdings (held or promised) changed, in order.
    pub fn holdings_journal(&self) -> &ChangeJournal {
        &self.holdings_journal
    }

    /// Which nodes' entries changed, came or went, in order.
    pub fn nodes_journal(&self) -> &ChangeJournal {
        &self.nodes_journal
    }

    /// A registered node.
    pub fn node(&self, name: &str) -> Option<&NodeEntry> {
        self.nodes.get(name).map(|e| &**e)
    }

    /// A registered node's entry as it is now, shared: replaced (not changed in
    /// place) whenever the node changes while anyone else holds it.
    pub fn shared_node(&self, name: &str) -> Option<&Arc<NodeEntry>> {
        self.nodes.get(name)
    }

    /// Every node as it is now, sorted by name, shared rather than copied: a
    /// planning session works on this picture while the ledger moves on (an entry
    /// changed later is copied then, and its generation tells the change).
    pub fn snapshot_nodes(&self) -> Vec<(String, Arc<NodeEntry>)> {
        let mut nodes: Vec<(String, Arc<NodeEntry>)> = self
            .nodes
            .iter()
            .map(|(name, e)| (name.clone(), e.clone()))
            .collect();
        nodes.sort_by(|a, b| a.0.cmp(&b.0));
        nodes
    }

    /// CPU and memory per node.
    pub fn load(&self) -> &NodeLoad {
        &self.load
    }

    /// CPU and memory per node, to update from Node and Pod events.
    pub fn load_mut(&mut self) -> &mut NodeLoad {
        &mut self.load
    }

    /// What ranking needs of a registered node, from a compact index (cheaper than
    /// [`Ledger::node`] when looking up thousands of candidates).
    pub fn rank(&self, name: &str) -> Option<Rank<'_>> {
        #[cfg(test)]
        RANK_LOOKUPS.with(|n| n.set(n.get() + 1));
        self.rank.get(name)
    }

    /// How many times [`Ledger::rank`] was asked on this thread: tests hold a
    /// `/filter` to one lookup per candidate with it, a cost no timing shows
    /// reliably.
    #[cfg(test)]
    pub(crate) fn rank_lookups() -> usize {
        RANK_LOOKUPS.with(std::cell::Cell::get)
    }

    /// All nodes, sorted by name (for dumps and metrics, not the hot path).
    pub fn nodes(&self) -> Vec<(&String, &NodeEntry)> {
        let mut nodes: Vec<_> = self.nodes.iter().map(|(n, e)| (n, &**e)).collect();
        nodes.sort_by(|a, b| a.0.cmp(b.0));
        nodes
    }

    /// Names of all registered nodes.
    pub fn node_names(&self) -> impl Iterator<Item = &String> {
        self.nodes.keys()
    }

    /// A tracked pod.
    pub fn pod(&self, uid: &str) -> Option<&PodEntry> {
        self.pods.get(uid).map(|p| &**p)
    }

    /// All tracked pods.
    pub fn pods(&self) -> impl Iterator<Item = &PodEntry> {
        self.pods.values().map(|p| &**p)
    }

    /// The tracked pods named `namespace/name` (one, unless a pod of that name
    /// was deleted and created again and both are still tracked).
    pub fn pods_named<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a PodEntry> {
        self.named
            .get(&name_key(namespace, name))
            .into_iter()
            .flatten()
            .filter_map(|uid| self.pods.get(uid))
            .map(|p| &**p)
            .filter(move |p| p.namespace == namespace && p.name == name)
    }

    /// Number of tracked pods.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Freshness bookkeeping of a pod.
    pub fn meta(&self, uid: &str) -> Option<&PodMeta> {
        self.meta.get(uid)
    }

    fn touch(&mut self, uid: &str) -> &mut PodMeta {
        let now = self.clock.now();
        let meta = self
            .meta
            .entry(uid.into())
            .or_insert_with(|| PodMeta::new(now));
        meta.touched = now;
        meta
    }

    /// Records our own placement of a pod (after a reservation).
    pub fn mark_local_held(&mut self, uid: &str, node: &str, devices: &PodDevices) {
        let mark = LocalMark::Held {
            node: node.to_string(),
            devices: devices.clone(),
        };
        let now = self.clock.now();
        self.touch(uid).local = Some(Box::new((mark, now)));
    }

    /// Records that we released a pod's GPUs ourselves (rollback, expiry).
    pub fn mark_local_released(&mut self, uid: &str) {
        self.remove_pod(uid);
        let now = self.clock.now();
        self.touch(uid).local = Some(Box::new((LocalMark::Released, now)));
    }

    /// Records that a pod is gone or finished for good, releasing its GPUs (and
    /// any plan of its own), and books the plans that were only waiting for it.
    pub fn mark_finished(&mut self, uid: &str) {
        self.remove_pod(uid);
        self.unpledge(uid);
        let meta = self.touch(uid);
        meta.finished = true;
        meta.local = None;
        self.victim_gone(uid);
    }

    /// Marks a watch event as the confirmation of our own last write.
    pub fn confirm_local(&mut self, uid: &str) {
        self.touch(uid).local = None;
    }

    /// Records that the ledger heard of the pod now (a watch event, even one that
    /// changed nothing), so older snapshots leave it alone.
    pub fn heard_of(&mut self, uid: &str) {
        self.touch(uid);
    }

    /// Drops bookkeeping of pods the ledger no longer holds and has not heard of
    /// for a long time, and local marks past `SETTLE` (no longer in force, and
    /// never confirmed where the cluster reports no changes back).
    pub fn prune_meta(&mut self, now: Instant) {
        let pods = &self.pods;
        self.meta.retain(|uid, m| {
            if m.active_mark(now).is_none() {
                m.local = None;
            }
            pods.contains_key(&**uid) || now.duration_since(m.touched) < FORGET_AFTER
        });
    }

    /// Adds (or replaces) a pod's hold.
    pub fn add_pod(&mut self, mut entry: PodEntry) {
        self.remove_pod(&entry.uid);
        self.touch(&entry.uid);
        if let Some(n) = self.nodes.get(&entry.node) {
            n.share_uuids(&mut entry);
        }
        let generation = self.next_generation();
        let node = self.node_usage.entry(entry.node.clone()).or_default();
        for (uuid, u) in &entry.usage {
            node.entry(uuid.clone()).or_default().add(u);
        }
        if let Some(n) = self.nodes.get_mut(&entry.node) {
            let n = Arc::make_mut(n);
            for (uuid, u) in &entry.usage {
                if let Some(i) = n.device_position(uuid) {
                    n.usage[i].add(u);
                }
            }
            n.refresh();
            n.generation = generation;
            n.index_rank(&entry.node, &mut self.rank);
            self.nodes_journal.note(&entry.node);
        }
        self.holdings_journal.note(&entry.uid);
        let (mem, cores) = usage_totals(entry.usage.iter().map(|(_, u)| u));
        let ns = self
            .namespace_usage
            .entry(entry.namespace.clone())
            .or_default();
        ns.0 = ns.0.saturating_add(mem);
        ns.1 = ns.1.saturating_add(cores);
        if let PodPhase::Reserved { deadline } = entry.phase {
            self.reserved.insert(entry.uid.as_str().into(), deadline);
        }
        self.named
            .entry(name_key(&entry.namespace, &entry.name))
            .or_default()
            .push(entry.uid.as_str().into());
        self.pods.insert(entry.uid.as_str().into(), Box::new(entry));
    }

    /// Releases a pod's hold; returns what it held.
    pub fn remove_pod(&mut self, uid: &str) -> Option<PodEntry> {
        let entry = *self.pods.remove(uid)?;
        let key = name_key(&entry.namespace, &entry.name);
        if let Some(uids) = self.named.get_mut(&key) {
            uids.retain(|u| &**u != uid);
            if uids.is_empty() {
                self.named.remove(&key);
            }
        }
        self.holdings_journal.note(uid);
        self.reserved.remove(uid);
        self.touch(uid);
        let generation = self.next_generation();
        if let Some(n) = self.nodes.get_mut(&entry.node) {
            let n = Arc::make_mut(n);
            n.generation = generation;
            for (uuid, u) in &entry.usage {
                if let Some(i) = n.device_position(uuid) {
                    n.usage[i].sub(u);
                }
            }
            n.refresh();
            n.index_rank(&entry.node, &mut self.rank);
            self.nodes_journal.note(&entry.node);
        }
        if let Some(node) = self.node_usage.get_mut(&entry.node) {
            for (uuid, u) in &entry.usage {
                if let Some(slot) = node.get_mut(uuid) {
                    slot.sub(u);
                    if *slot == GpuUsage::default() {
                        node.remove(uuid);
                    }
                }
            }
            if node.is_empty() {
                self.node_usage.remove(&entry.node);
            }
        }
        let (mem, cores) = usage_totals(entry.usage.iter().map(|(_, u)| u));
        if let Some(ns) = self.namespace_usage.get_mut(&entry.namespace) {
            ns.0 = ns.0.saturating_sub(mem);
            ns.1 = ns.1.saturating_sub(cores);
        }
        Some(entry)
    }

    /// Marks a reserved pod bound (no deadline any more).
    pub fn mark_bound(&mut self, uid: &str) -> bool {
        self.set_phase(uid, PodPhase::Bound)
    }

    /// Changes a tracked pod's phase; false when the pod is not tracked.
    pub fn set_phase(&mut self, uid: &str, phase: PodPhase) -> bool {
        if self.pods.contains_key(uid) {
            self.touch(uid);
        }
        match self.pods.get_mut(uid) {
            Some(p) => {
                match phase {
                    PodPhase::Reserved { deadline } => {
                        self.reserved.insert(uid.into(), deadline);
                    }
                    _ => {
                        self.reserved.remove(uid);
                    }
                }
                p.phase = phase;
                true
            }
            None => false,
        }
    }

    /// Reservations whose deadline passed.
    pub fn expired_reservations(&self, now: Instant) -> Vec<String> {
        self.reserved
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(uid, _)| uid.to_string())
            .collect()
    }

    /// Sets or replaces a ResourceQuota's vGPU limits.
    pub fn upsert_quota(&mut self, namespace: &str, name: &str, limits: QuotaLimits) {
        self.quotas
            .entry(namespace.to_string())
            .or_default()
            .insert(name.to_string(), limits);
    }

    /// Removes a ResourceQuota.
    pub fn remove_quota(&mut self, namespace: &str, name: &str) {
        if let Some(m) = self.quotas.get_mut(namespace) {
            m.remove(name);
            if m.is_empty() {
                self.quotas.remove(namespace);
            }
        }
    }

    /// Every ResourceQuota the ledger holds limits of, as (namespace, name).
    pub fn quota_keys(&self) -> Vec<(String, String)> {
        self.quotas
            .iter()
            .flat_map(|(ns, quotas)| quotas.keys().map(move |name| (ns.clone(), name.clone())))
            .collect()
    }

    /// Quota headroom of a namespace. With several ResourceQuotas each must hold, so
    /// the smallest limit per dimension applies.
    pub fn quota_headroom(&self, namespace: &str) -> QuotaHeadroom {
        let Some(quotas) = self.quotas.get(namespace) else {
            return QuotaHeadroom::default();
        };
        let (mem_used, cores_used) = self
            .namespace_usage
            .get(namespace)
            .copied()
            .unwrap_or_default();
        let memory = quotas.values().filter_map(|q| q.memory).min();
        let cores = quotas.values().filter_map(|q| q.cores).min();
        QuotaHeadroom {
            memory: memory.map(|l| (l, mem_used)),
            cores: cores.map(|l| (l, cores_used)),
        }
    }

    /// Namespace usage and limits, for metrics and the debug dump.
    pub fn quota_report(&self) -> Vec<(String, QuotaLimits, (u64, u64))> {
        self.quotas
            .keys()
            .map(|ns| {
                let h = self.quota_headroom(ns);
                let used = self.namespace_usage.get(ns).copied().unwrap_or_default();
                (
                    ns.clone(),
                    QuotaLimits {
                        memory: h.memory.map(|(l, _)| l),
                        cores: h.cores.map(|(l, _)| l),
                    },
                    used,
                )
            })
            .collect()
    }

    /// Recomputes every usage from the pod entries, for invariant checks.
    pub fn recomputed_node_usage(&self) -> HashMap<String, BTreeMap<Arc<str>, GpuUsage>> {
        let mut out: HashMap<String, BTreeMap<Arc<str>, GpuUsage>> = HashMap::new();
        for p in self.pods.values() {
            let node = out.entry(p.node.clone()).or_default();
            for (uuid, u) in &p.usage {
                node.entry(uuid.clone()).or_default().add(u);
            }
        }
        out
    }

    /// Whether the index of reservations matches the pods' phases (invariant checks).
    pub fn reservations_indexed(&self) -> bool {
        let reserved = self
            .pods
            .values()
            .filter(|p| matches!(p.phase, PodPhase::Reserved { .. }))
            .count();
        reserved == self.reserved.len()
            && self.reserved.iter().all(|(uid, deadline)| {
                self.pods.get(uid).is_some_and(
                    |p| matches!(p.phase, PodPhase::Reserved { deadline: d } if d == *deadline),
                )
            })
    }

    /// The incrementally kept usage, for comparison with [`Self::recomputed_node_usage`].
    pub fn incremental_node_usage(&self) -> &HashMap<String, BTreeMap<Arc<str>, GpuUsage>> {
        &self.node_usage
    }
}
