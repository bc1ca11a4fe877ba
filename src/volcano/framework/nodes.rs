//! The nodes a session sees: a snapshot of the ledger's node entries (shared, not
//! copied) with the session's tentative placements laid over them. Only a node the
//! session places a pod on gets a copy of its usage, and taking the placement back
//! removes the copy, so a discarded statement leaves the set exactly as it was.

use super::changed_nodes::ChangedNodes;
use super::score_order::ScoreOrder;
use crate::device::model::PodDevices;
use crate::device::request::PodRequest;
use crate::fit::{FitRequest, NodeView, Placement, QuotaHeadroom, fit_pod, node_score};
use crate::ledger::NodeEntry;
use crate::node_load::NodeResources;
use crate::node_metrics::{MeasuredUsage, NodeMetricsBook};
use crate::placement::namespace_labels::NamespaceLabels;
use crate::placement::resource_fit::fits_node;
use crate::placement::{NodeFacts, NodeRejection, NodeSource, RankFacts};
use crate::rank_index::{GpuRoom, RoomScreen, may_fit, rooms_of};
use crate::resources::Resources;
use crate::usage::{GpuUsage, collapse_pod_usage, usage_totals};
use chrono::{DateTime, Utc};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One node in a session.
#[derive(Debug, Clone)]
pub struct SessionNode {
    /// Node name.
    pub name: String,
    /// Its GPUs as the ledger had them when the session opened.
    pub gpus: Arc<NodeEntry>,
    /// Its CPU and memory when the session opened.
    pub resources: NodeResources,
    /// The room left on each of its GPUs as `gpus` has them: ranking screens out
    /// a node that surely cannot hold a pod without fitting it (binpack ranks the
    /// fullest nodes first). Worked out once per node entry, so a picture keeping
    /// the node keeps them.
    rooms: Vec<GpuRoom>,
    /// Whether `gpus` can take pods, their score, and their rooms summed up:
    /// read for every node at every node choice, so kept here rather than
    /// behind one more pointer.
    usable: bool,
    score: f64,
    screen: RoomScreen,
}

impl SessionNode {
    /// A node as the session sees it when it opens.
    pub fn new(name: String, gpus: Arc<NodeEntry>, resources: NodeResources) -> Self {
        let rooms: Vec<GpuRoom> = rooms_of(&gpus.view()).collect();
        Self {
            name,
            usable: gpus.usable(),
            score: gpus.score,
            screen: RoomScreen::of(&rooms),
            gpus,
            resources,
            rooms,
        }
    }

    /// The score ranking reads for the node while no session changed it, when the
    /// node can take a GPU at all (usable, with an open slot on some GPU).
    pub fn gpu_rank_score(&self) -> Option<f64> {
        (self.usable && self.screen.has_picks()).then_some(self.score)
    }

    /// The node again with `gpus` and `resources` as they are now: the rooms are
    /// taken over while the GPU entry is the very same, worked out again otherwise.
    pub fn again(&self, gpus: &Arc<NodeEntry>, resources: NodeResources) -> Self {
        if !Arc::ptr_eq(&self.gpus, gpus) {
            return Self::new(self.name.clone(), gpus.clone(), resources);
        }
        Self {
            name: self.name.clone(),
            gpus: gpus.clone(),
            resources,
            rooms: self.rooms.clone(),
            usable: self.usable,
            score: self.score,
            screen: self.screen,
        }
    }
}

/// What the session changed on one node.
#[derive(Debug, Clone, PartialEq)]
struct NodeChange {
    usage: Vec<GpuUsage>,
    score: f64,
    requested: Resources,
    /// Usage of the tasks the session evicts from the node: still held now, free
    /// once they are gone (Volcano's "releasing").
    releasing: Vec<GpuUsage>,
    /// What the evicted tasks request of the node (CPU, memory, pod slots...):
    /// taken now, free once they are gone.
    releasing_requests: Resources,
    /// The room left on each GPU with `usage` booked.
    rooms: Vec<GpuRoom>,
}

