//! Gang planning cycle time against cluster size: one cycle that enqueues and places
//! every waiting gang (8 members of one vGPU each) over nodes of 8 H100s that already
//! run 10 vGPU pods each, two weighted queues, commits included; and the cycle that
//! follows a change to one gang while 2,000 gangs of 10 wait for whole cards on a
//! cluster they filled (the steady state of a full cluster). With
//! `RUST_LOG=vgpu_scheduler::gang::cycle_stages=debug`, each cycle's stages are
//! timed on standard error.

#[path = "support/log_from_env.rs"]
mod log_from_env;
#[path = "support/running_cluster.rs"]
mod running_cluster;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use running_cluster::{GPUS_PER_NODE, running_cluster};
use std::sync::Arc;
use vgpu_scheduler::cluster::file::ClusterObjects;
use vgpu_scheduler::cluster::memory::MemoryCluster;
use vgpu_scheduler::metrics::Metrics;
use vgpu_scheduler::scheduler::{Scheduler, SchedulerConfig};

/// The allocator the server and `vgpu-scheduler simulate` run with: measured
/// with the platform's instead, a cycle's time is largely that allocator's
/// (sorting out every small block freed so far, at whichever allocation comes
/// next), which the program never spends.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Members per gang.
const MEMBERS: usize = 8;

fn cluster(nodes: usize, gangs: usize) -> ClusterObjects {
    gang_cluster(nodes, gangs, MEMBERS, "8000")
}

/// `gangs` gangs of `members` one-GPU members asking `gpumem` MiB each, in two
/// weighted queues, over `nodes` running nodes.
fn gang_cluster(nodes: usize, gangs: usize, members: usize, gpumem: &str) -> ClusterObjects {
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
            "spec": {"minMember": members, "queue": queue}
        }));
        for m in 0..members {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("job-{g}-{m}"), "namespace": "bench",
                    "uid": format!("uid-job-{g}-{m}"),
                    "creationTimestamp": "2026-11-22T10:00:00Z",
                    "annotations": {"scheduling.k8s.io/group-name": format!("job-{g}")}},
                "spec": {"schedulerName": "vgpu-scheduler",
                    "schedulingGates": [{"name": "vgpu-scheduler.io/gang"}],
                    "containers": [{"name": "w", "resources": {
                        "requests": {"cpu": "4", "memory": "32Gi"},
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": gpumem}}}]}
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
    let sizes: &[(usize, usize)] = if measuring() {
        &[(100, 10), (1000, 50), (5000, 100)]
    } else {
        &[(100, 10)]
    };
    for &(nodes, gangs) in sizes {
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

/// Whether criterion measures (`cargo bench`) rather than runs each benchmark
/// once as a test (`cargo test --all-targets`, in a debug build), where the
/// smallest cluster checks the same assertions in a fraction of the time.
fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Waiting gangs of this many members each.
const WAITING_MEMBERS: usize = 10;

/// The cycle after one waiting gang changed (one member's labels), with 2,000
/// gangs waiting on 1,000 full nodes: what a cycle costs when little changed.
fn cycle_after_one_change(c: &mut Criterion) {
    log_from_env::log_from_env();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("gang_cycle_after_one_change");
    group.sample_size(10);
    let (nodes, waiting) = if measuring() { (1000, 2000) } else { (50, 100) };
    // A whole card each: the first 800 gangs fill every card, the rest wait.
    let placed = nodes * GPUS_PER_NODE / WAITING_MEMBERS;
    let objects = gang_cluster(nodes, placed + waiting, WAITING_MEMBERS, "80000");
    let (s, _memory) = scheduler(&objects);
    assert_eq!(
        rt.block_on(s.run_gang_cycle()),
        placed,
        "the cluster fills up"
    );
    assert_eq!(rt.block_on(s.run_gang_cycle()), 0, "no more gang fits");
    let last = format!("job-{}-0", placed + waiting - 1);
    let mut member: Pod = objects
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(last.as_str()))
        .cloned()
        .expect("a waiting member");
    let mut round = 0u64;
    group.bench_function(
        BenchmarkId::new(format!("{waiting}x{WAITING_MEMBERS}_waiting"), nodes),
        |b| {
            b.iter(|| {
                round += 1;
                member
                    .metadata
                    .labels
                    .get_or_insert_default()
                    .insert("round".into(), round.to_string());
                s.apply_pod(&member);
                assert_eq!(rt.block_on(s.run_gang_cycle()), 0, "no gang fits");
            })
        },
    );
    group.finish();
    tracing::debug!(
        tasks_built = s.metrics().planner_tasks_built.get(),
        jobs_built = s.metrics().planner_jobs_built.get(),
        jobs_skipped = s.metrics().planner_jobs_skipped.get(),
        "planner caches after the benchmark"
    );
}

criterion_group!(benches, planning_cycle, cycle_after_one_change);
criterion_main!(benches);
