//! Property tests of the ledger invariants: no GPU is ever over its slots, memory or
//! cores, and no MIG slice is ever held by two instances, under random filter /
//! bind / finish / restart sequences; incremental usage equals a recomputation and
//! what a restarted scheduler rebuilds from the pods; decisions are deterministic.

use super::{Scheduler, SchedulerConfig};
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::{ExtenderArgs, ExtenderBindingArgs};
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::{Node, Pod};
use proptest::prelude::*;
use std::sync::Arc;

#[derive(Debug, Clone)]
struct GpuSpec {
    count: u32,
    devmem: u64,
    /// An H100 in MIG mode instead (count and memory are then the H100's).
    mig: bool,
}

fn gpu_spec() -> impl Strategy<Value = GpuSpec> {
    (1u32..=4, 8000u64..=40000, prop::bool::weighted(0.3))
        .prop_map(|(count, devmem, mig)| GpuSpec { count, devmem, mig })
}

/// The MIG profiles of an H100 80GB, as its device plugin registers them.
pub(super) fn h100_profiles() -> serde_json::Value {
    let one: Vec<serde_json::Value> = (0..7)
        .map(|s| serde_json::json!({"start": s, "size": 1}))
        .collect();
    serde_json::json!([
        {"name": "1g.10gb", "memoryMB": 9856, "core": 14, "sliceCount": 1, "placements": one},
        {"name": "2g.20gb", "memoryMB": 19968, "core": 28, "sliceCount": 2,
         "placements": [{"start": 0, "size": 2}, {"start": 2, "size": 2}, {"start": 4, "size": 2}]},
        {"name": "3g.40gb", "memoryMB": 40192, "core": 42, "sliceCount": 3,
         "placements": [{"start": 0, "size": 4}, {"start": 4, "size": 4}]},
        {"name": "7g.80gb", "memoryMB": 80896, "core": 100, "sliceCount": 7,
         "placements": [{"start": 0, "size": 8}]}
    ])
}

#[derive(Debug, Clone)]
enum Op {
    Filter {
        gpus: u32,
        mem: u64,
        cores: u32,
        bind: bool,
    },
    Finish(usize),
    Refilter(usize),
    /// The bind of a pod filtered earlier (perhaps before a restart).
    BindLater(usize),
    Restart,
}

fn node(name: &str, gpus: &[GpuSpec]) -> Node {
    let devices: Vec<serde_json::Value> = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            if g.mig {
                return serde_json::json!({"id": format!("GPU-{name}-{i}"), "count": 7, "devmem": 81559,
                    "devcore": 100, "type": "NVIDIA H100 80GB HBM3", "numa": i / 2, "health": true,
                    "index": i, "mode": "mig", "migProfiles": h100_profiles()});
            }
            serde_json::json!({"id": format!("GPU-{name}-{i}"), "count": g.count, "devmem": g.devmem,
                "devcore": 100, "type": "NVIDIA A100-SXM4-40GB", "numa": i / 2, "health": true,
                "index": i, "mode": "hami-core"})
        })
        .collect();
    serde_json::from_value(
        serde_json::json!({"metadata": {"name": name, "annotations": {
        "hami.io/node-nvidia-register": serde_json::Value::Array(devices).to_string()}}}),
    )
    .unwrap()
}

fn pod(i: usize, gpus: u32, mem: u64, cores: u32) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("p{i}"), "namespace": "ns", "uid": format!("uid-{i}")},
        "spec": {"schedulerName": "vgpu-scheduler", "containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string(),
            "nvidia.com/gpucores": cores.to_string()}}}]}
    }))
    .unwrap()
}

pub(super) fn build(nodes: &[Node]) -> (Scheduler, Arc<MemoryCluster>) {
    let memory = Arc::new(MemoryCluster::new(nodes.to_vec(), Vec::new(), true));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Scheduler::new(SchedulerConfig::default(), api, Arc::new(Metrics::new()));
    s.load(&ClusterObjects {
        nodes: nodes.to_vec(),
        ..Default::default()
    });
    (s, memory)
}