/// One tentative placement's effect, kept to take it back exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedUsage {
    node: usize,
    namespace: String,
    usage: Vec<(Arc<str>, GpuUsage)>,
    requests: Resources,
}

/// The session's nodes.
#[derive(Debug, Clone, Default)]
pub struct NodeSet {
    /// Shared with the planner's picture kept between cycles: a session over
    /// nodes that did not change copies none of them, nor the list.
    nodes: SharedNodes,
    /// Positions by name, shared by every session over the same nodes.
    index: Arc<FxHashMap<String, usize>>,
    /// What the session changed, by node position (ranking asks for every node
    /// it walks).
    changed: ChangedNodes<NodeChange>,
    quotas: BTreeMap<String, QuotaHeadroom>,
    namespace_usage: BTreeMap<String, (u64, u64)>,
    /// Every node's measured usage when the session opened, and the session's
    /// "now" it is judged at.
    measured: Arc<NodeMetricsBook>,
    /// Every namespace's labels, for pod affinity's namespace selectors.
    namespaces: Arc<NamespaceLabels>,
    now: DateTime<Utc>,
    /// What all the nodes have in common.
    across: AcrossNodes,
    /// The nodes that can take a GPU in score order, kept with the nodes
    /// between cycles; `None`: node choices rank every node.
    order: Option<Arc<ScoreOrder>>,
}

/// What a session asks of all its nodes together, before it looks at any one
/// of them (kept as nodes change by whoever keeps the nodes, rather than found
/// by looking at every node and its pods at every session).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcrossNodes {
    /// Whether some pod on some node has required pod anti-affinity: only then
    /// must a task without pod (anti-)affinity of its own be checked against the
    /// pods on the nodes.
    pub anti_affine_pods: bool,
    /// Whether some pod on some node has preferred pod (anti-)affinity: only
    /// then can a task preferring nothing itself score differently per node.
    pub preferring_pods: bool,
    /// Whether some node has a `PreferNoSchedule` taint: only then can taints
    /// score nodes differently.
    pub soft_taints: bool,
}

/// Whether the node has a `PreferNoSchedule` taint.
pub fn soft_tainted(node: &SessionNode) -> bool {
    node.resources
        .traits
        .as_ref()
        .is_some_and(|t| t.taints.iter().any(|t| t.effect == "PreferNoSchedule"))
}

/// A session's nodes sorted by name, shared by the picture that keeps them and
/// every session over them.
pub type SharedNodes = Arc<Vec<Arc<SessionNode>>>;

/// Every node's position by name, `nodes` sorted by name.
pub fn position_index(nodes: &[impl std::borrow::Borrow<SessionNode>]) -> FxHashMap<String, usize> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.borrow().name.clone(), i))
        .collect()
}

impl NodeChange {
    /// No change yet to `node`.
    fn none(node: &SessionNode) -> Self {
        let entry = &node.gpus;
        Self {
            usage: entry.effective.clone(),
            score: entry.score,
            requested: node.resources.requested.clone(),
            releasing: vec![GpuUsage::default(); entry.devices.len()],
            releasing_requests: Resources::new(),
            rooms: node.rooms.clone(),
        }
    }

    /// Whether the change has come back to nothing.
    fn unchanged(&self, usage: &[GpuUsage], requested: &Resources) -> bool {
        self.usage == usage
            && self.requested == *requested
            && self.releasing.iter().all(|r| *r == GpuUsage::default())
            && self.releasing_requests.is_empty()
    }
}

impl PartialEq for NodeSet {
    /// Same nodes (the very same snapshot entries, ranked by the same rooms),
    /// same changes, the same said of all of them together.
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.nodes, &other.nodes)
            || self.nodes.len() == other.nodes.len()
                && self.nodes.iter().zip(other.nodes.iter()).all(|(a, b)| {
                    a.name == b.name && Arc::ptr_eq(&a.gpus, &b.gpus) && a.rooms == b.rooms
                }))
            && self.changed == other.changed
            && self.quotas == other.quotas
            && self.namespace_usage == other.namespace_usage
            && self.across == other.across
    }
}

