//! Queueing hints, kept tasks and kept jobs change what a cycle costs, never what
//! it decides:
//! on random clusters and workloads (gangs of mixed sizes in weighted queues,
//! priorities, preemption and reclaim, members that follow or repel other gangs'
//! members through required pod affinity; queues reweighed, PodGroups moved to
//! other queues, nodes joining, pods of other schedulers taking nodes' CPU, the
//! scheduler configuration reloaded with other plugin switches), a
//! scheduler planning with them makes the same
//! placements, evictions and verdicts, cycle after cycle, as one whose every
//! session is built anew and tries every job. Before every cycle, the state the
//! planner would build from what it kept (its copy of the book, holdings, tasks
//! and jobs, brought up to date from what the book and the ledger noted as
//! changed) must equal a state built anew from the live book and ledger: a
//! change the book or the ledger failed to note shows there even when it would
//! not change a decision. So must the figures the plugins kept from the last
//! session, brought up to that state, equal figures derived from it anew.

use crate::gang::kept_holdings::KeptHoldings;
use crate::gang::kept_nodes::KeptNodes;
use crate::gang::kept_state::KeptState;
use crate::gang::planner_book::PlannerBook;
use crate::gang::queueing_hints::QueueingHints;
use crate::gang::snapshot::{LedgerPicture, SnapshotInput, build_state};
use crate::resources::Resources;
use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::{Cluster, hostname_gpu_node, member, podgroup, queue};
use crate::volcano::framework::session_memory::SessionMemory;
use crate::volcano::framework::{GangPhase, SessionState};
use crate::volcano::plugins::registry;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Preemption and reclaim besides allocate (the other half of the cases plan
/// with the default configuration).
const WITH_EVICTIONS: &str = "actions: \"enqueue, allocate, preempt, reclaim, backfill\"
tiers: [{plugins: [{name: priority}, {name: gang}, {name: conformance}]}, {plugins: [{name: proportion}]}]
";

/// What a reloaded configuration may be: the default one, [`WITH_EVICTIONS`],
/// and drf (whose figures sessions keep) with hierarchical queue order or
/// without its job order.
const RELOADED: [&str; 3] = [
    WITH_EVICTIONS,
    "actions: \"enqueue, allocate, backfill\"
tiers: [{plugins: [{name: priority}, {name: gang}, {name: conformance}]}, {plugins: [{name: drf, enableHierarchy: true}, {name: proportion}]}]
",
    "actions: \"enqueue, allocate, preempt, reclaim, backfill\"
tiers: [{plugins: [{name: priority}, {name: gang}, {name: conformance}]}, {plugins: [{name: drf, enableJobOrder: false}, {name: proportion}]}]
",
];

/// One gang of the workload: minMember, extra members, queue, memory each
/// member asks (MiB), priority, how its members stand to other pods, and
/// whether they are alike.
pub(super) type GangSpec = (u32, u32, usize, u64, i32, Bearing, Shape);

/// Whether a gang's members ask alike.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shape {
    /// Every member asks one GPU and a core.
    Alike,
    /// The first member asks [`MASTER_CORES`] and no GPU, the others one GPU
    /// and [`WORKER_CORES`]: where the master goes decides whether a worker
    /// finds the cores next to a free card.
    CpuMaster,
    /// Every member asks alike but carries a tier of its own (the gang's, then
    /// the next ones): a pod repelling one tier keeps some members off its
    /// node and not others.
    Staggered,
    /// As [`Shape::CpuMaster`], but the second member asks for a GPU type no
    /// node has: the gang is ready only when its minimum leaves it out.
    Mistyped,
}

/// Cores a [`Shape::CpuMaster`] gang's first member asks (a node offers 64).
const MASTER_CORES: u32 = 40;
/// Cores each other member of a [`Shape::CpuMaster`] gang asks.
const WORKER_CORES: u32 = 30;

/// `pod` asking `cores` cores and, unless `gpu` is false, what it asked of the
/// GPUs.
pub(super) fn asking(mut pod: Pod, cores: u32, gpu: bool) -> Pod {
    if let Some(resources) = pod
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
        .and_then(|c| c.resources.as_mut())
    {
        resources.requests = Some(
            serde_json::from_value(json!({"cpu": cores.to_string(), "memory": "1Gi"}))
                .expect("requests"),
        );
        if !gpu {
            resources.limits = None;
        }
    }
    pod
}

/// `pod` asking for a GPU type no node has (the nodes hold H100s).
pub(super) fn mistyped(mut pod: Pod) -> Pod {
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert("nvidia.com/use-gputype".into(), "A100".into());
    pod
}

/// The tiers members are labelled with, for other members' pod affinity.
const TIERS: usize = 3;

/// A gang's members' tier label and required pod affinity, per node.
#[derive(Debug, Clone, Copy)]
pub(super) enum Bearing {
    /// Labelled with this tier, no terms.
    Plain(usize),
    /// Labelled with the first tier, placed only next to a pod of the second.
    Follows(usize, usize),
    /// Labelled with the first tier, never placed next to a pod of the second.
    Repels(usize, usize),
}

impl Bearing {
    fn tier(self) -> usize {
        match self {
            Self::Plain(t) | Self::Follows(t, _) | Self::Repels(t, _) => t,
        }
    }