/// A scheduler over the same cluster, rebuilt from its nodes and pods as after a
/// restart; `finished` pods are reported Succeeded.
pub(super) fn restart(
    nodes: &[Node],
    memory: &Arc<MemoryCluster>,
    created: &[Pod],
    finished: &std::collections::BTreeSet<usize>,
    rt: &tokio::runtime::Runtime,
) -> Scheduler {
    let pods: Vec<Pod> = created
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let name = p.metadata.name.as_deref()?;
            let mut stored = rt.block_on(memory.get_pod("ns", name)).ok()??;
            if finished.contains(&i) {
                stored.status = Some(k8s_openapi::api::core::v1::PodStatus {
                    phase: Some("Succeeded".into()),
                    ..Default::default()
                });
            }
            Some(stored)
        })
        .collect();
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Scheduler::new(SchedulerConfig::default(), api, Arc::new(Metrics::new()));
    s.load(&ClusterObjects {
        nodes: nodes.to_vec(),
        pods,
        ..Default::default()
    });
    s
}

/// Drops the `/filter` reservations not yet bound, as a restart does: they were
/// never written to the pod (the bind writes the placement), so they are the one
/// thing a rebuilt ledger lacks; their binds book them again. Bound pods, and
/// anything else written, must be rebuilt exactly.
pub(super) fn forget_unbound_reservations(s: &Scheduler) {
    s.with_ledger_mut(|l| {
        let reserved: Vec<String> = l
            .pods()
            .filter(|p| matches!(p.phase, crate::ledger::PodPhase::Reserved { .. }))
            .map(|p| p.uid.clone())
            .collect();
        for uid in reserved {
            l.remove_pod(&uid);
        }
    });
}

/// Node usage per GPU, for comparing two ledgers.
pub(super) fn usage_of(s: &Scheduler) -> Vec<(String, Vec<crate::usage::GpuUsage>)> {
    s.with_ledger(|l| {
        l.nodes()
            .into_iter()
            .map(|(n, e)| (n.clone(), e.usage.clone()))
            .collect()
    })
}

/// No two pods hold overlapping MIG instances on one GPU, and no GPU counts a
/// slice twice.
fn check_mig_slices(s: &Scheduler) -> Result<(), TestCaseError> {
    s.with_ledger(|l| {
        let mut held: std::collections::BTreeMap<
            (String, String),
            Vec<(String, crate::device::mig::MigPlacement)>,
        > = Default::default();
        for p in l.pods() {
            for d in p.devices.iter().flatten() {
                if let Some(at) = d.mig.as_deref().and_then(|h| h.placement()) {
                    held.entry((p.node.clone(), d.uuid.to_string()))
                        .or_default()
                        .push((p.uid.clone(), at));
                }
            }
        }
        for ((node, gpu), instances) in &held {
            for (x, (pa, a)) in instances.iter().enumerate() {
                for (pb, b) in &instances[x + 1..] {
                    prop_assert!(
                        pa == pb || !a.overlaps(b),
                        "{} and {} share a slice of {} on {}: {:?} {:?}",
                        pa,
                        pb,
                        gpu,
                        node,
                        a,
                        b
                    );
                }
            }
        }
        for (name, entry) in l.nodes() {
            for (d, u) in entry.devices.iter().zip(&entry.usage) {
                prop_assert_eq!(
                    u.mig.held_twice(),
                    None,
                    "{} {} holds a slice twice",
                    name,
                    d.id
                );
                if !d.is_mig() {
                    prop_assert!(u.mig.is_empty(), "{} {} is not a MIG GPU", name, d.id);
                }
            }
        }
        Ok(())
    })
}

