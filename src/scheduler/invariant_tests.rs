//! Property tests of the ledger invariants: no GPU is ever over its slots, memory or
//! cores under random filter / bind / finish sequences; incremental usage equals a
//! recomputation; decisions are deterministic.

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
}

fn node(name: &str, gpus: &[GpuSpec]) -> Node {
    let devices: Vec<serde_json::Value> = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
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
        "spec": {"containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string(),
            "nvidia.com/gpucores": cores.to_string()}}}]}
    }))
    .unwrap()
}

fn build(nodes: &[Node]) -> (Scheduler, Arc<MemoryCluster>) {
    let memory = Arc::new(MemoryCluster::new(nodes.to_vec(), Vec::new(), true));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Scheduler::new(SchedulerConfig::default(), api, Arc::new(Metrics::new()));
    s.load(&ClusterObjects {
        nodes: nodes.to_vec(),
        ..Default::default()
    });
    (s, memory)
}

fn check_invariants(s: &Scheduler) -> Result<(), TestCaseError> {
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
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_gpu_is_ever_overbooked(
        cluster in prop::collection::vec(
            prop::collection::vec((1u32..=4, 8000u64..=40000).prop_map(|(count, devmem)| GpuSpec { count, devmem }), 1..=4),
            1..=4),
        ops in prop::collection::vec(op_strategy(), 1..40),
    ) {
        let nodes: Vec<Node> = cluster.iter().enumerate().map(|(i, g)| node(&format!("n{i}"), g)).collect();
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let (s, memory) = build(&nodes);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut created: Vec<Pod> = Vec::new();
        for op in ops {
            match op {
                Op::Filter { gpus, mem, cores, bind } => {
                    let p = pod(created.len(), gpus, mem, cores);
                    created.push(p.clone());
                    let result = rt.block_on(s.filter(ExtenderArgs { pod: Some(p.clone()), nodes: None, node_names: Some(names.as_slice().into()) }));
                    prop_assert!(result.error.is_empty(), "{}", result.error);
                    if let (true, Some(chosen)) = (bind, result.node_names.as_ref().and_then(|n| n.first())) {
                        let answer = rt.block_on(s.bind(ExtenderBindingArgs {
                            pod_name: p.metadata.name.clone(), pod_namespace: Some("ns".into()),
                            pod_uid: p.metadata.uid.clone(), node: Some(chosen.clone()) }));
                        prop_assert!(answer.error.is_empty(), "{}", answer.error);
                    }
                }
                Op::Finish(i) => {
                    if let Some(p) = created.get(i % created.len().max(1)) {
                        let mut stored = rt.block_on(memory.get_pod("ns", p.metadata.name.as_deref().unwrap())).unwrap().unwrap_or_else(|| p.clone());
                        stored.status = Some(k8s_openapi::api::core::v1::PodStatus { phase: Some("Succeeded".into()), ..Default::default() });
                        s.apply_pod(&stored);
                    }
                }
                Op::Refilter(i) => {
                    if let Some(p) = created.get(i % created.len().max(1)).cloned() {
                        let result = rt.block_on(s.filter(ExtenderArgs { pod: Some(p), nodes: None, node_names: Some(names.as_slice().into()) }));
                        prop_assert!(result.error.is_empty(), "{}", result.error);
                    }
                }
            }
            check_invariants(&s)?;
        }
    }

    #[test]
    fn same_state_same_decision(
        cluster in prop::collection::vec(
            prop::collection::vec((1u32..=4, 8000u64..=40000).prop_map(|(count, devmem)| GpuSpec { count, devmem }), 1..=4),
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
            prop::collection::vec((1u32..=3, 4000u64..=20000).prop_map(|(count, devmem)| GpuSpec { count, devmem }), 1..=4),
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
