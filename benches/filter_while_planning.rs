//! `/filter` latency while gang planning cycles run: kube-scheduler's filters (one
//! at a time, each reserving GPUs for a new one-vGPU pod over 5,000 candidate nodes)
//! measured alone, then while another thread runs planning cycles back to back over
//! 100 waiting gangs of 8 members.
//!
//! The gangs never fit whole (each has one member asking for a GPU type no node
//! has), so every cycle plans all of them again, as cycles do for gangs that wait
//! for room. The numbers say how much a cycle delays the filters that reserve.
//!
//! `cargo bench --bench filter_while_planning [-- --nodes N --gangs G --filters F
//! --alone]` (without `--bench`, as `cargo test --all-targets` runs it, a small
//! smoke run; `--alone` measures the filters alone only, for a profile of them).

#[path = "support/running_cluster.rs"]
mod running_cluster;

use k8s_openapi::api::core::v1::Pod;
use running_cluster::running_cluster;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use vgpu_scheduler::cluster::file::ClusterObjects;
use vgpu_scheduler::cluster::memory::MemoryCluster;
use vgpu_scheduler::extender::wire::ExtenderArgs;
use vgpu_scheduler::metrics::Metrics;
use vgpu_scheduler::scheduler::{Scheduler, SchedulerConfig};

/// Members per gang.
const MEMBERS: usize = 8;

struct Options {
    nodes: usize,
    gangs: usize,
    filters: usize,
    /// Stop after the filters alone.
    alone_only: bool,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    // Without `--bench` (as `cargo test --all-targets` runs it): a small smoke run,
    // so the bench keeps working.
    let mut o = if args.iter().any(|a| a == "--bench") {
        Options {
            nodes: 5000,
            gangs: 100,
            filters: 10000,
            alone_only: false,
        }
    } else {
        Options {
            nodes: 50,
            gangs: 4,
            filters: 20,
            alone_only: false,
        }
    };
    let mut i = 1;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse().ok());
        match args[i].as_str() {
            "--nodes" => o.nodes = value().unwrap_or(o.nodes),
            "--gangs" => o.gangs = value().unwrap_or(o.gangs),
            "--filters" => o.filters = value().unwrap_or(o.filters),
            "--alone" => o.alone_only = true,
            _ => {}
        }
        i += 1;
    }
    o
}

/// The running cluster plus `gangs` gated gangs that wait for room forever.
fn cluster(nodes: usize, gangs: usize) -> ClusterObjects {
    let mut objects = running_cluster(nodes);
    for g in 0..gangs {
        objects.podgroups.push(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": format!("job-{g}"), "namespace": "bench", "uid": format!("pg-{g}")},
            "spec": {"minMember": MEMBERS}
        }));
        for m in 0..MEMBERS {
            let mut annotations =
                serde_json::json!({"scheduling.k8s.io/group-name": format!("job-{g}")});
            if m == MEMBERS - 1 {
                annotations["nvidia.com/use-gputype"] = "B200".into();
            }
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("job-{g}-{m}"), "namespace": "bench",
                    "uid": format!("uid-job-{g}-{m}"),
                    "creationTimestamp": "2026-11-22T10:00:00Z",
                    "annotations": annotations},
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

fn filter_body(nodes: usize, n: usize) -> String {
    let names: Vec<String> = (0..nodes).map(|i| format!("node-{i:05}")).collect();
    serde_json::json!({
        "Pod": {"metadata": {"name": format!("infer-{n}"), "namespace": "bench", "uid": format!("uid-infer-{n}")},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {
                    "nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "10"}}}]}},
        "NodeNames": names
    })
    .to_string()
}

/// Runs `count` filters one after another; returns each one's latency.
fn run_filters(
    rt: &tokio::runtime::Runtime,
    s: &Scheduler,
    bodies: &[String],
    offset: usize,
    count: usize,
) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(count);
    for body in bodies.iter().skip(offset).take(count) {
        let start = Instant::now();
        let args: ExtenderArgs = serde_json::from_str(body).expect("args");
        let result = rt.block_on(s.filter(args));
        latencies.push(start.elapsed());
        assert!(
            result.error.is_empty() && result.node_names.as_ref().is_some_and(|n| n.len() == 1),
            "every filter places its pod: {:?}",
            result.error
        );
    }
    latencies
}

fn report(label: &str, mut latencies: Vec<Duration>) {
    latencies.sort();
    let at = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1000.0
    };
    println!(
        "{label:<28} n={:<5} p50 {:>7.3} ms  p90 {:>7.3} ms  p99 {:>7.3} ms  max {:>8.3} ms",
        latencies.len(),
        at(0.50),
        at(0.90),
        at(0.99),
        at(1.0)
    );
}

fn main() {
    let o = options();
    let objects = cluster(o.nodes, o.gangs);
    let api = Arc::new(MemoryCluster::new(Vec::new(), Vec::new(), false));
    for p in &objects.pods {
        if p.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("job-"))
        {
            api.insert_pod(p);
        }
    }
    let s = Arc::new(Scheduler::new(
        SchedulerConfig::default(),
        api,
        Arc::new(Metrics::new()),
    ));
    s.load(&objects);
    let bodies: Vec<String> = (0..o.filters * 2 + 100)
        .map(|n| filter_body(o.nodes, n))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    // Warm up, then filters alone.
    run_filters(&rt, &s, &bodies, 0, 100);
    let alone = run_filters(&rt, &s, &bodies, 100, o.filters);
    if o.alone_only {
        report("/filter alone", alone);
        return;
    }

    // One planning cycle alone, for scale.
    let start = Instant::now();
    rt.block_on(s.run_gang_cycle());
    let one_cycle = start.elapsed();

    // Filters while cycles run back to back on another thread.
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicUsize::new(0));
    let planner = {
        let (s, stop, cycles) = (s.clone(), stop.clone(), cycles.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            while !stop.load(Ordering::Relaxed) {
                let committed = rt.block_on(s.run_gang_cycle());
                assert_eq!(committed, 0, "the waiting gangs never fit whole");
                cycles.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let during = run_filters(&rt, &s, &bodies, 100 + o.filters, o.filters);
    stop.store(true, Ordering::Relaxed);
    planner.join().expect("planner thread");

    println!(
        "{} nodes, {} waiting gangs x {MEMBERS}; one cycle alone {:.1} ms; {} cycles ran during the second run",
        o.nodes,
        o.gangs,
        one_cycle.as_secs_f64() * 1000.0,
        cycles.load(Ordering::Relaxed)
    );
    report("/filter alone", alone);
    report("/filter during planning", during);
}