pub(super) fn check_invariants(s: &Scheduler) -> Result<(), TestCaseError> {
    check_mig_slices(s)?;
    s.with_ledger(|l| {
        prop_assert_eq!(l.incremental_node_usage(), &l.recomputed_node_usage());
        prop_assert!(l.reservations_indexed(), "reservation index out of step");
        for (name, entry) in l.nodes() {
            let rank = l.rank(name);
            prop_assert!(rank.is_some(), "{} missing from the ranking index", name);
            let rank = rank.unwrap();
            prop_assert_eq!(rank.score, entry.score);
            prop_assert_eq!(rank.usable, entry.usable());
            let rooms: Vec<_> = entry
                .devices
                .iter()
                .zip(&entry.usage)
                .zip(&entry.is_vendor)
                .map(|((d, u), v)| crate::rank_index::GpuRoom::of(d, u, *v))
                .collect();
            prop_assert_eq!(
                rank.rooms,
                rooms.as_slice(),
                "{} ranking index out of step",
                name
            );
            for (d, u) in entry.devices.iter().zip(entry.usage.iter().copied()) {
                prop_assert!(u.used <= d.count, "{} slots {} > {}", d.id, u.used, d.count);
                prop_assert!(
                    u.usedmem <= d.devmem,
                    "{} mem {} > {}",
                    d.id,
                    u.usedmem,
                    d.devmem
                );
                prop_assert!(u.usedcores <= d.devcore, "{} cores {}", d.id, u.usedcores);
            }
        }
        Ok(())
    })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u32..=3, 500u64..=30000, prop_oneof![Just(0u32), 1u32..=60, Just(100u32)], any::<bool>())
            .prop_map(|(gpus, mem, cores, bind)| Op::Filter { gpus, mem, cores, bind }),
        1 => (0usize..64).prop_map(Op::Finish),
        1 => (0usize..64).prop_map(Op::Refilter),
        1 => (0usize..64).prop_map(Op::BindLater),
        1 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_gpu_is_ever_overbooked(
        cluster in prop::collection::vec(prop::collection::vec(gpu_spec(), 1..=4), 1..=4),
        ops in prop::collection::vec(op_strategy(), 1..40),
    ) {
        let nodes: Vec<Node> = cluster.iter().enumerate().map(|(i, g)| node(&format!("n{i}"), g)).collect();
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let (mut s, memory) = build(&nodes);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut created: Vec<Pod> = Vec::new();
        let mut finished = std::collections::BTreeSet::new();
        // Pods filtered and not bound yet, with the node /filter chose.
        let mut unbound: std::collections::BTreeMap<usize, String> = Default::default();
        let bind = |s: &Scheduler, p: &Pod, node: &str| rt.block_on(s.bind(ExtenderBindingArgs {
            pod_name: p.metadata.name.clone(), pod_namespace: Some("ns".into()),
            pod_uid: p.metadata.uid.clone(), node: Some(node.to_string()) }));
        for op in ops {
            match op {
                Op::Filter { gpus, mem, cores, bind: bind_now } => {
                    let p = pod(created.len(), gpus, mem, cores);
                    created.push(p.clone());
                    let result = rt.block_on(s.filter(ExtenderArgs { pod: Some(p.clone()), nodes: None, node_names: Some(names.as_slice().into()) }));
                    prop_assert!(result.error.is_empty(), "{}", result.error);
                    if let Some(chosen) = result.node_names.as_ref().and_then(|n| n.first()) {
                        if bind_now {
                            let answer = bind(&s, &p, chosen);
                            prop_assert!(answer.error.is_empty(), "{}", answer.error);
                        } else {
                            unbound.insert(created.len() - 1, chosen.clone());
                        }
                    }
                }
                Op::BindLater(i) => {
                    let i = i % created.len().max(1);
                    if let Some(node) = unbound.remove(&i).filter(|_| !finished.contains(&i)) {
                        // After a restart the reservation lives only in the bind's
                        // request: the bind books it again, or fails cleanly when
                        // the GPUs went to another pod meanwhile (or the store let
                        // go of a pod that, filtered again, did not fit).
                        let answer = bind(&s, &created[i], &node);
                        prop_assert!(
                            answer.error.is_empty()
                                || answer.error.contains("cannot take the pod")
                                || answer.error.contains("not found"),
                            "{}", answer.error
                        );
                    }
                }
                Op::Finish(i) => {
                    if let Some(p) = created.get(i % created.len().max(1)) {
                        finished.insert(i % created.len());
                        let mut stored = rt.block_on(memory.get_pod("ns", p.metadata.name.as_deref().unwrap())).unwrap().unwrap_or_else(|| p.clone());
                        stored.status = Some(k8s_openapi::api::core::v1::PodStatus { phase: Some("Succeeded".into()), ..Default::default() });
                        s.apply_pod(&stored);
                    }
                }
                Op::Refilter(i) => {
                    let i = i % created.len().max(1);
                    if let Some(p) = created.get(i).cloned().filter(|_| !finished.contains(&i)) {
                        let result = rt.block_on(s.filter(ExtenderArgs { pod: Some(p), nodes: None, node_names: Some(names.as_slice().into()) }));
                        prop_assert!(result.error.is_empty(), "{}", result.error);
                        match result.node_names.as_ref().and_then(|n| n.first()) {
                            Some(chosen) if unbound.contains_key(&i) => { unbound.insert(i, chosen.clone()); }
                            _ => {}
                        }
                    }
                }
                Op::Restart => {
                    let rebuilt = restart(&nodes, &memory, &created, &finished, &rt);
                    forget_unbound_reservations(&s);
                    prop_assert_eq!(usage_of(&rebuilt), usage_of(&s), "a restart rebuilds the usage of bound pods");
                    s = rebuilt;
                }
            }
            check_invariants(&s)?;
        }
    }

    #[test]
    fn same_state_same_decision(
        cluster in prop::collection::vec(
            prop::collection::vec(gpu_spec(), 1..=4),
            1..=5),
        placed in prop::collection::vec((1u32..=2, 500u64..=8000), 0..8),
        probe in (1u32..=2, 500u64..=8000),
    ) {
        let nodes: Vec<Node> = cluster.iter().enumerate().map(|(i, g)| node(&format!("n{i}"), g)).collect();
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let run = || {
            let (s, _) = build(&nodes);
            for (i, (g, m)) in placed.iter().enumerate() {
                rt.block_on(s.filter(ExtenderArgs { pod: Some(pod(i, *g, *m, 0)), nodes: None, node_names: Some(names.as_slice().into()) }));
            }
            s.decide(&pod(999, probe.0, probe.1, 10), &names.as_slice().into()).unwrap()
        };
        prop_assert_eq!(run(), run());
    }

    /// Ranking with the capacity screen picks what fitting every node and taking the
    /// best by the node policy (ties: the smaller name) would pick, on clusters where
    /// many nodes are full.
    #[test]
    fn decision_is_the_best_node_that_fits(
        cluster in prop::collection::vec(
            prop::collection::vec((1u32..=3, 4000u64..=20000, prop::bool::weighted(0.3)).prop_map(|(count, devmem, mig)| GpuSpec { count, devmem, mig }), 1..=4),
            1..=6),
        placed in prop::collection::vec((1u32..=3, 1000u64..=12000), 0..24),
        probe in (1u32..=3, 500u64..=12000, 0u32..=60),
        spread in any::<bool>(),
    ) {
        let nodes: Vec<Node> = cluster.iter().enumerate().map(|(i, g)| node(&format!("n{i}"), g)).collect();
        let names: crate::extender::node_names::NodeNames = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (s, _) = build(&nodes);
        for (i, (g, m)) in placed.iter().enumerate() {
            rt.block_on(s.filter(ExtenderArgs { pod: Some(pod(i, *g, *m, 0)), nodes: None, node_names: Some(names.clone()) }));
        }
        let mut probe_pod = pod(999, probe.0, probe.1, probe.2);
        let policy = if spread { "spread" } else { "binpack" };
        probe_pod.metadata.annotations = Some(
            [("hami.io/node-scheduler-policy".to_string(), policy.to_string())].into(),
        );
        let ctx = s.pod_context(&probe_pod).unwrap().unwrap();
        let every = s.evaluate(&ctx, &names);
        let expected = every
            .fits
            .iter()
            .min_by(|(na, pa), (nb, pb)| {
                ctx.policies.node.prefers(pb.node_score, pa.node_score).then_with(|| na.cmp(nb))
            })
            .cloned();
        prop_assert_eq!(s.decide(&probe_pod, &names).unwrap(), expected);
    }
}
