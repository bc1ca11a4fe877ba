//! How fast a replay runs: `vgpu-scheduler simulate`'s engine over a generated
//! cluster (N nodes × 8 H100s) and a generated workload of M arrivals of vGPU
//! pods (quarter-card slices, whole cards, pairs, as HAMi users send them),
//! binpack, one variant; reports arrivals per second of wall time.
//!
//! ```sh
//! cargo bench --bench simulate -- --nodes 1000 --arrivals 100000
//! ```
//!
//! Run without `--bench` (as `cargo test --all-targets` does) it makes a small
//! smoke run instead, so the tool cannot rot.

#[path = "loadgen/cluster.rs"]
#[allow(dead_code)]
mod cluster;

use std::time::{Duration, Instant};
use vgpu_scheduler::cluster::file::visit_file;
use vgpu_scheduler::config::SimulateArgs;
use vgpu_scheduler::simulate::{self, workload::Workload};

/// The workload: three lines whose counts add up to `arrivals`, arriving
/// steadily so that about half the GPUs are handed out at any time.
fn workload(arrivals: u64, gpus: u64) -> String {
    let slices = arrivals / 2;
    let wholes = arrivals * 3 / 10;
    let pairs = arrivals - slices - wholes;
    // Cards held at once ≈ arrival rate × duration × cards per job; aim at
    // half the cluster.
    let hours = 4.0;
    let per_hour_cards = gpus as f64 / 2.0 / hours;
    let cards_per_arrival = (0.25 * 5.0 + 3.0 + 2.0 * 2.0) / 10.0;
    let arrivals_per_hour = per_hour_cards / cards_per_arrival;
    let every = |share: f64| {
        let ms = 3_600_000.0 / (arrivals_per_hour * share);
        format!("{}ms", ms.max(1.0) as u64)
    };
    format!(
        "arrivals:
- name: slice
  every: {}
  count: {slices}
  duration: 4h
  pod: {{gpus: 1, gpumem: 20000, gpucores: 25}}
- name: whole
  every: {}
  count: {wholes}
  duration: 4h
  pod: {{gpus: 1}}
- name: pair
  every: {}
  count: {pairs}
  duration: 4h
  pod: {{gpus: 2}}
",
        every(0.5),
        every(0.3),
        every(0.2)
    )
}

fn flag(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let nodes = flag(&args, "--nodes", if full { 1000 } else { 10 }) as usize;
    let arrivals = flag(&args, "--arrivals", if full { 100_000 } else { 500 });
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cluster.json");
    cluster::generate(&path, nodes, 0, false).expect("write the cluster file");
    let mut objects = Vec::new();
    visit_file(&path, |o| objects.push(o)).expect("read the cluster file");
    let gpus = (nodes * cluster::GPUS_PER_NODE) as u64;
    let workload = Workload::parse(&workload(arrivals, gpus)).expect("workload");
    let sim_args = SimulateArgs {
        cluster_file: Some(path.clone()),
        from_cluster: false,
        kubeconfig: None,
        workload: "generated".into(),
        scheduler_config: None,
        variants: Vec::new(),
        report: dir.path().join("report"),
        seed: 1,
        sample_every: Some(Duration::from_secs(300)),
        quiet: true,
    };
    let setup =
        simulate::variant("binpack:--node-scheduler-policy=binpack", &sim_args).expect("variant");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let result = runtime
        .block_on(simulate::simulate(
            &objects,
            &workload,
            std::slice::from_ref(&setup),
            sim_args.seed,
            Duration::from_secs(300),
            false,
        ))
        .expect("replay")
        .remove(0);
    let wall = started.elapsed();
    let placed = result.jobs.iter().filter(|j| j.started.is_some()).count();
    let peak = result
        .samples
        .iter()
        .map(|s| s.memory_percent)
        .fold(0.0, f64::max);
    println!(
        "{nodes} nodes x {} GPUs, {arrivals} arrivals over {:.1} virtual hours: {placed} placed, peak GPU memory {peak:.1}%, {:.2} s wall, {:.0} arrivals/s",
        cluster::GPUS_PER_NODE,
        result.seconds / 3600.0,
        wall.as_secs_f64(),
        arrivals as f64 / wall.as_secs_f64()
    );
    assert_eq!(result.jobs.len() as u64, arrivals);
    assert!(placed > 0, "nothing was placed");
}
