//! HTTPS load generator: drives the real `vgpu-scheduler serve` binary with
//! kube-scheduler-shaped `/filter` + `/bind` cycles and webhook `/mutate` reviews,
//! concurrently over keep-alive connections, and reports throughput, client-side
//! p50/p99/p999, the server's own p50/p99 (from `/metrics`), startup time and RSS.
//!
//! ```sh
//! cargo bench --bench loadgen -- --nodes 1000 --pods-per-node 10 --concurrency 64 --duration 10
//! ```
//!
//! Everything (cluster file, certificate, server log) lives in a temp dir that is
//! removed at the end; only 127.0.0.1 is used. Run without `--bench` (as
//! `cargo test --all-targets` does) it makes a small smoke run instead, so the tool
//! cannot rot. Flags: `--help`.

#[path = "loadgen/burst_pods.rs"]
mod burst_pods;
#[path = "loadgen/cluster.rs"]
mod cluster;
#[path = "loadgen/control_plane.rs"]
mod control_plane;
#[path = "loadgen/device_plugin.rs"]
mod device_plugin;
#[path = "loadgen/e2e.rs"]
mod e2e;
#[path = "../tests/fake_apiserver/mod.rs"]
mod fake_apiserver;
#[path = "loadgen/go_http2_clients.rs"]
mod go_http2_clients;
#[path = "loadgen/kube_scheduler.rs"]
mod kube_scheduler;
#[path = "loadgen/packing.rs"]
mod packing;
#[path = "loadgen/scheduled_events.rs"]
mod scheduled_events;
#[path = "loadgen/server.rs"]
mod server;
#[path = "loadgen/stats.rs"]
mod stats;

use cluster::{LOAD_NAMESPACE, NAME_MARK, UID_MARK};
use device_plugin::AnswerCalls;
use serde_json::{Value, json};
use server::{HttpVersion, Launch, ServerProcess};
use stats::{Samples, ms, ms_text};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const USAGE: &str = "\
cargo bench --bench loadgen -- [flags]

  --nodes N             nodes, 8 H100 each (default 1000)
  --pods-per-node P     running vGPU pods per node in the cluster file (default 10)
  --concurrency C       requests in flight (default 64)
  --filters-in-flight F /filter calls at once (default: C). 1 is how kube-scheduler calls
                        an extender: one pod's scheduling cycle at a time, its binds in
                        parallel; the C cycles then overlap only in their binds
  --duration S          seconds of filter+bind cycles (default 10)
  --cycles K            stop after K cycles (default: as many as fit in --duration)
  --mode names|nodes    /filter with NodeNames (default) or full Node objects
  --mutate-requests M   AdmissionReview requests after the cycles (default 20000)
  --http 1|2            HTTP/1.1 connection pool or HTTP/2 via ALPN (default 2)
  --server-log LEVEL    RUST_LOG of the server (default info)
  --server-arg ARG      extra `serve` flag, repeatable (e.g. --server-arg=--node-scheduler-policy=spread)
  --server-binary PATH  run this build of vgpu-scheduler instead (to compare two builds)
  --pin                 run the server on CPU 1 and the load generator on CPU 0 (Linux,
                        2+ CPUs), so that neither waits for the other's CPU; each then
                        runs one async worker thread

End to end (--burst M): a fake kube-apiserver on loopback, --nodes empty GPU nodes,
the server in live mode, a kube-scheduler stand-in and a device-plugin stand-in; M
pods created at once. Reports pods/s, create-to-bound p50/p99 and packing, against
the same burst bound by the kube-scheduler stand-in alone.
  --burst M                  pods in the burst (switches to this mode)
  --device-plugin-delay LIST milliseconds the device plugin takes to answer a bind,
                             comma-separated, one run each (default 0,50,500)
  --device-plugin hami|minimal
                             the device plugin stand-in's calls per answer: HAMi v2.x's
                             (default: 5 reads, 3 writes) or the protocol's least
                             (bind phase `success`, then the node read once and its
                             lock released: 1 read, 2 writes)
  --scheduler-qps Q          the kube-scheduler stand-in's client QPS (default 50)
  --scheduler-burst B        and burst (default 100), as kube-scheduler's defaults
  --repeat R                 runs of each (default 1)
  --control-plane free|calibrated
                             what each API call costs: nothing (default: the loopback
                             fake answers in microseconds, far cheaper than a real
                             control plane), or as a kube-apiserver and etcd on a
                             2-core machine do (docs/benchmarks.md says how it
                             was calibrated); the flags below, given after it,
                             change one part
  --write-service-ms W       milliseconds each write holds the API server's one lane,
                             after the calls before it (its CPU, etcd's commits)
  --read-service-ms R        the same for each read (default 0: reads pass the lane)
  --write-latency-ms L       milliseconds each write then waits on its own (overlapping
                             with the others in flight) before it is answered
  --read-latency-ms L        the same for each read
  (--nodes, --server-arg, --server-log and --server-binary apply as above)
";

/// Errors after which a phase stops.
const MAX_ERRORS: u64 = 100;
/// Longest a mutate phase may run.
const MUTATE_TIME_LIMIT: Duration = Duration::from_secs(300);
/// Longest the cycles phase may run when only `--cycles` bounds it.
const CYCLES_TIME_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Names,
    Nodes,
}