    /// The member's `spec.affinity`.
    fn affinity(self) -> Option<serde_json::Value> {
        let term = |tier: usize| {
            json!([{"labelSelector": {"matchLabels": {"tier": format!("t{tier}")}},
                "topologyKey": HOSTNAME}])
        };
        match self {
            Self::Plain(_) => None,
            Self::Follows(_, to) => Some(json!({"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": term(to)}})),
            Self::Repels(_, from) => Some(json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": term(from)}})),
        }
    }
}

fn bearing() -> impl Strategy<Value = Bearing> {
    prop_oneof![
        2 => (0..TIERS).prop_map(Bearing::Plain),
        1 => (0..TIERS, 0..TIERS).prop_map(|(t, to)| Bearing::Follows(t, to)),
        1 => (0..TIERS, 0..TIERS).prop_map(|(t, from)| Bearing::Repels(t, from)),
    ]
}

/// The node label pod affinity terms here are judged by.
pub(super) const HOSTNAME: &str = "kubernetes.io/hostname";

/// What happens between two cycles.
#[derive(Debug, Clone)]
pub(super) enum Change {
    /// The next gang of the workload arrives.
    Arrive,
    /// The `n`th pod the ledger holds leaves (room is freed).
    Leave(usize),
    /// The `n`th member gets a new pod version that changes nothing.
    Relabel(usize),
    /// The `n`th queue gets weight `w`.
    Reweigh(usize, u32),
    /// The `n`th gang's PodGroup moves to the `q`th queue.
    Requeue(usize, usize),
    /// A node of this many whole cards joins.
    NodeJoins(usize),
    /// The `n`th pod the ledger holds is bound to its node.
    Bind(usize),
    /// The `n`th member (waiting or not) is deleted.
    Delete(usize),
    /// The `n`th pod the ledger holds starts leaving (a deletion timestamp).
    Evicting(usize),
    /// The `n`th gang's PodGroup is deleted (its members stay).
    Ungroup(usize),
    /// The `n`th member gets a new pod version at priority `p`.
    Reprioritize(usize, i32),
    /// An hour passes: reservations whose bind never came expire.
    Expire,
    /// The `n`th member's tier label moves to the next tier.
    Retier(usize),
    /// A pod of another scheduler asking `cpu` cores and no GPU starts on the
    /// `n`th node: the node's CPU, memory and pods change, its GPUs do not.
    PlainPod(usize, u32),
    /// The scheduler configuration is reloaded: the default one for 0, the
    /// `n - 1`th of [`RELOADED`] otherwise (modulo their number).
    Reconfigure(usize),
    /// The `n`th node is labelled rack `r` and offers `r` × 16 cores, with a
    /// `PreferNoSchedule` taint from rack 3 on: its traits and allocatable
    /// change, its GPUs do not.
    NodeResized(usize, u32),
    /// The pod of HAMi's scheduler holding a slice of the `n`th node's first
    /// GPU (assigned before the first cycle, never bound) finishes: the node's
    /// GPUs change, its CPU, memory and pods do not.
    ForeignSliceEnds(usize),
    /// A pod of HAMi's scheduler takes a slice of the first free GPU of the
    /// `n`th node, if it has one (assigned, never bound): the node's GPUs
    /// change, its CPU, memory and pods do not. Only room is taken, and yet a
    /// gang whose first member no longer fits where it went may now fit whole
    /// elsewhere.
    ForeignSliceStarts(usize),
    /// The `n`th node's device plugin registers its cards again as another
    /// model (H100 for an even `m`, A100 for an odd one): the node's
    /// registered GPUs change, and so does what members held there are charged.
    Remodelled(usize, usize),
    /// The `n`th node's device plugin withdraws its registration: the node
    /// stays, its GPUs become unusable and members held there are charged no
    /// card (a `Remodelled` registers them again).
    Unregistered(usize),
    /// Nothing: the period elapsed.
    Tick,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        2 => Just(Change::Arrive),
        2 => (0usize..64).prop_map(Change::Leave),
        2 => (0usize..64).prop_map(Change::Relabel),
        1 => (0usize..4, 1u32..5).prop_map(|(n, w)| Change::Reweigh(n, w)),
        1 => (0usize..16, 0usize..4).prop_map(|(n, q)| Change::Requeue(n, q)),
        1 => (1usize..3).prop_map(Change::NodeJoins),
        1 => (0usize..64).prop_map(Change::Retier),
        1 => (0usize..64).prop_map(Change::Bind),
        1 => (0usize..64).prop_map(Change::Delete),
        1 => (0usize..64).prop_map(Change::Evicting),
        1 => (0usize..16).prop_map(Change::Ungroup),
        1 => (0usize..64, prop_oneof![Just(0i32), Just(500i32)])
            .prop_map(|(n, p)| Change::Reprioritize(n, p)),
        1 => Just(Change::Expire),
        1 => (0usize..8, prop_oneof![Just(4u32), Just(WORKER_CORES), Just(60u32)])
            .prop_map(|(n, cpu)| Change::PlainPod(n, cpu)),
        1 => (0usize..=RELOADED.len()).prop_map(Change::Reconfigure),
        1 => (0usize..8, 1u32..5).prop_map(|(n, r)| Change::NodeResized(n, r)),
        1 => (0usize..8).prop_map(Change::ForeignSliceEnds),
        2 => (0usize..8).prop_map(Change::ForeignSliceStarts),
        1 => (0usize..8, 0usize..2).prop_map(|(n, m)| Change::Remodelled(n, m)),
        1 => (0usize..8).prop_map(Change::Unregistered),
        1 => Just(Change::Tick),
    ]
}

