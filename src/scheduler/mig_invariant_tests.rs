//! The MIG half of the ledger invariants, under heavy contention: nodes of MIG
//! GPUs only, pods of one or two containers asking for one to three instances of
//! every size, finishes, re-filters, restarts, and pods another scheduler
//! annotated with instances of its own choosing (some on slices already held).
//! At no moment do two pods hold a slice of one GPU, and a restart rebuilds the
//! same usage as long as the annotations in the cluster agree with each other.

use super::invariant_tests::{
    build, check_invariants, forget_unbound_reservations, h100_profiles, restart, usage_of,
};
use crate::cluster::api::ClusterApi;
use crate::extender::wire::{ExtenderArgs, ExtenderBindingArgs};
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
enum Op {
    /// A pod of `containers` app containers, each asking for `gpus` GPUs of
    /// `mem` MiB.
    Filter {
        containers: usize,
        gpus: u32,
        mem: u64,
        bind: bool,
    },
    Finish(usize),
    Refilter(usize),
    Restart,
    /// A bound pod of another scheduler claiming `size` slices from `start` of
    /// GPU `gpu` of node 0.
    Claim {
        gpu: usize,
        start: u32,
        size: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1usize..=2, 1u32..=3, prop::sample::select(vec![4000u64, 9856, 15000, 30000, 40192, 70000]), any::<bool>())
            .prop_map(|(containers, gpus, mem, bind)| Op::Filter { containers, gpus, mem, bind }),
        2 => (0usize..64).prop_map(Op::Finish),
        1 => (0usize..64).prop_map(Op::Refilter),
        1 => Just(Op::Restart),
        1 => (0usize..2, 0u32..7, prop::sample::select(vec![1u32, 2, 4])).prop_map(|(gpu, start, size)| Op::Claim { gpu, start, size }),
    ]
}

fn mig_node(name: &str, gpus: usize) -> Node {
    let devices: Vec<serde_json::Value> = (0..gpus)
        .map(|i| {
            json!({"id": format!("GPU-{name}-{i}"), "count": 7, "devmem": 81559, "devcore": 100,
                "type": "NVIDIA H100 80GB HBM3", "health": true, "index": i, "mode": "mig",
                "migProfiles": h100_profiles()})
        })
        .collect();
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": {
        "hami.io/node-nvidia-register": serde_json::Value::Array(devices).to_string()}}}))
    .unwrap()
}

fn pod(i: usize, containers: usize, gpus: u32, mem: u64) -> Pod {
    let containers: Vec<serde_json::Value> = (0..containers)
        .map(|c| {
            json!({"name": format!("c{c}"), "resources": {"limits": {
                "nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string()}}})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": format!("p{i}"), "namespace": "ns", "uid": format!("uid-{i}")},
        "spec": {"schedulerName": "vgpu-scheduler", "containers": containers}
    }))
    .unwrap()
}

/// A running pod of HAMi's scheduler holding one instance it chose itself.
fn claim(i: usize, gpu: &str, start: u32, size: u32) -> Pod {
    let size = size.min(8 - start);
    serde_json::from_value(json!({
        "metadata": {"name": format!("p{i}"), "namespace": "ns", "uid": format!("uid-{i}"),
            "annotations": {
                "hami.io/vgpu-node": "n0",
                "hami.io/vgpu-devices-allocated": format!("{gpu},NVIDIA,9856,14:;"),
                "hami.io/vgpu-mig-allocations": format!(
                    r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{gpu}","profile":"{size}g.x","placement":{{"start":{start},"size":{size}}}}}]"#
                )}},
        "spec": {"schedulerName": "hami-scheduler", "nodeName": "n0",
                 "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"}
    }))
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_two_pods_ever_share_a_mig_slice(
        shape in prop::collection::vec(1usize..=2, 1..=2),
        ops in prop::collection::vec(op(), 1..48),
    ) {
        let nodes: Vec<Node> = shape.iter().enumerate().map(|(i, g)| mig_node(&format!("n{i}"), *g)).collect();
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let (mut s, memory) = build(&nodes);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut created: Vec<Pod> = Vec::new();
        let mut finished = BTreeSet::new();
        let mut foreign_claims = false;
        for op in ops {
            match op {
                Op::Filter { containers, gpus, mem, bind } => {
                    let p = pod(created.len(), containers, gpus, mem);
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
                    let i = i % created.len().max(1);
                    if let Some(p) = created.get(i) {
                        finished.insert(i);
                        let name = p.metadata.name.as_deref().unwrap();
                        let mut stored = rt.block_on(memory.get_pod("ns", name)).unwrap().unwrap_or_else(|| p.clone());
                        stored.status = Some(PodStatus { phase: Some("Succeeded".into()), ..Default::default() });
                        s.apply_pod(&stored);
                    }
                }
                Op::Refilter(i) => {
                    let i = i % created.len().max(1);
                    if let Some(p) = created.get(i).cloned().filter(|p| !finished.contains(&i) && p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none()) {
                        let result = rt.block_on(s.filter(ExtenderArgs { pod: Some(p), nodes: None, node_names: Some(names.as_slice().into()) }));
                        prop_assert!(result.error.is_empty(), "{}", result.error);
                    }
                }
                Op::Restart => {
                    let rebuilt = restart(&nodes, &memory, &created, &finished, &rt);
                    if !foreign_claims {
                        forget_unbound_reservations(&s);
                        prop_assert_eq!(usage_of(&rebuilt), usage_of(&s), "a restart rebuilds the usage of bound pods");
                    }
                    s = rebuilt;
                }
                Op::Claim { gpu, start, size } => {
                    let gpu = format!("GPU-n0-{}", gpu % shape[0]);
                    let p = claim(created.len(), &gpu, start, size);
                    memory.insert_pod(&p);
                    created.push(p.clone());
                    foreign_claims = true;
                    s.apply_pod(&p);
                }
            }
            check_invariants(&s)?;
        }
    }
}