#[derive(Debug)]
struct Options {
    nodes: usize,
    pods_per_node: usize,
    concurrency: usize,
    /// `/filter` calls at once (`None`: as many as `concurrency`).
    filters_in_flight: Option<usize>,
    duration: Duration,
    cycles: Option<u64>,
    mode: Mode,
    mutate_requests: u64,
    http: HttpVersion,
    server_log: String,
    server_args: Vec<String>,
    /// Server on CPU 1, load generator on CPU 0.
    pin: bool,
    /// CPUs of the machine (counted before pinning).
    cpus: usize,
    /// Not run by `cargo bench` (no `--bench`): small defaults.
    smoke: bool,
    /// Another build of the server.
    server_binary: Option<std::path::PathBuf>,
    /// End-to-end burst of this many pods instead of the cycles.
    burst: Option<usize>,
    /// Device plugin answer delays of the burst.
    delays: Vec<Duration>,
    /// The API calls the device plugin stand-in makes per answer.
    device_plugin_calls: AnswerCalls,
    /// The kube-scheduler stand-in's client QPS and burst.
    scheduler_qps: u32,
    scheduler_burst: u32,
    /// What each call costs the fake API server.
    cost: control_plane::ControlPlaneCost,
    /// Runs of each burst.
    repeat: usize,
}

/// A flag's value in milliseconds (fractions allowed), 0 to 1000.
fn milliseconds(flag: &str, value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms <= 1000.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .ok_or_else(|| format!("{flag}: {value:?} is not 0 to 1000 milliseconds"))
}