/// A member asking `mem` MiB of one GPU, at `priority`, with `bearing`.
pub(super) fn sized_member(
    name: &str,
    group: &str,
    created: u32,
    (mem, priority, bearing): (u64, i32, Bearing),
) -> Pod {
    let mut pod = member(name, group, created);
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), format!("t{}", bearing.tier()));
    if let Some(spec) = pod.spec.as_mut() {
        spec.priority = Some(priority);
        spec.affinity = bearing
            .affinity()
            .map(|a| serde_json::from_value(a).expect("affinity"));
        if let Some(limits) = spec
            .containers
            .first_mut()
            .and_then(|c| c.resources.as_mut())
            .and_then(|r| r.limits.as_mut())
        {
            limits.insert("nvidia.com/gpumem".into(), Quantity(mem.to_string()));
        }
    }
    pod
}

/// A node of `gpus` whole cards, 64 cores and room for pods (a member asking
/// no GPU is counted against it), labelled with its hostname.
fn cluster_node(name: &str, gpus: usize) -> Node {
    let mut node = hostname_gpu_node(name, gpus);
    if let Some(allocatable) = node.status.as_mut().and_then(|s| s.allocatable.as_mut()) {
        allocatable.insert("pods".into(), Quantity("110".into()));
    }
    node
}

/// Two schedulers over the same cluster: one planning incrementally, one from
/// scratch.
pub(super) struct Pair {
    pub(super) incremental: Cluster,
    pub(super) scratch: Cluster,
    /// Nodes joined so far.
    joined: std::cell::Cell<usize>,
    /// Pods of other schedulers started so far.
    plain_pods: std::cell::Cell<usize>,
}

impl Pair {
    pub(super) fn new(nodes: &[usize], queues: usize, evictions: bool) -> Self {
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let spec: Vec<(&str, usize)> = names
            .iter()
            .map(String::as_str)
            .zip(nodes.iter().copied())
            .collect();
        let make = || {
            let labelled = spec
                .iter()
                .map(|(name, gpus)| cluster_node(name, *gpus))
                .collect();
            let c = Cluster::from_nodes(labelled, GangConfig::default());
            if evictions {
                c.s.set_gang_conf(crate::volcano::load_conf(WITH_EVICTIONS).expect("conf"));
            }
            for q in 0..queues {
                c.s.apply_queue(&queue(
                    &format!("q{q}"),
                    json!({"weight": q + 1, "reclaimable": true}),
                ));
            }
            c
        };
        Self {
            incremental: make(),
            scratch: make(),
            joined: std::cell::Cell::new(0),
            plain_pods: std::cell::Cell::new(0),
        }
    }

    pub(super) fn both(&self) -> [&Cluster; 2] {
        [&self.incremental, &self.scratch]
    }

    pub(super) fn arrive(
        &self,
        g: usize,
        (min, extra, q, mem, priority, bearing, shape): GangSpec,
        queues: usize,
    ) {
        let group = format!("g{g}");
        for c in self.both() {
            c.s.apply_podgroup(&podgroup(
                &group,
                min,
                &format!("q{}", q % queues),
                json!({}),
            ));
            for m in 0..min + extra {
                let pod = sized_member(
                    &format!("g{g}m{m}"),
                    &group,
                    g as u32,
                    (mem, priority, bearing),
                );
                c.add(&match (shape, m) {
                    (Shape::Alike, _) => pod,
                    (Shape::CpuMaster | Shape::Mistyped, 0) => asking(pod, MASTER_CORES, false),
                    (Shape::Mistyped, 1) => mistyped(asking(pod, WORKER_CORES, true)),
                    (Shape::CpuMaster | Shape::Mistyped, _) => asking(pod, WORKER_CORES, true),
                    (Shape::Staggered, m) => {
                        let mut pod = pod;
                        let tier = (bearing.tier() + m as usize) % TIERS;
                        pod.metadata
                            .labels
                            .get_or_insert_default()
                            .insert("tier".into(), format!("t{tier}"));
                        pod
                    }
                });
            }
        }
    }

    /// The `n`th node (by name, modulo their number) and its number of GPUs.
    fn node_and_gpus(&self, n: usize) -> (String, usize) {
        let mut nodes: Vec<(String, usize)> = self.incremental.s.with_ledger(|l| {
            l.nodes()
                .into_iter()
                .map(|(name, entry)| (name.clone(), entry.devices.len()))
                .collect()
        });
        nodes.sort();
        nodes.swap_remove(n % nodes.len())
    }

    /// The `n`th pod the incremental side's ledger holds (by UID), if any.
    fn held_pod(&self, n: usize) -> Option<String> {
        let uids: Vec<String> = self
            .incremental
            .s
            .with_ledger(|l| l.pods().map(|p| p.uid.clone()).collect());
        let mut uids = uids;
        uids.sort();
        (!uids.is_empty()).then(|| uids[n % uids.len()].clone())
    }

