//! Filter decision time against cluster size, next to the floor of decoding the same
//! kube-scheduler request, so the report can say "decision = N x floor".

#[path = "support/running_cluster.rs"]
mod running_cluster;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use running_cluster::{register_annotation, running_cluster};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use vgpu_scheduler::cluster::file::ClusterObjects;
use vgpu_scheduler::cluster::memory::MemoryCluster;
use vgpu_scheduler::device::allocation_codec::{decode_pod_devices, encode_pod_devices};
use vgpu_scheduler::device::register_codec::decode_register_annotation;
use vgpu_scheduler::extender::wire::ExtenderArgs;
use vgpu_scheduler::metrics::Metrics;
use vgpu_scheduler::node_lock::handoff::LockHandoff;
use vgpu_scheduler::policy::{GpuPolicy, NodePolicy};
use vgpu_scheduler::scheduler::{Scheduler, SchedulerConfig};

fn scheduler(objects: &ClusterObjects, node: NodePolicy, gpu: &str) -> Scheduler {
    let api = Arc::new(MemoryCluster::new(Vec::new(), Vec::new(), true));
    let config = SchedulerConfig {
        node_policy: node,
        gpu_policy: GpuPolicy::parse(gpu),
        ..SchedulerConfig::default()
    };
    let s = Scheduler::new(config, api, Arc::new(Metrics::new()));
    s.load(objects);
    s
}

fn filter_request(nodes: usize, gpus: u32) -> String {
    let names: Vec<String> = (0..nodes).map(|n| format!("node-{n:05}")).collect();
    serde_json::json!({
        "Pod": {"metadata": {"name": "trainer", "namespace": "bench", "uid": "uid-new"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {
                    "nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": "8000", "nvidia.com/gpucores": "10"}}}]}},
        "Nodes": null,
        "NodeNames": names
    })
    .to_string()
}

fn bench_filter(c: &mut Criterion) {
    let mut group = c.benchmark_group("filter_decision");
    group.sample_size(20);
    for nodes in [100usize, 1000, 5000] {
        let objects = running_cluster(nodes);
        for (label, node_policy, gpu_policy) in [
            ("binpack", NodePolicy::Binpack, "binpack"),
            ("spread", NodePolicy::Spread, "spread"),
        ] {
            let s = scheduler(&objects, node_policy, gpu_policy);
            for gpus in [1u32, 8] {
                let body = filter_request(nodes, gpus);
                group.throughput(Throughput::Elements(nodes as u64));
                group.bench_with_input(
                    BenchmarkId::new(format!("{label}/{gpus}gpu/decode+decide"), nodes),
                    &body,
                    |b, body| {
                        b.iter(|| {
                            let args: ExtenderArgs =
                                serde_json::from_str(black_box(body)).expect("args");
                            let pod = args.pod.expect("pod");
                            let names = args.node_names.expect("names");
                            black_box(s.decide(&pod, &names).expect("decision"))
                        })
                    },
                );
            }
        }
        let body = filter_request(nodes, 1);
        group.bench_with_input(
            BenchmarkId::new("floor/decode_only", nodes),
            &body,
            |b, body| {
                b.iter(|| {
                    black_box(serde_json::from_str::<ExtenderArgs>(black_box(body)).expect("args"))
                })
            },
        );
    }
    group.finish();
}

fn bench_codecs(c: &mut Criterion) {
    let register = register_annotation(7);
    c.bench_function("codec/decode_register_8gpu", |b| {
        b.iter(|| decode_register_annotation(black_box(&register)).expect("decode"))
    });
    let devices = decode_pod_devices(
        "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc,NVIDIA,8000,10:GPU-4f3c1a52-9d0e-4b7f-8a61-2c5e9b1d7f03,NVIDIA,8000,10:;;",
    )
    .expect("fixture");
    c.bench_function("codec/encode_pod_devices", |b| {
        b.iter(|| encode_pod_devices(black_box(&devices)))
    });
}

fn bench_rebuild(c: &mut Criterion) {
    let objects = running_cluster(5000);
    let mut group = c.benchmark_group("ledger");
    group.sample_size(10);
    group.bench_function("rebuild_5000_nodes_50000_pods", |b| {
        b.iter(|| black_box(scheduler(&objects, NodePolicy::Binpack, "spread")))
    });
    group.finish();
}

/// What `/filter` asks the lock handoff in a burst that outpaces the turns
/// (whether enough nodes have binds ahead to open no other), on a cluster
/// where every node has had a bind and 31 have one ahead now.
fn bench_lock_handoff(c: &mut Criterion) {
    let handoff = LockHandoff::default();
    let now = Instant::now();
    let lock = "2026-11-29T18:00:00Z,bench,holder";
    for n in 0..5_000 {
        let node = format!("node-{n:05}");
        handoff.observe_node(&node, Some(lock), Some("1"), now);
        if n >= 31 {
            handoff.observe_node(&node, None, Some("2"), now);
        }
    }
    c.bench_function(
        "lock_handoff/nodes_with_binds_ahead_reach_5000_nodes_31_busy",
        |b| b.iter(|| black_box(handoff.nodes_with_binds_ahead_reach(black_box(32), now))),
    );
}

criterion_group!(
    benches,
    bench_filter,
    bench_codecs,
    bench_rebuild,
    bench_lock_handoff
);
criterion_main!(benches);
