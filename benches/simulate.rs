//! How fast a replay runs: `vgpu-scheduler simulate`'s engine over a generated
//! cluster (N nodes × 8 H100s) and a generated workload of M arrivals of vGPU
//! pods (quarter-card slices, whole cards, pairs, as HAMi users send them),
//! binpack, one variant; reports arrivals per second of wall time.
//!
//! ```sh
//! cargo bench --bench simulate -- --nodes 1000 --arrivals 100000
//! ```
//!
//! `--shape` picks another workload, to compare what queue and gang scheduling
//! cost against the same pods without them: `queues` (the same pods, each naming
//! one of four weighted queues), `gangs` (`--arrivals` gangs of 4, 8, 12 or 16
//! one-GPU members running 10 h, arriving over 5 h so they fill the cluster) and
//! `gang-pods` (the same pods as `gangs`, each on its own, in no queue).
//!
//! `--against SHAPE` replays in pairs (`--pairs N`, 9 by default): each replay of
//! `--shape` followed at once by one of `SHAPE`, reporting the ratio of their wall
//! times per pair and the median, least and most ratio: the way to compare two
//! shapes on a machine whose speed varies from minute to minute, e.g.
//! `cargo bench --bench simulate -- --nodes 1000 --arrivals 5000 --shape queues --against plain`.
//!
//! Run without `--bench` (as `cargo test --all-targets` does) it makes a small
//! smoke run instead (one pair against `queues`), so the tool cannot rot.

#[path = "loadgen/cluster.rs"]
#[allow(dead_code)]
mod cluster;
#[path = "support/log_from_env.rs"]
mod log_from_env;

use std::time::{Duration, Instant};
use vgpu_scheduler::cluster::file::{ClusterObject, visit_file};
use vgpu_scheduler::config::SimulateArgs;
use vgpu_scheduler::simulate::{self, workload::Workload};

/// The allocator the server and `vgpu-scheduler simulate` run with: measured
/// with the platform's instead, a cycle's time is largely that allocator's
/// (sorting out every small block freed so far, at whichever allocation comes
/// next), which the program never spends.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// The four weighted queues of the `queues` workload.
const QUEUES: [(&str, u32); 4] = [("q0", 1), ("q1", 2), ("q2", 3), ("q3", 4)];

/// The `queues` workload: `plain`'s lines, each split over the four queues.
fn queue_workload(plain: &str) -> String {
    let parsed = Workload::parse(plain).expect("plain workload");
    let mut out = String::from("arrivals:\n");
    for line in &parsed.arrivals {
        let every = line.every.expect("every") * QUEUES.len() as u32;
        let count = line.count / QUEUES.len() as u32;
        let pod = match line.pod.gpumem {
            Some(mem) => format!("{{gpus: {}, gpumem: {mem}}}", line.pod.gpus),
            None => format!("{{gpus: {}}}", line.pod.gpus),
        };
        for (q, (queue, _)) in QUEUES.iter().enumerate() {
            out.push_str(&format!(
                "- name: {}-{queue}\n  at: {}ms\n  every: {}ms\n  count: {count}\n  duration: 4h\n  queue: {queue}\n  pod: {pod}\n",
                line.name,
                every.as_millis() as u64 * q as u64 / QUEUES.len() as u64,
                every.as_millis()
            ));
        }
    }
    out
}

/// The `gangs` workload (`as_pods`: the same pods, each on its own).
fn gang_workload(gangs: u64, as_pods: bool) -> String {
    let mut out = String::from("arrivals:\n");
    let sizes = [4u64, 8, 12, 16];
    let per_size = gangs / sizes.len() as u64;
    let over_ms = 5 * 3_600_000u64;
    for members in sizes {
        let every = over_ms / per_size.max(1);
        if as_pods {
            out.push_str(&format!(
                "- name: pods{members}\n  every: {}ms\n  count: {}\n  duration: 10h\n  pod: {{gpus: 1}}\n",
                (every / members).max(1),
                per_size * members
            ));
        } else {
            out.push_str(&format!(
                "- name: gang{members}\n  every: {every}ms\n  count: {per_size}\n  duration: 10h\n  gang: {{members: {members}}}\n  pod: {{gpus: 1}}\n"
            ));
        }
    }
    out
}

/// The value given after `name`, if any.
fn text_flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn flag(args: &[String], name: &str, default: u64) -> u64 {
    text_flag(args, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One replay's outcome, as the bench reports it.
struct Replayed {
    /// The report line.
    line: String,
    wall: Duration,
}

/// Replays `arrivals` of `shape` on a generated cluster of `nodes`; the wall
/// time covers the replay only, not generating the cluster and workload.
fn replay(shape: &str, nodes: usize, arrivals: u64) -> Replayed {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cluster.json");
    cluster::generate(&path, nodes, 0, false).expect("write the cluster file");
    let mut objects = Vec::new();
    visit_file(&path, |o| objects.push(o)).expect("read the cluster file");
    let gpus = (nodes * cluster::GPUS_PER_NODE) as u64;
    let text = match shape {
        "plain" => workload(arrivals, gpus),
        "queues" => {
            for (name, weight) in QUEUES {
                objects.push(ClusterObject::Queue(Box::new(serde_json::json!({
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": name}, "spec": {"weight": weight},
                    "status": {"state": "Open"}
                }))));
            }
            queue_workload(&workload(arrivals, gpus))
        }
        "gangs" => gang_workload(arrivals, false),
        "gang-pods" => gang_workload(arrivals, true),
        other => panic!("--shape {other}: plain, queues, gangs or gang-pods"),
    };
    let workload = Workload::parse(&text).expect("workload");
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
    if shape == "plain" {
        assert_eq!(result.jobs.len() as u64, arrivals);
    }
    assert!(placed > 0, "nothing was placed");
    Replayed {
        line: format!(
            "{shape}: {nodes} nodes x {} GPUs, {} arrivals over {:.1} virtual hours: {placed} placed, peak GPU memory {peak:.1}%, {:.2} s wall, {:.0} arrivals/s",
            cluster::GPUS_PER_NODE,
            result.jobs.len(),
            result.seconds / 3600.0,
            wall.as_secs_f64(),
            result.jobs.len() as f64 / wall.as_secs_f64()
        ),
        wall,
    }
}

fn main() {
    log_from_env::log_from_env();
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let nodes = flag(&args, "--nodes", if full { 1000 } else { 10 }) as usize;
    let arrivals = flag(&args, "--arrivals", if full { 100_000 } else { 500 });
    let shape = text_flag(&args, "--shape").unwrap_or("plain");
    // The smoke run replays one pair, so the pairing cannot rot either.
    let against = text_flag(&args, "--against").or((!full).then_some("queues"));
    let Some(against) = against else {
        println!("{}", replay(shape, nodes, arrivals).line);
        return;
    };
    // Pairs: each replay of `shape` followed at once by one of `against`, so
    // both meet the machine in the same state; the ratio of each pair is what
    // is compared (on a shared host the time of one replay varies by a third
    // from minute to minute, the ratio of a pair far less).
    let pairs = flag(&args, "--pairs", if full { 9 } else { 1 }).max(1);
    let mut ratios = Vec::new();
    for _ in 0..pairs {
        let (one, other) = (
            replay(shape, nodes, arrivals),
            replay(against, nodes, arrivals),
        );
        let ratio = one.wall.as_secs_f64() / other.wall.as_secs_f64().max(1e-9);
        println!("{}\n{}\n  ratio {ratio:.2}", one.line, other.line);
        ratios.push(ratio);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{shape} against {against} over {pairs} pairs: ratio median {:.2}, least {:.2}, most {:.2}",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}