    pub(super) async fn apply(
        &self,
        change: &Change,
        arrived: &mut usize,
        workload: &[GangSpec],
        queues: usize,
    ) {
        match change {
            Change::Arrive => {
                if let Some(spec) = workload.get(*arrived) {
                    self.arrive(*arrived, *spec, queues);
                    *arrived += 1;
                }
            }
            Change::Leave(n) => {
                if let Some(uid) = self.held_pod(*n) {
                    for c in self.both() {
                        c.s.forget_pod(&uid);
                    }
                }
            }
            Change::Relabel(n) => {
                if let Some(name) = nth_member(*n, &workload[..*arrived]) {
                    self.relabel(&name, |labels| {
                        labels.insert("touched".into(), format!("{n}"));
                    })
                    .await;
                }
            }
            Change::Retier(n) => {
                if let Some(name) = nth_member(*n, &workload[..*arrived]) {
                    self.relabel(&name, |labels| {
                        let next = labels
                            .get("tier")
                            .and_then(|t| t.trim_start_matches('t').parse::<usize>().ok())
                            .map_or(0, |t| (t + 1) % TIERS);
                        labels.insert("tier".into(), format!("t{next}"));
                    })
                    .await;
                }
            }
            Change::Reweigh(n, weight) => {
                for c in self.both() {
                    c.s.apply_queue(&queue(
                        &format!("q{}", n % queues),
                        json!({"weight": weight, "reclaimable": true}),
                    ));
                }
            }
            Change::Requeue(n, q) => {
                if *arrived == 0 {
                    return;
                }
                let g = n % *arrived;
                let (min, ..) = workload[g];
                for c in self.both() {
                    c.s.apply_podgroup(&podgroup(
                        &format!("g{g}"),
                        min,
                        &format!("q{}", q % queues),
                        json!({}),
                    ));
                }
            }
            Change::NodeJoins(gpus) => {
                let name = format!("joined{}", self.joined.get());
                self.joined.set(self.joined.get() + 1);
                for c in self.both() {
                    c.s.apply_node(&cluster_node(&name, *gpus));
                }
            }
            Change::NodeResized(n, rack) => {
                let (name, gpus) = &self.node_and_gpus(*n);
                let mut node = cluster_node(name, *gpus);
                node.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("rack".into(), format!("r{rack}"));
                if let Some(allocatable) = node.status.as_mut().and_then(|s| s.allocatable.as_mut())
                {
                    allocatable.insert("cpu".into(), Quantity((rack * 16).to_string()));
                }
                // Racks 3 and up are tainted softly: nodeorder scores taints
                // only while some node has one.
                if *rack >= 3 {
                    node.spec.get_or_insert_default().taints = Some(vec![
                        serde_json::from_value(
                            json!({"key": "rack", "value": "old", "effect": "PreferNoSchedule"}),
                        )
                        .expect("taint"),
                    ]);
                }
                for c in self.both() {
                    c.s.apply_node(&node);
                }
            }
            Change::Unregistered(n) => {
                let (name, gpus) = &self.node_and_gpus(*n);
                let mut node = cluster_node(name, *gpus);
                if let Some(a) = node.metadata.annotations.as_mut() {
                    a.remove("hami.io/node-nvidia-register");
                }
                for c in self.both() {
                    c.s.apply_node(&node);
                }
            }
            Change::Remodelled(n, model) => {
                let (name, gpus) = &self.node_and_gpus(*n);
                let mut node = cluster_node(name, *gpus);
                if model % 2 == 1
                    && let Some(register) = node
                        .metadata
                        .annotations
                        .as_mut()
                        .and_then(|a| a.get_mut("hami.io/node-nvidia-register"))
                {
                    *register = register.replace("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB");
                }
                for c in self.both() {
                    c.s.apply_node(&node);
                }
            }
            Change::ForeignSliceEnds(n) => {
                let mut nodes: Vec<String> = self
                    .incremental
                    .s
                    .with_ledger(|l| l.node_names().cloned().collect());
                nodes.sort();
                let pod = foreign_slice(&nodes[n % nodes.len()], "Succeeded");
                for c in self.both() {
                    c.s.apply_pod(&pod);
                }
            }
            Change::ForeignSliceStarts(n) => {
                let (name, _) = &self.node_and_gpus(*n);
                let free = self.incremental.s.with_ledger(|l| {
                    l.nodes()
                        .into_iter()
                        .find(|(node, _)| *node == name)
                        .and_then(|(_, entry)| entry.effective.iter().position(|u| u.used == 0))
                });
                let Some(gpu) = free else { return };
                let pod =
                    foreign_slice_named(&format!("foreign-{name}-{gpu}"), (name, gpu), "Pending");
                for c in self.both() {
                    c.s.apply_pod(&pod);
                }
            }
            Change::PlainPod(n, cpu) => {
                let mut nodes: Vec<String> = self
                    .incremental
                    .s
                    .with_ledger(|l| l.node_names().cloned().collect());
                nodes.sort();
                let node = &nodes[n % nodes.len()];
                let started = self.plain_pods.get();
                self.plain_pods.set(started + 1);
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("plain{started}"), "namespace": "other",
                        "uid": format!("uid-plain{started}")},
                    "spec": {"schedulerName": "default-scheduler", "nodeName": node,
                        "containers": [{"name": "c", "resources": {
                            "requests": {"cpu": cpu.to_string(), "memory": "1Gi"}}}]},
                    "status": {"phase": "Running"}
                }))
                .expect("plain pod");
                for c in self.both() {
                    c.s.apply_pod(&pod);
                }
            }
            Change::Bind(n) => {
                let Some(uid) = self.held_pod(*n) else { return };
                let node = self
                    .incremental
                    .s
                    .with_ledger(|l| l.pod(&uid).map(|p| p.node.clone()));
                if let (Some(name), Some(node)) = (uid.strip_prefix("uid-"), node) {
                    for c in self.both() {
                        let _ = c.bind(name, &node).await;
                    }
                }
            }
            Change::Delete(n) => {
                if let Some(name) = nth_member(*n, &workload[..*arrived]) {
                    for c in self.both() {
                        c.s.forget_pod(&format!("uid-{name}"));
                    }
                }
            }
            Change::Evicting(n) => {
                let Some(uid) = self.held_pod(*n) else { return };
                if let Some(name) = uid.strip_prefix("uid-") {
                    for c in self.both() {
                        if let Some(mut pod) = c.pod(name).await {
                            pod.metadata.deletion_timestamp =
                                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                                    "2026-11-22T10:00:00Z".parse().expect("time"),
                                ));
                            c.add(&pod);
                        }
                    }
                }
            }
            Change::Ungroup(n) => {
                if *arrived > 0 {
                    for c in self.both() {
                        c.s.forget_podgroup("ml", &format!("g{}", n % *arrived));
                    }
                }
            }
            Change::Reprioritize(n, priority) => {
                if let Some(name) = nth_member(*n, &workload[..*arrived]) {
                    for c in self.both() {
                        if let Some(mut pod) = c.pod(&name).await {
                            if let Some(spec) = pod.spec.as_mut() {
                                spec.priority = Some(*priority);
                            }
                            c.add(&pod);
                        }
                    }
                }
            }
            Change::Expire => {
                for c in self.both() {
                    c.clock.advance(std::time::Duration::from_secs(3600));
                    c.s.expire_reservations(true).await;
                }
            }
            Change::Reconfigure(n) => {
                let conf = match n % (RELOADED.len() + 1) {
                    0 => crate::volcano::conf::SchedulerConf::default(),
                    k => crate::volcano::load_conf(RELOADED[k - 1]).expect("conf"),
                };
                for c in self.both() {
                    c.s.set_gang_conf(conf.clone());
                }
            }
            Change::Tick => {}
        }
    }

    /// A new version of member `name` on both sides, its labels changed by `change`.
    async fn relabel(&self, name: &str, change: impl Fn(&mut BTreeMap<String, String>)) {
        for c in self.both() {
            if let Some(mut pod) = c.pod(name).await {
                change(pod.metadata.labels.get_or_insert_default());
                c.add(&pod);
            }
        }
    }

    /// One cycle on each side; the scratch side first forgets everything it
    /// kept, so its session is built anew and tries every job. The incremental
    /// side's kept state is checked against one built anew first.
    pub(super) async fn cycle(&self) -> Result<(usize, usize), TestCaseError> {
        kept_state_is_current(&self.incremental).await?;
        {
            let memory = self.scratch.s.gang.planner.lock().await;
            *memory.hints.lock() = QueueingHints::default();
            *memory.book.lock() = PlannerBook::default();
            *memory.kept.lock() = KeptState::default();
            *memory.session.lock() = SessionMemory::default();
        }
        let a = self.incremental.s.run_gang_cycle().await;
        let b = self.scratch.s.run_gang_cycle().await;
        Ok((a, b))
    }
}