impl NodeSet {
    /// A set over a ledger snapshot, sorted by name, with each namespace's quota
    /// headroom as the ledger had it.
    pub fn new(mut nodes: Vec<SessionNode>, quotas: BTreeMap<String, QuotaHeadroom>) -> Self {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let index = Arc::new(position_index(&nodes));
        Self::shared(nodes.into_iter().map(Arc::new).collect(), index, quotas)
    }

    /// A set over nodes already sorted by name and their positions by name
    /// (as [`position_index`] works them out), shared rather than copied.
    pub fn shared(
        nodes: Vec<Arc<SessionNode>>,
        index: Arc<FxHashMap<String, usize>>,
        quotas: BTreeMap<String, QuotaHeadroom>,
    ) -> Self {
        let across = AcrossNodes {
            anti_affine_pods: nodes
                .iter()
                .flat_map(|n| n.resources.pods.iter())
                .any(|p| !p.anti_affinity.is_empty()),
            preferring_pods: nodes
                .iter()
                .flat_map(|n| n.resources.pods.iter())
                .any(|p| !p.preferred.is_empty()),
            soft_taints: nodes.iter().any(|n| soft_tainted(n)),
        };
        Self::shared_knowing(Arc::new(nodes), index, quotas, across)
    }

    /// As [`Self::shared`], told what the nodes have in common.
    pub fn shared_knowing(
        nodes: SharedNodes,
        index: Arc<FxHashMap<String, usize>>,
        quotas: BTreeMap<String, QuotaHeadroom>,
        across: AcrossNodes,
    ) -> Self {
        let changed = ChangedNodes::default();
        Self {
            across,
            nodes,
            index,
            changed,
            quotas,
            namespace_usage: BTreeMap::new(),
            measured: Arc::default(),
            namespaces: Arc::default(),
            now: DateTime::UNIX_EPOCH,
            order: None,
        }
    }

    /// The same nodes, with the order of those that can take a GPU (worked out
    /// over these very nodes, see [`ScoreOrder`]).
    pub fn with_score_order(mut self, order: Arc<ScoreOrder>) -> Self {
        debug_assert!(order.len() <= self.nodes.len());
        self.order = Some(order);
        self
    }

    /// The same nodes, with every namespace's labels.
    pub fn with_namespaces(mut self, namespaces: Arc<NamespaceLabels>) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// Every namespace's labels, as the session opened with them.
    pub fn namespaces(&self) -> &Arc<NamespaceLabels> {
        &self.namespaces
    }

    /// The nodes' measured usage, judged at `now` (the session's time).
    pub fn with_measured(mut self, measured: Arc<NodeMetricsBook>, now: DateTime<Utc>) -> Self {
        self.measured = measured;
        self.now = now;
        self
    }

    /// Each namespace's quota headroom as the session opened with it.
    pub fn quotas(&self) -> &BTreeMap<String, QuotaHeadroom> {
        &self.quotas
    }

    /// The nodes' measured usage the session judges by.
    pub fn measured(&self) -> &Arc<NodeMetricsBook> {
        &self.measured
    }

    /// Whether some pod on some node has required pod anti-affinity.
    pub fn has_anti_affine_pods(&self) -> bool {
        self.across.anti_affine_pods
    }

    /// Whether some pod on some node has preferred pod (anti-)affinity.
    pub fn has_preferring_pods(&self) -> bool {
        self.across.preferring_pods
    }

    /// What the nodes have in common.
    pub fn across(&self) -> AcrossNodes {
        self.across
    }