fn parse_options(args: Vec<String>) -> Result<Options, String> {
    let smoke = !args.iter().any(|a| a == "--bench");
    let mut o = if smoke {
        Options {
            nodes: 20,
            pods_per_node: 4,
            concurrency: 8,
            filters_in_flight: None,
            duration: Duration::from_secs(30),
            cycles: Some(200),
            mode: Mode::Names,
            mutate_requests: 200,
            http: HttpVersion::Http2,
            server_log: "warn".into(),
            server_args: Vec::new(),
            pin: false,
            cpus: 0,
            smoke,
            server_binary: None,
            burst: None,
            delays: [0, 50, 500].map(Duration::from_millis).to_vec(),
            device_plugin_calls: AnswerCalls::Hami,
            scheduler_qps: 50,
            scheduler_burst: 100,
            cost: Default::default(),
            repeat: 1,
        }
    } else {
        Options {
            nodes: 1000,
            pods_per_node: 10,
            concurrency: 64,
            filters_in_flight: None,
            duration: Duration::from_secs(10),
            cycles: None,
            mode: Mode::Names,
            mutate_requests: 20000,
            http: HttpVersion::Http2,
            server_log: "info".into(),
            server_args: Vec::new(),
            pin: false,
            cpus: 0,
            smoke,
            server_binary: None,
            burst: None,
            delays: [0, 50, 500].map(Duration::from_millis).to_vec(),
            device_plugin_calls: AnswerCalls::Hami,
            scheduler_qps: 50,
            scheduler_burst: 100,
            cost: Default::default(),
            repeat: 1,
        }
    };
    let mut duration_given = false;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let takes_value = matches!(
            flag.as_str(),
            "--nodes"
                | "--pods-per-node"
                | "--concurrency"
                | "--filters-in-flight"
                | "--duration"
                | "--cycles"
                | "--mode"
                | "--mutate-requests"
                | "--http"
                | "--server-log"
                | "--server-arg"
                | "--server-binary"
                | "--burst"
                | "--device-plugin-delay"
                | "--device-plugin"
                | "--scheduler-qps"
                | "--scheduler-burst"
                | "--repeat"
                | "--write-service-ms"
                | "--read-service-ms"
                | "--write-latency-ms"
                | "--read-latency-ms"
                | "--control-plane"
        );
        if !takes_value {
            match flag.as_str() {
                "--help" | "-h" => {
                    print!("{USAGE}");
                    std::process::exit(0);
                }
                "--bench" => {}
                "--pin" => o.pin = true,
                _ => eprintln!("loadgen: ignoring argument {arg:?}"),
            }
            continue;
        }
        let value = match inline.or_else(|| it.next()) {
            Some(v) => v,
            None => return Err(format!("{flag} needs a value")),
        };
        let number = |v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: {v:?} is not a whole number"))
        };
        match flag.as_str() {
            "--nodes" => o.nodes = number(&value)? as usize,
            "--pods-per-node" => o.pods_per_node = number(&value)? as usize,
            "--concurrency" => o.concurrency = number(&value)? as usize,
            "--filters-in-flight" => o.filters_in_flight = Some(number(&value)? as usize),
            "--duration" => {
                let s: f64 = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 3600.0)
                    .ok_or_else(|| format!("--duration: {value:?} is not 0 < seconds <= 3600"))?;
                o.duration = Duration::from_secs_f64(s);
                duration_given = true;
            }
            "--cycles" => o.cycles = Some(number(&value)?),
            "--mode" => {
                o.mode = match value.as_str() {
                    "names" => Mode::Names,
                    "nodes" => Mode::Nodes,
                    _ => return Err(format!("--mode: {value:?} is not names or nodes")),
                }
            }
            "--mutate-requests" => o.mutate_requests = number(&value)?,
            "--http" => {
                o.http = match value.as_str() {
                    "1" | "1.1" => HttpVersion::Http1,
                    "2" => HttpVersion::Http2,
                    _ => return Err(format!("--http: {value:?} is not 1 or 2")),
                }
            }
            "--server-log" => o.server_log = value,
            "--server-arg" => o.server_args.push(value),
            "--server-binary" => o.server_binary = Some(value.into()),
            "--burst" => o.burst = Some(number(&value)? as usize),
            "--device-plugin-delay" => {
                o.delays = value
                    .split(',')
                    .map(|ms| number(ms.trim()).map(Duration::from_millis))
                    .collect::<Result<_, _>>()?
            }
            "--device-plugin" => {
                o.device_plugin_calls = match value.as_str() {
                    "hami" => AnswerCalls::Hami,
                    "minimal" => AnswerCalls::Minimal,
                    _ => return Err(format!("--device-plugin: {value:?} is not hami or minimal")),
                }
            }
            "--scheduler-qps" => o.scheduler_qps = number(&value)? as u32,
            "--scheduler-burst" => o.scheduler_burst = number(&value)? as u32,
            "--repeat" => o.repeat = (number(&value)? as usize).max(1),
            "--write-service-ms" => o.cost.write_service = milliseconds(&flag, &value)?,
            "--read-service-ms" => o.cost.read_service = milliseconds(&flag, &value)?,
            "--write-latency-ms" => o.cost.write_latency = milliseconds(&flag, &value)?,
            "--read-latency-ms" => o.cost.read_latency = milliseconds(&flag, &value)?,
            "--control-plane" => {
                o.cost = match value.as_str() {
                    "free" => control_plane::ControlPlaneCost::default(),
                    "calibrated" => control_plane::ControlPlaneCost::CALIBRATED,
                    _ => {
                        return Err(format!(
                            "--control-plane: {value:?} is not free or calibrated"
                        ));
                    }
                }
            }
            _ => unreachable!("every flag taking a value is handled"),
        }
    }
    if o.burst.is_some_and(|m| m == 0 || m > 100_000) {
        return Err("--burst must be 1..=100000".into());
    }
    if o.cycles.is_some() && !duration_given && !o.smoke {
        o.duration = CYCLES_TIME_LIMIT;
    }
    if o.nodes == 0 || o.nodes > 100_000 {
        return Err("--nodes must be 1..=100000".into());
    }
    if o.pods_per_node > 100 {
        return Err("--pods-per-node must be at most 100".into());
    }
    if o.concurrency == 0 || o.concurrency > 4096 {
        return Err("--concurrency must be 1..=4096".into());
    }
    if o.filters_in_flight
        .is_some_and(|f| f == 0 || f > o.concurrency)
    {
        return Err("--filters-in-flight must be 1..=--concurrency".into());
    }
    Ok(o)
}