/// The session state the planner of `c` builds from what it kept equals one
/// built anew from the live book and ledger.
async fn kept_state_is_current(c: &Cluster) -> Result<(), TestCaseError> {
    let memory = c.s.gang.planner.lock().await;
    let conf = c.s.gang.conf.load_full();
    let dims = c.s.vgpu_dims();
    let parse = |pod: &Pod| c.s.pod_context(pod);
    let mut copy = memory.book.lock();
    let mut kept_state = memory.kept.lock();
    kept_state.note(copy.follow(&mut c.s.gang.book.write()));
    let live = c.s.gang.book.read().clone();
    let input = SnapshotInput {
        book: &live,
        conf: &conf.conf,
        dims: &dims,
        inqueue: &memory.inqueue,
        only: None,
        parse: &parse,
        now: c.s.clock().wall(),
    };
    let picture = kept_state.picture(&c.s.ledger.read(), copy.book());
    let kept = kept_state.state(
        &SnapshotInput {
            book: copy.book(),
            ..input
        },
        &copy,
        picture,
    );
    let mut holdings = KeptHoldings::default();
    let (picture, _) = LedgerPicture::take(
        &c.s.ledger.read(),
        &live,
        (&mut holdings, &mut KeptNodes::default()),
        None,
    );
    let anew = build_state(&input, picture, &holdings);
    prop_assert_eq!(&kept.jobs, &anew.jobs, "jobs kept and built anew");
    prop_assert_eq!(&kept.queues, &anew.queues, "queues kept and built anew");
    prop_assert!(kept == anew, "the rest of the session state");
    let requested = |state: &SessionState| -> Vec<(String, Resources)> {
        state
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.resources.requested.clone()))
            .collect()
    };
    prop_assert_eq!(
        requested(&kept),
        requested(&anew),
        "what nodes' pods and planned members request"
    );
    // Traits and pods by address: the ledger replaces them when they change.
    let stale_nodes: Vec<&str> = kept
        .nodes
        .iter()
        .zip(anew.nodes.iter())
        .filter(|(k, a)| {
            let same_traits = match (&k.resources.traits, &a.resources.traits) {
                (Some(k), Some(a)) => Arc::ptr_eq(k, a),
                (k, a) => k.is_none() && a.is_none(),
            };
            !same_traits
                || !Arc::ptr_eq(&k.resources.pods, &a.resources.pods)
                || k.resources.allocatable != a.resources.allocatable
        })
        .map(|(k, _)| k.name.as_str())
        .collect();
    prop_assert!(
        stale_nodes.is_empty(),
        "nodes whose allocatable, traits or pods are not the ledger's: {:?}",
        stale_nodes
    );
    prop_assert_eq!(
        kept.nodes.across(),
        anew.nodes.across(),
        "whether pods on the nodes carry anti-affinity or preferred terms, and nodes soft taints"
    );
    prop_assert_eq!(
        kept_state.planned_gated(),
        holdings.planned_gated(),
        "planned members still gated"
    );
    // What the plugins kept from the last session, brought up to this state,
    // equals what they derive from it anew.
    let build = || registry::build(&conf.conf).expect("the configuration builds");
    let mut session = memory.session.lock();
    let mut kept_plugins = build();
    kept_plugins.reuse(session.take_plugins());
    kept_plugins.open(&kept);
    session.keep_plugins(kept_plugins.keep());
    let mut fresh_plugins = build();
    fresh_plugins.open(&anew);
    prop_assert_eq!(
        session.plugin_figures(),
        format!("{:?}", fresh_plugins.keep()),
        "plugins' figures kept and derived anew"
    );
    drop(session);
    let mut hints = memory.hints.lock();
    let missed = hints.world_differences(&kept, &conf.conf, kept_state.journals());
    prop_assert!(
        missed.is_empty(),
        "the queueing hints' world brought up to date differs from one worked out whole: {:?}",
        missed
    );
    let stale = hints.stale_skips(&kept, &conf.conf, kept_state.journals());
    prop_assert!(
        stale.is_empty(),
        "jobs skipped although they changed since allocate failed them: {:?}",
        stale
    );
    Ok(())
}