    /// The nodes, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &SessionNode> + Clone {
        self.nodes.iter().map(|n| &**n)
    }

    /// A node by name.
    pub fn get(&self, name: &str) -> Option<&SessionNode> {
        self.index.get(name).map(|&i| &*self.nodes[i])
    }

    /// A node's position (what [`NodeSource`] addresses it by).
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// A node's GPU usage as the session sees it now.
    pub fn usage(&self, name: &str) -> Option<&[GpuUsage]> {
        self.index.get(name).map(|&i| self.usage_of(i))
    }

    fn usage_of(&self, i: usize) -> &[GpuUsage] {
        match self.changed.get(i) {
            Some(c) => &c.usage,
            None => &self.nodes[i].gpus.effective,
        }
    }

    /// The room left on each GPU of the node at position `i` as the session
    /// sees it now.
    fn rooms_at(&self, i: usize) -> &[GpuRoom] {
        match self.changed.get(i) {
            Some(c) => &c.rooms,
            None => &self.nodes[i].rooms,
        }
    }

    /// The room left on each GPU of a node as the session sees it now: what
    /// ranking screens it by.
    pub fn rooms(&self, name: &str) -> Option<&[GpuRoom]> {
        self.index.get(name).map(|&i| self.rooms_at(i))
    }

    fn requested_of(&self, i: usize) -> &Resources {
        match self.changed.get(i) {
            Some(c) => &c.requested,
            None => &self.nodes[i].resources.requested,
        }
    }

    /// Places a pod tentatively: its GPUs (if any) and its CPU and memory requests.
    pub fn place(
        &mut self,
        namespace: &str,
        node: &str,
        devices: &PodDevices,
        init_count: usize,
        requests: &Resources,
    ) -> Option<PlacedUsage> {
        let placed = self.placed_usage(namespace, node, devices, init_count, requests)?;
        self.apply(&placed, true);
        Some(placed)
    }

    /// What [`NodeSet::place`] takes for a pod placed so, without taking it: to
    /// take back a placement whose statement is already committed.
    pub fn placed_usage(
        &self,
        namespace: &str,
        node: &str,
        devices: &PodDevices,
        init_count: usize,
        requests: &Resources,
    ) -> Option<PlacedUsage> {
        let &i = self.index.get(node)?;
        Some(PlacedUsage {
            node: i,
            namespace: namespace.to_string(),
            usage: collapse_pod_usage(devices, init_count)
                .into_iter()
                .collect(),
            requests: requests.clone(),
        })
    }

    /// Takes back a [`NodeSet::place`].
    pub fn unplace(&mut self, placed: &PlacedUsage) {
        self.apply(placed, false);
    }

    /// Marks a placed task's GPUs and requests as being freed (its eviction): they
    /// stay used now and count as free for pipelining.
    pub fn release(
        &mut self,
        namespace: &str,
        node: &str,
        devices: &PodDevices,
        init_count: usize,
        requests: &Resources,
    ) -> Option<PlacedUsage> {
        let &i = self.index.get(node)?;
        let released = PlacedUsage {
            node: i,
            namespace: namespace.to_string(),
            usage: collapse_pod_usage(devices, init_count)
                .into_iter()
                .collect(),
            requests: requests.clone(),
        };
        self.apply_release(&released, true);
        Some(released)
    }

    /// Takes back a [`NodeSet::release`].
    pub fn unrelease(&mut self, released: &PlacedUsage) {
        self.apply_release(released, false);
    }

    fn apply_release(&mut self, released: &PlacedUsage, add: bool) {
        let node = &self.nodes[released.node];
        let entry = &node.gpus;
        let change = self
            .changed
            .get_or_insert_with(released.node, || NodeChange::none(node));
        for (uuid, u) in &released.usage {
            if let Some(d) = entry.devices.iter().position(|d| d.id == *uuid) {
                if add {
                    change.releasing[d].add(u);
                } else {
                    change.releasing[d].sub(u);
                }
            }
        }
        if add {
            change.releasing_requests.add(&released.requests);
        } else {
            change.releasing_requests.saturating_sub(&released.requests);
        }
        change.releasing_requests.prune_zeros();
        if change.unchanged(&entry.effective, &node.resources.requested) {
            self.changed.remove(released.node);
        }
    }

    /// The node's usage once what the session evicts from it is gone, with
    /// `also` released on top (tasks an action considers evicting).
    pub fn future_usage(&self, node: &str, also: &[(Arc<str>, GpuUsage)]) -> Option<Vec<GpuUsage>> {
        let &i = self.index.get(node)?;
        let entry = &self.nodes[i].gpus;
        let mut usage = self.usage_of(i).to_vec();
        if let Some(c) = self.changed.get(i) {
            for (u, r) in usage.iter_mut().zip(&c.releasing) {
                u.sub(r);
            }
        }
        for (uuid, r) in also {
            if let Some(d) = entry.devices.iter().position(|d| d.id == *uuid) {
                usage[d].sub(r);
            }
        }
        Some(usage)
    }

    /// What the node has left of each resource it offers once what the session
    /// evicts from it and `also` are gone: the most [`Self::fit_requests`] can
    /// grant pods there. `None` when its allocatable was never seen: such a node
    /// is not judged on requests at all.
    pub fn requests_left_once_gone(&self, node: &str, also: &Resources) -> Option<Resources> {
        let &i = self.index.get(node)?;
        let allocatable = &self.nodes[i].resources.allocatable;
        if allocatable.is_empty() {
            return None;
        }
        let mut requested = self.requested_of(i).clone();
        if let Some(c) = self.changed.get(i) {
            requested.saturating_sub(&c.releasing_requests);
        }
        requested.saturating_sub(also);
        Some(allocatable.minus(&requested))
    }

    /// Whether a pod taking `want` (see `placement::resource_fit`) fits the
    /// node: as it is now, or, with `future`, once what the session evicts from it
    /// and `future`'s requests are gone (the fit a pipelined task needs).
    pub fn fit_requests(
        &self,
        node: &str,
        future: Option<&Resources>,
        want: &Resources,
    ) -> Result<(), String> {
        let &i = self.index.get(node).ok_or("node(s) were not found")?;
        let mut requested = self.requested_of(i).clone();
        if let Some(also) = future {
            if let Some(c) = self.changed.get(i) {
                requested.saturating_sub(&c.releasing_requests);
            }
            requested.saturating_sub(also);
        }
        fits_node(&self.nodes[i].resources.allocatable, &requested, want)
    }

    /// Fits a pod on the node as it will be once what the session evicts from it
    /// (and `also`) is gone: the fit a pipelined task needs.
    pub fn fit_future(
        &self,
        node: &str,
        also: &[(Arc<str>, GpuUsage)],
        request: &FitRequest<'_>,
    ) -> Result<Placement, NodeRejection> {
        let Some(&i) = self.index.get(node) else {
            return Err(NodeRejection::Unusable(crate::ledger::NODE_UNREGISTERED));
        };
        let entry = &self.nodes[i].gpus;
        if let Some(reason) = entry.unusable() {
            return Err(NodeRejection::Unusable(reason));
        }
        let usage = self.future_usage(node, also).unwrap_or_default();
        fit_pod(
            NodeView {
                usage: &usage,
                ..entry.view()
            },
            request,
        )
        .map_err(NodeRejection::Fit)
    }

    fn apply(&mut self, placed: &PlacedUsage, add: bool) {
        let node = &self.nodes[placed.node];
        let entry = &node.gpus;
        let change = self
            .changed
            .get_or_insert_with(placed.node, || NodeChange::none(node));
        for (uuid, u) in &placed.usage {
            if let Some(d) = entry.devices.iter().position(|d| d.id == *uuid) {
                if add {
                    change.usage[d].add(u);
                } else {
                    change.usage[d].sub(u);
                }
                if let (Some(room), Some(&is_vendor)) =
                    (change.rooms.get_mut(d), entry.is_vendor.get(d))
                {
                    *room = GpuRoom::of(&entry.devices[d], &change.usage[d], is_vendor);
                }
            }
        }
        change.score = node_score(&entry.devices, &change.usage);
        if add {
            change.requested.add(&placed.requests);
        } else {
            change.requested.saturating_sub(&placed.requests);
        }
        change.requested.prune_zeros();
        if change.unchanged(&entry.effective, &node.resources.requested) {
            self.changed.remove(placed.node);
        }
        let (mem, cores) = usage_totals(placed.usage.iter().map(|(_, u)| u));
        let ns = self
            .namespace_usage
            .entry(placed.namespace.clone())
            .or_default();
        if add {
            ns.0 = ns.0.saturating_add(mem);
            ns.1 = ns.1.saturating_add(cores);
        } else {
            ns.0 = ns.0.saturating_sub(mem);
            ns.1 = ns.1.saturating_sub(cores);
        }
        if *ns == (0, 0) {
            self.namespace_usage.remove(&placed.namespace);
        }
    }

    /// Nodes on which this session evicts something, by name.
    pub fn releasing_nodes(&self) -> impl Iterator<Item = &str> {
        self.changed
            .iter()
            .filter(|(_, c)| {
                c.releasing.iter().any(|r| *r != GpuUsage::default())
                    || !c.releasing_requests.is_empty()
            })
            .map(|(i, _)| self.nodes[i].name.as_str())
    }

    /// Nodes the session placed pods on, by name.
    pub fn changed_nodes(&self) -> impl Iterator<Item = &str> {
        self.changed
            .iter()
            .map(|(i, _)| self.nodes[i].name.as_str())
    }
}

