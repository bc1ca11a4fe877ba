//! Gang planning cycle time against cluster size: one cycle that enqueues and places
//! every waiting gang (8 members of one vGPU each) over nodes of 8 H100s that already
//! run 10 vGPU pods each, two weighted queues, commits included.

#[path = "support/running_cluster.rs"]
mod running_cluster;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use running_cluster::running_cluster;
use std::sync::Arc;
use vgpu_scheduler::cluster::file::ClusterObjects;
use vgpu_scheduler::cluster::memory::MemoryCluster;
use vgpu_scheduler::metrics::Metrics;
use vgpu_scheduler::scheduler::{Scheduler, SchedulerConfig};

/// Members per gang.
const MEMBERS: usize = 8;

fn cluster(nodes: usize, gangs: usize) -> ClusterObjects {
    let mut objects = running_cluster(nodes);
    for (name, weight) in [("gold", 2), ("silver", 1)] {
        objects.queues.push(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"weight": weight}
        }));
    }
    for g in 0..gangs {
        let queue = if g % 2 == 0 { "gold" } else { "silver" };
        objects.podgroups.push(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": format!("job-{g}"), "namespace": "bench", "uid": format!("pg-{g}")},
            "spec": {"minMember": MEMBERS, "queue": queue}
        }));
        for m in 0..MEMBERS {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("job-{g}-{m}"), "namespace": "bench",
                    "uid": format!("uid-job-{g}-{m}"),
                    "creationTimestamp": "2026-11-22T10:00:00Z",
                    "annotations": {"scheduling.k8s.io/group-name": format!("job-{g}")}},
                "spec": {"schedulerName": "vgpu-scheduler",
                    "schedulingGates": [{"name": "vgpu-scheduler.io/gang"}],
                    "containers": [{"name": "w", "resources": {
                        "requests": {"cpu": "4", "memory": "32Gi"},
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"}}}]}
            }))
            .expect("member fixture");
            objects.pods.push(pod);
        }
    }
    objects
}

fn scheduler(objects: &ClusterObjects) -> (Scheduler, Arc<MemoryCluster>) {
    let memory = Arc::new(MemoryCluster::new(Vec::new(), Vec::new(), false));
    for p in &objects.pods {
        if p.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("job-"))
        {
            memory.insert_pod(p);
        }
    }
    let s = Scheduler::new(
        SchedulerConfig::default(),
        memory.clone(),
        Arc::new(Metrics::new()),
    );
    s.load(objects);
    (s, memory)
}

fn planning_cycle(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("gang_cycle");
    group.sample_size(10);
    for (nodes, gangs) in [(100, 10), (1000, 50), (5000, 100)] {
        let objects = cluster(nodes, gangs);
        group.bench_with_input(
            BenchmarkId::new(format!("{gangs}x{MEMBERS}_members"), nodes),
            &objects,
            |b, objects| {
                b.iter_batched(
                    || scheduler(objects),
                    |(s, memory)| {
                        let committed = rt.block_on(s.run_gang_cycle());
                        assert_eq!(committed, gangs, "every gang fits");
                        // Dropped outside the measurement.
                        (s, memory)
                    },
                    BatchSize::PerIteration,
                )
            },
        );
    }
    group.finish();
}

criterion_group!(benches, planning_cycle);
criterion_main!(benches);