/// The pod of HAMi's scheduler holding a slice of `node`'s first GPU, in
/// `phase`. (A slice only taken later is not a change the planner's hints may
/// ignore: with fewer free cards on one node, a gang's first member may go
/// elsewhere, where its whole gang fits.)
pub(super) fn foreign_slice(node: &str, phase: &str) -> Pod {
    foreign_slice_named(&format!("foreign-{node}"), (node, 0), phase)
}

/// A pod of HAMi's scheduler named `name` holding a slice of `node`'s `gpu`th
/// GPU, in `phase`.
fn foreign_slice_named(name: &str, (node, gpu): (&str, usize), phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "other", "uid": format!("uid-{name}"),
            "annotations": {
                "hami.io/vgpu-node": node,
                "hami.io/vgpu-devices-allocated": format!("GPU-{node}-{gpu},NVIDIA,1024,10:;")}},
        "spec": {"schedulerName": "hami-scheduler",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": phase}
    }))
    .expect("foreign pod")
}

/// The name of the `n`th member (modulo their number) of the gangs arrived.
fn nth_member(n: usize, arrived: &[GangSpec]) -> Option<String> {
    let members: usize = arrived
        .iter()
        .map(|(min, extra, ..)| (min + extra) as usize)
        .sum();
    if members == 0 {
        return None;
    }
    let mut k = n % members;
    for (g, (min, extra, ..)) in arrived.iter().enumerate() {
        let size = (min + extra) as usize;
        if k < size {
            return Some(format!("g{g}m{k}"));
        }
        k -= size;
    }
    None
}

/// What a side decided: every pod the ledger holds with its node and GPUs, every
/// gang's phase, ready count and reason.
pub(super) type Decisions = (
    BTreeMap<String, (String, String)>,
    BTreeMap<String, (GangPhase, usize, Option<&'static str>)>,
);

pub(super) fn decisions(c: &Cluster) -> Decisions {
    let held = c.s.with_ledger(|l| {
        l.pods()
            .map(|p| (p.uid.clone(), (p.node.clone(), format!("{:?}", p.devices))))
            .collect()
    });
    let gangs =
        c.s.gang_view()
            .gangs
            .iter()
            .map(|g| (g.gang.clone(), (g.phase, g.ready, g.reason)))
            .collect();
    (held, gangs)
}

fn gang_spec() -> impl Strategy<Value = GangSpec> {
    (
        1u32..4,
        0u32..2,
        0usize..3,
        prop_oneof![Just(20_000u64), Just(40_000u64), Just(80_000u64)],
        prop_oneof![Just(0i32), Just(100i32), Just(1000i32)],
        bearing(),
        prop_oneof![
            6 => Just(Shape::Alike),
            2 => Just(Shape::CpuMaster),
            1 => Just(Shape::Mistyped)
        ],
    )
}

/// A random case: the cluster's nodes (GPUs each), queues, whether preempt and
/// reclaim run, the workload, how many of its gangs are there at first, and
/// what happens between cycles.
pub(super) struct Case {
    pub(super) nodes: Vec<usize>,
    pub(super) queues: usize,
    pub(super) evictions: bool,
    pub(super) workload: Vec<GangSpec>,
    pub(super) initial: usize,
    pub(super) changes: Vec<Change>,
}

/// Runs `case` on both sides, comparing their decisions after every cycle.
pub(super) fn same_decisions(case: &Case) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (workload, queues) = (&case.workload, case.queues);
    runtime.block_on(async {
        let pair = Pair::new(&case.nodes, queues, case.evictions);
        for c in pair.both() {
            for n in 0..case.nodes.len() {
                c.s.apply_pod(&foreign_slice(&format!("n{n}"), "Pending"));
            }
        }
        let mut arrived = 0;
        for _ in 0..case.initial.min(workload.len()) {
            pair.apply(&Change::Arrive, &mut arrived, workload, queues)
                .await;
        }
        let (a, b) = pair.cycle().await?;
        prop_assert_eq!(a, b, "committed in the first cycle");
        prop_assert_eq!(decisions(&pair.incremental), decisions(&pair.scratch));
        for (step, change) in case.changes.iter().enumerate() {
            pair.apply(change, &mut arrived, workload, queues).await;
            let (a, b) = pair.cycle().await?;
            prop_assert_eq!(a, b, "committed after step {} ({:?})", step, change);
            prop_assert_eq!(
                decisions(&pair.incremental),
                decisions(&pair.scratch),
                "after step {} ({:?})",
                step,
                change
            );
        }
        Ok(())
    })
}