impl NodeSource for NodeSet {
    fn len(&self) -> usize {
        self.nodes.len()
    }

    fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    fn sorted_by_name(&self) -> bool {
        true
    }

    fn in_score_order(&self, highest_first: bool) -> Option<Box<dyn Iterator<Item = usize> + '_>> {
        let order = self.order.as_ref()?;
        let len = self.nodes.len();
        // The nodes this session changed rank by their changed score.
        let changed: Vec<(f64, usize)> = self.changed.iter().map(|(i, c)| (c.score, i)).collect();
        Some(Box::new(order.walk_merged(
            highest_first,
            changed,
            move |i| i < len && self.changed.is_unchanged(i),
        )))
    }

    fn rank(&self, i: usize, request: &PodRequest) -> Option<RankFacts> {
        // The rooms are kept as the session places and takes back, so the screen
        // costs a loop over the node's GPUs: under binpack the best-ranked nodes
        // are the fullest, and fitting each in turn cost more than the choice.
        let node = &self.nodes[i];
        let (score, may) = match self.changed.get(i) {
            Some(c) => (c.score, may_fit(&c.rooms, request)),
            None => (
                node.score,
                node.screen.admits(request) && may_fit(&node.rooms, request),
            ),
        };
        Some(RankFacts {
            score,
            usable: node.usable,
            may_fit: node.usable && may,
        })
    }

    fn fit(&self, i: usize, request: &FitRequest<'_>) -> Result<Placement, NodeRejection> {
        let entry = &self.nodes[i].gpus;
        if let Some(reason) = entry.unusable() {
            return Err(NodeRejection::Unusable(reason));
        }
        fit_pod(
            NodeView {
                usage: self.usage_of(i),
                ..entry.view()
            },
            request,
        )
        .map_err(NodeRejection::Fit)
    }

    fn quota(&self, namespace: &str) -> QuotaHeadroom {
        let mut q = self.quotas.get(namespace).copied().unwrap_or_default();
        if let Some((mem, cores)) = self.namespace_usage.get(namespace) {
            if let Some((_, used)) = q.memory.as_mut() {
                *used = used.saturating_add(*mem);
            }
            if let Some((_, used)) = q.cores.as_mut() {
                *used = used.saturating_add(*cores);
            }
        }
        q
    }

    fn facts(&self, i: usize) -> Option<NodeFacts<'_>> {
        let node = &self.nodes[i];
        Some(NodeFacts {
            name: &node.name,
            gpus: NodeView {
                usage: self.usage_of(i),
                ..node.gpus.view()
            },
            allocatable: &node.resources.allocatable,
            requested: self.requested_of(i),
            traits: node.resources.traits.as_deref(),
            measured: MeasuredUsage {
                entry: self.measured.lookup(&node.name),
                now: self.now,
            },
        })
    }
}