/// What the tasks of one phase share.
struct Shared {
    issued: AtomicU64,
    limit: u64,
    deadline: Instant,
    stop: AtomicBool,
    errors: AtomicU64,
    notes: parking_lot::Mutex<Vec<String>>,
}

impl Shared {
    fn new(limit: u64, time_limit: Duration) -> Self {
        Shared {
            issued: AtomicU64::new(0),
            limit,
            deadline: Instant::now() + time_limit,
            stop: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            notes: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// The next request number, or `None` when the phase is over.
    fn next(&self) -> Option<u64> {
        if self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return None;
        }
        let i = self.issued.fetch_add(1, Ordering::Relaxed);
        (i < self.limit).then_some(i)
    }

    fn error(&self, message: String) {
        let n = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
        let mut notes = self.notes.lock();
        if notes.len() < 5 {
            notes.push(message);
        }
        if n >= MAX_ERRORS {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    fn stop_because(&self, reason: String) {
        if !self.stop.swap(true, Ordering::Relaxed) {
            self.notes.lock().push(reason);
        }
    }
}

/// POSTs `body`; returns the decoded answer and the seconds it took (send to last
/// byte of the body).
async fn post(
    client: &reqwest::Client,
    url: &str,
    body: String,
) -> Result<(Value, f64, reqwest::Version), String> {
    let started = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = response.status();
    let version = response.version();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("POST {url}: reading the answer: {e}"))?;
    let elapsed = started.elapsed().as_secs_f64();
    if !status.is_success() {
        return Err(format!(
            "POST {url}: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        ));
    }
    let value = serde_json::from_slice(&bytes).map_err(|e| format!("POST {url}: {e}"))?;
    Ok((value, elapsed, version))
}

fn error_field(answer: &Value) -> Option<&str> {
    answer
        .get("Error")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
}

/// The node a single-mode `/filter` chose (the first of several in `--filter-mode all`).
fn chosen_node(answer: &Value, mode: Mode) -> Option<String> {
    let node = match mode {
        Mode::Names => answer.pointer("/NodeNames/0"),
        Mode::Nodes => answer.pointer("/Nodes/items/0/metadata/name"),
    };
    node.and_then(Value::as_str).map(String::from)
}

struct CycleRequests {
    filter_url: String,
    bind_url: String,
    pod_template: String,
    /// `{"Pod":` … pod … this.
    filter_suffix: String,
    mode: Mode,
    run_id: u32,
    /// Held for each `/filter` call: at most this many at once.
    filter_turns: tokio::sync::Semaphore,
}

#[derive(Default)]
struct CycleSamples {
    filter: Vec<f64>,
    bind: Vec<f64>,
    cycle: Vec<f64>,
    versions: Vec<reqwest::Version>,
}

async fn cycle_task(
    client: reqwest::Client,
    requests: Arc<CycleRequests>,
    shared: Arc<Shared>,
) -> CycleSamples {
    let mut out = CycleSamples::default();
    while let Some(i) = shared.next() {
        let started = Instant::now();
        let name = format!("lg-{:08x}-{i:07}", requests.run_id);
        let uid = format!("{:08x}-6c67-4000-8000-{i:012x}", requests.run_id);
        let pod = requests
            .pod_template
            .replace(NAME_MARK, &name)
            .replace(UID_MARK, &uid);
        let mut body = String::with_capacity(8 + pod.len() + requests.filter_suffix.len());
        body.push_str("{\"Pod\":");
        body.push_str(&pod);
        body.push_str(&requests.filter_suffix);
        let turn = requests.filter_turns.acquire().await;
        let filtered = post(&client, &requests.filter_url, body).await;
        drop(turn);
        let answer = match filtered {
            Ok((answer, seconds, version)) => {
                out.filter.push(seconds);
                if !out.versions.contains(&version) {
                    out.versions.push(version);
                }
                answer
            }
            Err(e) => {
                shared.error(format!("filter {name}: {e}"));
                continue;
            }
        };
        if let Some(e) = error_field(&answer) {
            shared.error(format!("filter {name}: Error {e}"));
            continue;
        }
        let Some(node) = chosen_node(&answer, requests.mode) else {
            let failed = answer.get("FailedNodes").map(Value::to_string);
            shared.stop_because(format!(
                "stopped early: filter {name} fit no node (FailedNodes {})",
                failed.unwrap_or_else(|| "absent".into())
            ));
            break;
        };
        let bind = json!({"PodName": name, "PodNamespace": LOAD_NAMESPACE,
                          "PodUID": uid, "Node": node})
        .to_string();
        match post(&client, &requests.bind_url, bind).await {
            Ok((answer, seconds, _)) => {
                out.bind.push(seconds);
                if let Some(e) = error_field(&answer) {
                    shared.error(format!("bind {name} to {node}: Error {e}"));
                    continue;
                }
                out.cycle.push(started.elapsed().as_secs_f64());
            }
            Err(e) => shared.error(format!("bind {name} to {node}: {e}")),
        }
    }
    out
}

async fn mutate_task(
    client: reqwest::Client,
    url: Arc<str>,
    template: Arc<str>,
    run_id: u32,
    shared: Arc<Shared>,
) -> Vec<f64> {
    let mut out = Vec::new();
    while let Some(i) = shared.next() {
        let name = format!("adm-{i:07}");
        let uid = format!("{run_id:08x}-6164-4000-8000-{i:012x}");
        let body = template.replace(NAME_MARK, &name).replace(UID_MARK, &uid);
        match post(&client, &url, body).await {
            Ok((answer, seconds, _)) => {
                out.push(seconds);
                let allowed = answer.pointer("/response/allowed") == Some(&Value::Bool(true));
                let echoed =
                    answer.pointer("/response/uid").and_then(Value::as_str) == Some(uid.as_str());
                if !(allowed && echoed) {
                    shared.error(format!("mutate {name}: unexpected answer {answer}"));
                }
            }
            Err(e) => shared.error(format!("mutate {name}: {e}")),
        }
    }
    out
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn version_name(v: reqwest::Version) -> &'static str {
    match v {
        reqwest::Version::HTTP_09 => "HTTP/0.9",
        reqwest::Version::HTTP_10 => "HTTP/1.0",
        reqwest::Version::HTTP_11 => "HTTP/1.1",
        reqwest::Version::HTTP_2 => "HTTP/2",
        reqwest::Version::HTTP_3 => "HTTP/3",
        _ => "?",
    }
}

fn secs3(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e3).round() / 1e3
}

async fn run(options: Options) -> Result<bool, String> {
    stats::self_check();
    go_http2_clients::self_check();
    let dir = tempfile::Builder::new()
        .prefix("vgpu-loadgen-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let cluster_file = dir.path().join("cluster.yaml");
    let generated = Instant::now();
    let cluster = cluster::generate(
        &cluster_file,
        options.nodes,
        options.pods_per_node,
        options.mode == Mode::Nodes,
    )
    .map_err(|e| format!("write cluster file: {e}"))?;
    let file_mib = std::fs::metadata(&cluster_file).map_or(0.0, |m| m.len() as f64 / 1048576.0);
    eprintln!(
        "loadgen: cluster file {:.1} MiB ({} nodes, {} running pods) in {:.2}s; starting the server",
        file_mib,
        options.nodes,
        cluster.pods,
        generated.elapsed().as_secs_f64()
    );

    let ready_timeout = Duration::from_secs(30 + (cluster.pods / 1000) as u64 * 2);
    let server = ServerProcess::start(&Launch {
        dir: dir.path(),
        source: server::ServerSource::ClusterFile(&cluster_file),
        binary: options.server_binary.as_deref(),
        extra_args: &options.server_args,
        log_level: &options.server_log,
        http: options.http,
        pool: options.concurrency,
        ready_timeout,
        cpu: options.pin.then_some(1),
    })
    .await?;
    let (rss_ready, _) = server.rss_mib();
    eprintln!(
        "loadgen: server pid {} ready in {:.3}s at {}",
        server.pid,
        server.startup.as_secs_f64(),
        server.base
    );
    let run_id = std::process::id();

    // Phase 1: filter + bind cycles.
    let budget = cluster.capacity * 9 / 10;
    let limit = options.cycles.unwrap_or(u64::MAX).min(budget);
    if options.cycles.is_some_and(|k| k > budget) {
        eprintln!(
            "loadgen: --cycles capped at {budget} (90% of the {} pods that fit)",
            cluster.capacity
        );
    }
    let names_json = Value::from(cluster.node_names.clone()).to_string();
    let filter_suffix = match (&cluster.nodes_json, options.mode) {
        (Some(nodes), Mode::Nodes) => {
            format!(",\"Nodes\":{{\"items\":{nodes}}},\"NodeNames\":null}}")
        }
        _ => format!(",\"Nodes\":null,\"NodeNames\":{names_json}}}"),
    };
    let filters_in_flight = options.filters_in_flight.unwrap_or(options.concurrency);
    let requests = Arc::new(CycleRequests {
        filter_url: server.url("/filter"),
        bind_url: server.url("/bind"),
        pod_template: cluster::filter_pod_template(),
        filter_suffix,
        mode: options.mode,
        run_id,
        filter_turns: tokio::sync::Semaphore::new(filters_in_flight),
    });
    let filter_body_bytes = 7 + requests.pod_template.len() + requests.filter_suffix.len();
    eprintln!(
        "loadgen: cycles: {} in flight, /filter body {:.1} KiB, up to {} cycles or {:.0}s",
        options.concurrency,
        filter_body_bytes as f64 / 1024.0,
        limit,
        options.duration.as_secs_f64()
    );
    let shared = Arc::new(Shared::new(limit, options.duration));
    let cpu_before = (server.cpu_time(), server::own_cpu_time());
    let started = Instant::now();
    let tasks: Vec<_> = (0..options.concurrency)
        .map(|_| {
            tokio::spawn(cycle_task(
                server.client.clone(),
                requests.clone(),
                shared.clone(),
            ))
        })
        .collect();
    let mut samples = CycleSamples::default();
    for t in tasks {
        let s = t.await.map_err(|e| format!("cycle task: {e}"))?;
        samples.filter.extend(s.filter);
        samples.bind.extend(s.bind);
        samples.cycle.extend(s.cycle);
        for v in s.versions {
            if !samples.versions.contains(&v) {
                samples.versions.push(v);
            }
        }
    }
    let cycles_elapsed = started.elapsed();
    let cycles_done = samples.cycle.len() as u64;
    // CPU per cycle, in microseconds, of the server and of this process.
    let cpu_per_cycle = |before: Option<Duration>, after: Option<Duration>| {
        let used = after?.checked_sub(before?)?;
        (cycles_done > 0).then(|| used.as_secs_f64() * 1e6 / cycles_done as f64)
    };
    let cycle_cpu_us = (
        cpu_per_cycle(cpu_before.0, server.cpu_time()),
        cpu_per_cycle(cpu_before.1, server::own_cpu_time()),
    );
    let cycle_errors = shared.errors.load(Ordering::Relaxed);
    let mut notes = std::mem::take(&mut *shared.notes.lock());
    if limit == budget && shared.issued.load(Ordering::Relaxed) >= limit {
        notes.push(format!(
            "stopped at {budget} cycles, 90% of the {} load pods that fit; use more --nodes for a longer run",
            cluster.capacity
        ));
    }
    let filter = Samples::new(samples.filter);
    let bind = Samples::new(samples.bind);
    let cycle = Samples::new(samples.cycle);
    let cycles_per_s = cycles_done as f64 / cycles_elapsed.as_secs_f64().max(1e-9);
    let (rss_after_cycles, _) = server.rss_mib();

    // Phase 2: webhook.
    let shared = Arc::new(Shared::new(options.mutate_requests, MUTATE_TIME_LIMIT));
    let url: Arc<str> = server.url("/mutate").into();
    let template: Arc<str> = cluster::admission_review_template().into();
    let started = Instant::now();
    let tasks: Vec<_> = (0..options.concurrency)
        .map(|_| {
            tokio::spawn(mutate_task(
                server.client.clone(),
                url.clone(),
                template.clone(),
                run_id,
                shared.clone(),
            ))
        })
        .collect();
    let mut mutate = Vec::new();
    for t in tasks {
        mutate.extend(t.await.map_err(|e| format!("mutate task: {e}"))?);
    }
    let mutate_elapsed = started.elapsed();
    let mutate_errors = shared.errors.load(Ordering::Relaxed);
    notes.extend(std::mem::take(&mut *shared.notes.lock()));
    let mutate = Samples::new(mutate);
    let mutate_per_s = mutate.len() as f64 / mutate_elapsed.as_secs_f64().max(1e-9);

    // Server's view.
    let (rss, rss_peak) = server.rss_mib();
    let metrics_text = server
        .client
        .get(server.url("/metrics"))
        .send()
        .await
        .map_err(|e| format!("GET /metrics: {e}"))?
        .text()
        .await
        .map_err(|e| format!("GET /metrics: {e}"))?;
    let histograms =
        stats::parse_histograms(&metrics_text, "vgpu_scheduler_request_duration_seconds");
    let server_log_bytes = server.log_bytes();
    let startup = server.startup;
    if cycle_errors + mutate_errors > 0 {
        eprintln!("loadgen: server log tail:\n{}", server.log_tail());
    }
    drop(server);
    drop(dir);

    // Report.
    let cpus = options.cpus;
    let model = cpu_model();
    let versions: Vec<&str> = samples.versions.iter().map(|v| version_name(*v)).collect();
    let mode = match options.mode {
        Mode::Names => "names",
        Mode::Nodes => "nodes",
    };
    let server_side = |verb: &str| {
        let h = histograms.get(verb);
        let q = |q: f64| h.and_then(|h| h.quantile(q));
        (h.map_or(0.0, |h| h.count()), q(0.5), q(0.99))
    };
    println!();
    println!(
        "vgpu-scheduler load generator{}",
        if options.smoke { " (smoke run)" } else { "" }
    );
    println!("machine     {cpus} CPUs, {model}");
    println!(
        "cluster     {} nodes x {} GPUs, {} running vGPU pods, file {:.1} MiB",
        options.nodes,
        cluster::GPUS_PER_NODE,
        cluster.pods,
        file_mib
    );
    println!(
        "load        --mode {mode}, {} in flight ({filters_in_flight} of them /filter at most) over {}, pod = 1 GPU {} MiB {}% cores, /filter body {:.1} KiB, server log {}",
        options.concurrency,
        versions.join("+"),
        cluster::POD_MEM,
        cluster::POD_CORES,
        filter_body_bytes as f64 / 1024.0,
        options.server_log
    );
    if !options.server_args.is_empty() {
        println!("server args {}", options.server_args.join(" "));
    }
    if options.pin {
        println!("cpus        server pinned to CPU 1, load generator to CPU 0 (--pin)");
    }
    println!(
        "startup     {:.3} s (process start to /readyz 200: cluster file parse, ledger rebuild, TLS)",
        startup.as_secs_f64()
    );
    println!(
        "cycles      {cycles_done} filter+bind in {:.2} s = {cycles_per_s:.0}/s, {cycle_errors} errors",
        cycles_elapsed.as_secs_f64()
    );
    let us = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.0}"));
    println!(
        "cpu/cycle   server {} µs, load generator {} µs (user + system, whole processes)",
        us(cycle_cpu_us.0),
        us(cycle_cpu_us.1)
    );
    println!(
        "mutate      {} in {:.2} s = {mutate_per_s:.0}/s, {mutate_errors} errors",
        mutate.len(),
        mutate_elapsed.as_secs_f64()
    );
    println!(
        "latency ms  {:>8} {:>8} {:>8} {:>8} {:>10} {:>10}",
        "n", "p50", "p99", "p99.9", "server p50", "server p99"
    );
    for (label, verb, s) in [
        ("filter", Some("filter"), &filter),
        ("bind", Some("bind"), &bind),
        ("cycle", None, &cycle),
        ("mutate", Some("mutate"), &mutate),
    ] {
        let (_, sp50, sp99) = verb.map_or((0.0, None, None), server_side);
        println!(
            "  {label:<9} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10}",
            s.len(),
            ms_text(s.quantile(0.5)),
            ms_text(s.quantile(0.99)),
            ms_text(s.quantile(0.999)),
            ms_text(sp50),
            ms_text(sp99)
        );
    }
    let mib = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
    println!(
        "server RSS  {} MiB after load (peak {} MiB; {} MiB when ready, {} MiB after cycles)",
        mib(rss),
        mib(rss_peak),
        mib(rss_ready),
        mib(rss_after_cycles)
    );
    println!("(server p50/p99: upper bound of the /metrics histogram bucket, within 25%)");
    for n in &notes {
        println!("note        {n}");
    }
    let round1 = |v: Option<f64>| v.map(|v| (v * 10.0).round() / 10.0);
    let server_json = |verb: &str| {
        let (n, p50, p99) = server_side(verb);
        json!({"n": n as u64, "p50": ms(p50), "p99": ms(p99)})
    };
    let report = json!({
        "machine": {"cpus": cpus, "model": model},
        "params": {
            "nodes": options.nodes, "gpus_per_node": cluster::GPUS_PER_NODE,
            "running_pods": cluster.pods, "concurrency": options.concurrency,
            "filters_in_flight": filters_in_flight,
            "mode": mode, "http": versions.join("+"), "duration_s": secs3(options.duration),
            "cycles_limit": limit, "mutate_requests": options.mutate_requests,
            "server_log": options.server_log, "server_args": options.server_args,
            "pin": options.pin, "smoke": options.smoke,
        },
        "startup_s": secs3(startup),
        "cycles": cycles_done,
        "cycles_s": secs3(cycles_elapsed),
        "cycles_per_s": cycles_per_s.round(),
        "cpu_us_per_cycle": {"server": cycle_cpu_us.0.map(f64::round),
                             "load_generator": cycle_cpu_us.1.map(f64::round)},
        "mutate_per_s": mutate_per_s.round(),
        "errors": cycle_errors + mutate_errors,
        "client_ms": {
            "filter": filter.summary(), "bind": bind.summary(),
            "cycle": cycle.summary(), "mutate": mutate.summary(),
        },
        "server_ms": {
            "filter": server_json("filter"), "bind": server_json("bind"),
            "mutate": server_json("mutate"),
        },
        "rss_mib": {"after_load": round1(rss), "peak": round1(rss_peak),
                    "ready": round1(rss_ready), "after_cycles": round1(rss_after_cycles)},
        "server_log_bytes": server_log_bytes,
        "notes": notes,
    });
    println!("{report}");
    Ok(cycle_errors + mutate_errors == 0 && cycles_done > 0)
}

fn main() {
    let mut options = match parse_options(std::env::args().skip(1).collect()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loadgen: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    options.cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    if options.pin {
        if options.cpus < 2 {
            eprintln!(
                "loadgen: --pin needs at least 2 CPUs, this process may use {}",
                options.cpus
            );
            std::process::exit(2);
        }
        // Before the runtime starts, so that its threads inherit the CPU.
        if let Err(e) = server::pin_current_thread(0) {
            eprintln!("loadgen: {e}");
            std::process::exit(2);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let burst_smoke = options.smoke.then(|| e2e::BurstOptions {
        nodes: 4,
        pods: 24,
        delays: vec![Duration::ZERO, Duration::from_millis(50)],
        device_plugin_calls: options.device_plugin_calls,
        scheduler_qps: options.scheduler_qps,
        scheduler_burst: options.scheduler_burst,
        cost: options.cost,
        server_args: options.server_args.clone(),
        server_binary: options.server_binary.clone(),
        repeat: 1,
        time_limit: Duration::from_secs(60),
        server_log: options.server_log.clone(),
        smoke: true,
    });
    let outcome = match options.burst {
        Some(pods) => runtime.block_on(e2e::run(e2e::BurstOptions {
            nodes: options.nodes,
            pods,
            delays: options.delays.clone(),
            device_plugin_calls: options.device_plugin_calls,
            scheduler_qps: options.scheduler_qps,
            scheduler_burst: options.scheduler_burst,
            cost: options.cost,
            server_args: options.server_args.clone(),
            server_binary: options.server_binary.clone(),
            repeat: options.repeat,
            time_limit: Duration::from_secs(600),
            server_log: options.server_log.clone(),
            smoke: options.smoke,
        })),
        None => runtime.block_on(async {
            // The smoke run covers the end-to-end burst too, so it cannot rot.
            let cycles = run(options).await?;
            match burst_smoke {
                Some(burst) => Ok(cycles & e2e::run(burst).await?),
                None => Ok(cycles),
            }
        }),
    };
    match outcome {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("loadgen: the run had errors or completed no cycle (see notes)");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(1);
        }
    }
}