/// A gang of one member asking a whole GPU, in the first queue, with `bearing`.
fn single(bearing: Bearing) -> GangSpec {
    (1, 0, 0, 80_000, 0, bearing, Shape::Alike)
}

#[test]
fn a_gang_following_pods_not_there_yet_is_planned_once_one_arrives() {
    // The follower waits for a pod of tier 1; the leader arrives, is placed, and
    // the follower may join it on its node.
    let case = Case {
        nodes: vec![2],
        queues: 1,
        evictions: false,
        workload: vec![single(Bearing::Follows(0, 1)), single(Bearing::Plain(1))],
        initial: 1,
        changes: vec![Change::Arrive, Change::Tick, Change::Tick],
    };
    same_decisions(&case).expect("same decisions");
}

#[test]
fn a_gang_repelled_by_a_placed_pod_is_planned_once_that_pod_changes_tier() {
    // One node: the placed pod of tier 1 keeps the second gang off it until its
    // label moves to tier 2.
    let case = Case {
        nodes: vec![2],
        queues: 1,
        evictions: false,
        workload: vec![single(Bearing::Plain(1)), single(Bearing::Repels(0, 1))],
        initial: 2,
        changes: vec![Change::Retier(0), Change::Tick],
    };
    same_decisions(&case).expect("same decisions");
}

#[test]
fn a_reloaded_configuration_decides_as_one_loaded_afresh() {
    // Sessions kept drf's figures under one configuration; each reload changes
    // drf's switches (hierarchy on, job order off, back to the default).
    let case = Case {
        nodes: vec![2, 1],
        queues: 2,
        evictions: false,
        workload: vec![
            (2, 0, 0, 40_000, 0, Bearing::Plain(0), Shape::Alike),
            (1, 1, 1, 80_000, 100, Bearing::Plain(1), Shape::Alike),
            (1, 0, 0, 20_000, 1000, Bearing::Plain(2), Shape::Alike),
        ],
        initial: 2,
        changes: vec![
            Change::Reconfigure(2),
            Change::Arrive,
            Change::Reconfigure(3),
            Change::Leave(0),
            Change::Reconfigure(0),
            Change::Tick,
        ],
    };
    same_decisions(&case).expect("same decisions");
}

#[test]
fn members_on_a_node_registered_again_as_other_cards_are_charged_for_them() {
    // Both members hold a card of the one node; placements there change its
    // usage only, a new registration changes the cards they are charged.
    let case = Case {
        nodes: vec![3],
        queues: 1,
        evictions: false,
        workload: vec![single(Bearing::Plain(0)), single(Bearing::Plain(0))],
        initial: 1,
        changes: vec![
            Change::Arrive,
            Change::Remodelled(0, 1),
            Change::Tick,
            Change::Remodelled(0, 0),
            Change::Tick,
        ],
    };
    same_decisions(&case).expect("same decisions");
}

#[test]
fn a_pod_bound_already_is_not_bound_again() {
    // Found by the property test below: the second `Bind` of one pod was shown
    // to both schedulers as a version without its anti-affinity (the store's
    // slim copy), which no update of a real pod can be; a session built anew
    // then placed a gang that pod had kept off its node, while the incremental
    // side, rightly taking a pod's terms to stay as they are, did not try it.
    // A pod assigned already is not bound again: kube-scheduler binds a pod once.
    let case = Case {
        nodes: vec![2],
        queues: 1,
        evictions: false,
        workload: vec![
            (2, 0, 0, 20_000, 0, Bearing::Plain(0), Shape::Alike),
            (1, 0, 0, 20_000, 100, Bearing::Repels(0, 1), Shape::Alike),
            (1, 0, 0, 20_000, 0, Bearing::Follows(1, 0), Shape::Alike),
        ],
        initial: 3,
        changes: vec![Change::Bind(29), Change::Expire, Change::Bind(0)],
    };
    same_decisions(&case).expect("same decisions");
}

#[test]
fn a_running_gang_that_loses_a_member_or_its_podgroup_is_judged_again() {
    // Once placed, the gang is settled: the session after a change to it must
    // see it unsettled again, as a session built anew does.
    for change in [Change::Leave(0), Change::Delete(0), Change::Ungroup(0)] {
        let case = Case {
            nodes: vec![2],
            queues: 1,
            evictions: false,
            workload: vec![(2, 0, 0, 80_000, 0, Bearing::Plain(0), Shape::Alike)],
            initial: 1,
            changes: vec![Change::Tick, change.clone(), Change::Tick],
        };
        same_decisions(&case).unwrap_or_else(|e| panic!("after {change:?}: {e}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn incremental_cycles_decide_what_sessions_built_anew_decide(
        nodes in proptest::collection::vec(1usize..4, 1..4),
        queues in 1usize..4,
        evictions in any::<bool>(),
        workload in proptest::collection::vec(gang_spec(), 2..10),
        initial in 1usize..6,
        changes in proptest::collection::vec(change(), 1..14),
    ) {
        same_decisions(&Case { nodes, queues, evictions, workload, initial, changes })?;
    }
}

/// A gang where the node its first member goes to decides where the others
/// may: members following each other by hostname, a CPU master with GPU
/// workers (one of them perhaps asking for a GPU type no node has), or members
/// of staggered tiers (with a gang of one that repels a tier, some of them may
/// use a node others may not).
fn room_sensitive_gang() -> impl Strategy<Value = GangSpec> {
    (
        2u32..4,
        0u32..2,
        0..TIERS,
        prop_oneof![
            Just(Shape::Alike),
            Just(Shape::CpuMaster),
            Just(Shape::Staggered),
            Just(Shape::Mistyped)
        ],
    )
        .prop_map(|(min, extra, tier, shape)| {
            let bearing = match shape {
                Shape::Alike => Bearing::Follows(tier, tier),
                Shape::CpuMaster | Shape::Staggered | Shape::Mistyped => Bearing::Plain(tier),
            };
            (min, extra, 0, 80_000, 0, bearing, shape)
        })
}

/// A gang of one that keeps a tier off its node.
fn repelling_single() -> impl Strategy<Value = GangSpec> {
    (0..TIERS, 0..TIERS).prop_map(|(tier, from)| {
        (
            1,
            0,
            0,
            80_000,
            0,
            Bearing::Repels(tier, from),
            Shape::Alike,
        )
    })
}

/// Mostly room taken on one of the first three nodes: a card by another
/// scheduler, or a worker's worth of cores.
fn room_taken() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (0usize..3).prop_map(Change::ForeignSliceStarts),
        2 => (0usize..3).prop_map(|n| Change::PlainPod(n, WORKER_CORES)),
        1 => Just(Change::Arrive),
        1 => (0usize..64).prop_map(Change::Bind),
        1 => Just(Change::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Small clusters of unequal nodes, gangs whose first member's node decides
    /// where the others may go, and room taken between cycles: the shape in
    /// which skipping a blocked gang until room appears would leave a gang
    /// waiting that a session built anew places.
    #[test]
    fn cycles_after_room_taken_decide_what_sessions_built_anew_decide(
        nodes in proptest::collection::vec(
            prop_oneof![Just(1usize), Just(2), Just(3), Just(5)], 2..4),
        evictions in any::<bool>(),
        workload in proptest::collection::vec(
            prop_oneof![3 => room_sensitive_gang(), 1 => repelling_single(), 1 => gang_spec()],
            1..5),
        initial in 1usize..3,
        changes in proptest::collection::vec(room_taken(), 1..8),
    ) {
        same_decisions(&Case { nodes, queues: 1, evictions, workload, initial, changes })?;
    }
}

#[tokio::test]
async fn a_gang_repelled_through_a_namespace_selector_is_planned_once_the_namespace_is_relabelled()
{
    let pair = Pair::new(&[2], 1, false);
    let namespace = |team: &str| -> k8s_openapi::api::core::v1::Namespace {
        serde_json::from_value(json!({"metadata": {"name": "ml", "labels": {"team": team}}}))
            .expect("namespace")
    };
    for c in pair.both() {
        c.s.apply_namespace(&namespace("a"));
    }
    pair.arrive(0, single(Bearing::Plain(1)), 1);
    // g1 repels tier-1 pods of the namespaces of team a: g0's, on the one node.
    let mut repelled = sized_member("g1m0", "g1", 1, (80_000, 0, Bearing::Plain(0)));
    if let Some(spec) = repelled.spec.as_mut() {
        spec.affinity = Some(
            serde_json::from_value(json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"tier": "t1"}},
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "topologyKey": HOSTNAME}]}}))
            .expect("affinity"),
        );
    }
    for c in pair.both() {
        c.s.apply_podgroup(&podgroup("g1", 1, "q0", json!({})));
        c.add(&repelled);
    }
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (1, 1), "g0 placed, g1 repelled");
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (0, 0));

    for c in pair.both() {
        c.s.apply_namespace(&namespace("b"));
    }
    let (a, b) = pair.cycle().await.expect("kept state current");
    assert_eq!((a, b), (1, 1), "g1 no longer repelled");
    assert_eq!(decisions(&pair.incremental), decisions(&pair.scratch));
}
