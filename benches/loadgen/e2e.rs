//! The end-to-end burst (`--burst M`): an API server (the project's fake
//! kube-apiserver, on loopback), N empty GPU nodes, the scheduler in live mode
//! against it, a kube-scheduler stand-in (one cycle at a time, binds
//! asynchronous) and a stand-in for HAMi's device plugin answering each bind
//! after a configurable delay. M pods are created at once (through the API
//! server, as are kube-scheduler's `Scheduled` events, so that with
//! `--control-plane calibrated` every call a placement makes is paid for); the run reports how
//! fast they are bound (pods/s from the first create to the last bind, and each
//! pod's create to bound), how they are packed, and whether any GPU was given
//! more than it has or two pods were `allocating` on one node at once. The same
//! burst bound by the kube-scheduler stand-in alone (no extender) is the
//! reference.

use super::burst_pods;
use super::cluster::{self, GPU_SLOTS, GPUS_PER_NODE, LOAD_NAMESPACE};
use super::control_plane::ControlPlaneCost;
use super::device_plugin::{AnswerCalls, DevicePlugin};
use super::fake_apiserver::{ApiCalls, FakeApiServer, WatchTraffic};
use super::kube_scheduler::{self, Binder};
use super::packing::{Packing, packing};
use super::scheduled_events::ScheduledEvents;
use super::server::{self, HttpVersion, Launch, ServerProcess, ServerSource};
use super::stats::{Samples, ms};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use vgpu_scheduler::server::ServerLimits;

/// Settings of the end-to-end burst.
#[derive(Debug, Clone)]
pub struct BurstOptions {
    /// GPU nodes (8 H100s each, nothing running).
    pub nodes: usize,
    /// Pods created at once.
    pub pods: usize,
    /// Device plugin answer delays to run the extender with, one run each.
    pub delays: Vec<Duration>,
    /// The API calls the device plugin stand-in makes per answer.
    pub device_plugin_calls: AnswerCalls,
    /// The kube-scheduler stand-in's client QPS and burst (its defaults: 50, 100).
    pub scheduler_qps: u32,
    pub scheduler_burst: u32,
    /// What each call costs the API server.
    pub cost: ControlPlaneCost,
    /// Extra `serve` flags.
    pub server_args: Vec<String>,
    /// Another build of the server to run instead (to compare).
    pub server_binary: Option<PathBuf>,
    /// Runs of each scenario.
    pub repeat: usize,
    /// Longest a burst may take.
    pub time_limit: Duration,
    /// `RUST_LOG` of the server.
    pub server_log: String,
    /// A smoke run (small, checks only that it works).
    pub smoke: bool,
}

/// One burst's result.
struct BurstResult {
    label: String,
    bound: usize,
    pods_per_s: f64,
    create_to_bound: Samples,
    packing: Packing,
    two_allocating: u64,
    device_plugin_errors: u64,
    bind_errors: u64,
    filter_errors: u64,
    notes: Vec<String>,
    /// API requests from the burst's first create on, as the API server counts them.
    api_calls: ApiCalls,
    /// Of those, the device plugin stand-in's reads and writes.
    device_plugin_calls: (u64, u64),
    /// Watch events the API server sent over the same span, per resource.
    watch_traffic: WatchTraffic,
    /// Watches open at the end, of every resource.
    watchers: usize,
    /// CPU time over the same span: this server's (none without the extender),
    /// and this process's (the fake API server and every stand-in).
    cpu: (Option<Duration>, Option<Duration>),
}

fn load_pod(i: usize) -> Value {
    let mut spec = cluster::pod_spec("vgpu-scheduler");
    // Pods not yet scheduled: the API server defaults the rest.
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("priority");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("burst-{i:05}"),
            "namespace": LOAD_NAMESPACE,
            "labels": {"app": "loadgen"},
        },
        "spec": spec,
    })
}

fn empty_node(n: usize) -> Value {
    let mut node = cluster::node(n);
    if let Some(meta) = node["metadata"].as_object_mut() {
        meta.remove("uid");
        meta.remove("resourceVersion");
    }
    node
}

async fn kube_client(kubeconfig: &std::path::Path) -> Result<kube::Client, String> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// One burst: with the extender (and the device plugin answering after `delay`)
/// or without it.
async fn burst(o: &BurstOptions, delay: Option<Duration>) -> Result<BurstResult, String> {
    let api = FakeApiServer::start().await;
    // Every pod changes several times; watchers must not fall off the history.
    api.set_history_limit(50 * o.pods + 10_000);
    api.create(json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": LOAD_NAMESPACE}}));
    let node_names: Vec<String> = (0..o.nodes).map(cluster::node_name).collect();
    for n in 0..o.nodes {
        api.create(empty_node(n));
    }
    let dir = tempfile::Builder::new()
        .prefix("vgpu-loadgen-e2e-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let kubeconfig = api.write_kubeconfig(dir.path());
    o.cost.apply(&api);
    let mut server = None;
    let mut device_plugin = None;
    let binder = match delay {
        Some(delay) => {
            let mut args = vec!["--scheduler-name".to_string(), "vgpu-scheduler".into()];
            args.extend(o.server_args.iter().cloned());
            let started = ServerProcess::start(&Launch {
                dir: dir.path(),
                source: ServerSource::Kubeconfig(&kubeconfig),
                binary: o.server_binary.as_deref(),
                extra_args: &args,
                log_level: &o.server_log,
                // Readiness only: kube-scheduler's calls go through
                // `go_http2_clients` below.
                http: HttpVersion::Http2,
                pool: 1,
                ready_timeout: Duration::from_secs(60),
                cpu: None,
            })
            .await?;
            device_plugin = Some(DevicePlugin::start(
                kube_client(&kubeconfig).await?,
                delay,
                o.device_plugin_calls,
            ));
            let binder = Binder::Extender {
                // The server's default stream limit per connection.
                clients: started
                    .go_http2_clients(ServerLimits::default().max_streams_per_connection as usize),
                filter_url: started.url("/filter"),
                bind_url: started.url("/bind"),
            };
            server = Some(started);
            binder
        }
        None => Binder::ApiServer {
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .map_err(|e| e.to_string())?,
            base: api.url(),
            token: api.token(),
            limiter: kube_scheduler::client_limiter(o.scheduler_qps, o.scheduler_burst),
        },
    };

    // The burst: every pod created at once, then scheduled in creation order.
    // Counted from here: what placing the pods costs the API server.
    api.clear_request_log();
    let cpu_before = (
        server.as_ref().and_then(ServerProcess::cpu_time),
        server::own_cpu_time(),
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let events = ScheduledEvents::start(
        http.clone(),
        api.url(),
        api.token(),
        kube_scheduler::client_limiter(o.scheduler_qps, o.scheduler_burst),
    );
    let first_created = Instant::now();
    let pods = burst_pods::create(
        &http,
        &api.url(),
        &api.token(),
        LOAD_NAMESPACE,
        (0..o.pods).map(load_pod).collect(),
    )
    .await?;
    let outcome = kube_scheduler::schedule_burst(
        pods,
        LOAD_NAMESPACE,
        &node_names,
        GPUS_PER_NODE as u64 * GPU_SLOTS,
        Arc::new(binder),
        &events,
        o.time_limit,
    )
    .await;
    let bound = outcome.bound_after.iter().flatten().count();
    // Let the device plugin answer the last binds, so the pods are as it left them.
    if let Some(plugin) = &device_plugin {
        let settle = Instant::now() + Duration::from_secs(30);
        while (plugin.counts.answered.load(Ordering::Relaxed)
            + plugin.counts.errors.load(Ordering::Relaxed))
            < bound as u64
            && Instant::now() < settle
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // And the events of the last binds, so that they are counted.
    let settle = Instant::now() + Duration::from_secs(30);
    while events.sent() < bound as u64 && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failed_events = events.failed.load(Ordering::Relaxed);
    let spent =
        |before: Option<Duration>, after: Option<Duration>| Some(after?.saturating_sub(before?));
    let cpu = (
        spent(
            cpu_before.0,
            server.as_ref().and_then(ServerProcess::cpu_time),
        ),
        spent(cpu_before.1, server::own_cpu_time()),
    );
    let elapsed = outcome.last_bound.map_or(Duration::ZERO, |t| {
        t.saturating_duration_since(first_created)
    });
    let mut notes = outcome.notes.clone();
    if failed_events > 0 {
        notes.push(format!(
            "{failed_events} Scheduled events refused or not answered"
        ));
    }
    if bound < o.pods {
        notes.push(format!(
            "{} of {} pods unbound after {:?}",
            o.pods - bound,
            o.pods,
            o.time_limit
        ));
    }
    if let Some(server) = &server
        && (outcome.bind_errors > 0 || bound < o.pods)
    {
        eprintln!("loadgen: server log tail:\n{}", server.log_tail());
    }
    let result = BurstResult {
        label: match delay {
            None => "kube-scheduler alone (no extender)".into(),
            Some(d) => format!(
                "with vgpu-scheduler, device plugin answers after {} ms",
                d.as_millis()
            ),
        },
        bound,
        pods_per_s: bound as f64 / elapsed.as_secs_f64().max(1e-9),
        create_to_bound: Samples::new(
            outcome
                .bound_after
                .iter()
                .flatten()
                .map(Duration::as_secs_f64)
                .collect(),
        ),
        packing: packing(&api.list("Pod"), LOAD_NAMESPACE),
        two_allocating: device_plugin
            .as_ref()
            .map_or(0, |p| p.counts.two_allocating.load(Ordering::Relaxed)),
        device_plugin_errors: device_plugin
            .as_ref()
            .map_or(0, |p| p.counts.errors.load(Ordering::Relaxed)),
        bind_errors: outcome.bind_errors,
        filter_errors: outcome.filter_errors,
        notes,
        api_calls: api.api_calls(),
        watch_traffic: api.watch_traffic(),
        watchers: api.watch_count(),
        cpu,
        device_plugin_calls: device_plugin.as_ref().map_or((0, 0), |p| {
            (
                p.counts.reads.load(Ordering::Relaxed),
                p.counts.writes.load(Ordering::Relaxed),
            )
        }),
    };
    drop(device_plugin);
    drop(server);
    // Not `shutdown`: that waits for every client's connection to close, and
    // the watches of the stopped processes may linger; dropping stops serving.
    drop(api);
    Ok(result)
}

/// `writes W (verb resource n, ...), reads R (...)` per bound pod, then the
/// device plugin stand-in's share and the rest (this server's).
/// Watch events and bytes the API server sent per bound pod, per resource: what
/// a placement costs it beyond the calls, as each change goes to every watcher.
fn watch_traffic_per_pod(traffic: &WatchTraffic, watchers: usize, bound: usize) -> String {
    let per = |n: u64| n as f64 / bound.max(1) as f64;
    let resources = traffic
        .sent
        .iter()
        .map(|(resource, sent)| {
            format!(
                "{resource} {:.1} events {:.1} KB",
                per(sent.events),
                per(sent.bytes) / 1024.0
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "per pod sent to watchers: {resources}; total {:.1} KB ({watchers} watches open)",
        per(traffic.total().bytes) / 1024.0
    )
}

fn calls_per_pod(calls: &ApiCalls, device_plugin: (u64, u64), bound: usize) -> String {
    let per = |n: usize| n as f64 / bound.max(1) as f64;
    let list = |verbs: &[&str]| {
        calls
            .counts
            .iter()
            .filter(|((verb, _), _)| verbs.contains(&verb.as_str()))
            .map(|((verb, resource), n)| format!("{verb} {resource} {:.2}", per(*n)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (plugin_reads, plugin_writes) = (device_plugin.0 as usize, device_plugin.1 as usize);
    let mut text = format!(
        "per pod: writes {:.2} ({}), reads {:.2} ({})",
        per(calls.writes()),
        list(&["create", "update", "patch", "delete"]),
        per(calls.reads()),
        list(&["get", "list"]),
    );
    if plugin_reads + plugin_writes > 0 {
        text += &format!(
            "; device plugin writes {:.2} reads {:.2}, the rest writes {:.2} reads {:.2}",
            per(plugin_writes),
            per(plugin_reads),
            per(calls.writes().saturating_sub(plugin_writes)),
            per(calls.reads().saturating_sub(plugin_reads)),
        );
    }
    text
}

/// Milliseconds of `cpu` per bound pod, rounded to hundredths.
fn per_pod_ms(cpu: Duration, bound: usize) -> f64 {
    (cpu.as_secs_f64() * 1e5 / bound.max(1) as f64).round() / 100.0
}

/// CPU per bound pod: this server's, then the fake API server's and the
/// stand-ins' together (all share this machine's cores).
fn cpu_per_pod((server, rest): (Option<Duration>, Option<Duration>), bound: usize) -> String {
    let show = |c: Option<Duration>| {
        c.map_or_else(|| "-".into(), |c| format!("{:.2} ms", per_pod_ms(c, bound)))
    };
    format!(
        "per pod: this server {}; fake API server, kube-scheduler and device plugin stand-ins {}",
        show(server),
        show(rest)
    )
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |s| format!("{s:.2}"))
}

/// Runs the reference burst and one burst per delay, `repeat` times each, and
/// prints the table. `Ok(false)` when a burst left pods unbound or broke an
/// invariant.
pub async fn run(o: BurstOptions) -> Result<bool, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut scenarios: Vec<Option<Duration>> = vec![None];
    scenarios.extend(o.delays.iter().copied().map(Some));
    let mut results = Vec::new();
    for round in 0..o.repeat {
        for &delay in &scenarios {
            eprintln!(
                "loadgen: burst {} of {}: {} pods on {} nodes, {}",
                round + 1,
                o.repeat,
                o.pods,
                o.nodes,
                delay.map_or("no extender".into(), |d| format!(
                    "device plugin delay {} ms",
                    d.as_millis()
                ))
            );
            results.push((round, delay, burst(&o, delay).await?));
        }
    }
    println!();
    println!(
        "vgpu-scheduler end-to-end burst{}",
        if o.smoke { " (smoke run)" } else { "" }
    );
    println!(
        "cluster     {} nodes x {GPUS_PER_NODE} H100 ({GPU_SLOTS} slots each), {} pods of 1 GPU {} MiB {}% cores created at once",
        o.nodes,
        o.pods,
        cluster::POD_MEM,
        cluster::POD_CORES
    );
    println!(
        "stand-ins   kube-scheduler: one cycle at a time, binds async, client {} QPS / burst {}; device plugin: answers each bind after the delay with {}, one pod per node at a time",
        o.scheduler_qps,
        o.scheduler_burst,
        o.device_plugin_calls.describe()
    );
    println!(
        "api server  the project's fake on loopback; {}",
        o.cost.describe()
    );
    if !o.server_args.is_empty() {
        println!("server args {}", o.server_args.join(" "));
    }
    println!(
        "{:<58} {:>6} {:>8} {:>8} {:>8} {:>6} {:>6} {:>5} {:>5} {:>6}",
        "run", "bound", "pods/s", "p50 s", "p99 s", "nodes", "part.", "over", "2x", "errors"
    );
    let mut ok = true;
    let mut report = Vec::new();
    for (round, delay, r) in &results {
        let reference = results
            .iter()
            .find(|(rr, d, _)| rr == round && d.is_none())
            .map(|(_, _, r)| r.pods_per_s);
        let ratio = match (delay, reference) {
            (Some(_), Some(reference)) if reference > 0.0 => {
                format!(" = {:.0}% of alone", 100.0 * r.pods_per_s / reference)
            }
            _ => String::new(),
        };
        println!(
            "{:<58} {:>6} {:>8.1} {:>8} {:>8} {:>6} {:>6} {:>5} {:>5} {:>6}{ratio}",
            r.label,
            r.bound,
            r.pods_per_s,
            secs(r.create_to_bound.quantile(0.5)),
            secs(r.create_to_bound.quantile(0.99)),
            r.packing.nodes_used,
            r.packing
                .gpus_partly_used
                .map_or_else(|| "-".into(), |n| n.to_string()),
            r.packing.gpus_over_capacity,
            r.two_allocating,
            r.bind_errors + r.filter_errors + r.device_plugin_errors,
        );
        println!(
            "api calls   {}",
            calls_per_pod(&r.api_calls, r.device_plugin_calls, r.bound)
        );
        println!(
            "watches     {}",
            watch_traffic_per_pod(&r.watch_traffic, r.watchers, r.bound)
        );
        println!("cpu         {}", cpu_per_pod(r.cpu, r.bound));
        for n in &r.notes {
            println!("note        {n}");
        }
        ok &= r.bound == o.pods && r.packing.gpus_over_capacity == 0 && r.two_allocating == 0;
        report.push(json!({
            "round": round, "device_plugin_delay_ms": delay.map(|d| d.as_millis() as u64),
            "bound": r.bound, "pods_per_s": (r.pods_per_s * 10.0).round() / 10.0,
            "create_to_bound_ms": r.create_to_bound.summary(),
            "p50_ms": ms(r.create_to_bound.quantile(0.5)),
            "nodes_used": r.packing.nodes_used, "gpus_partly_used": r.packing.gpus_partly_used,
            "gpus_over_capacity": r.packing.gpus_over_capacity,
            "two_allocating": r.two_allocating, "bind_errors": r.bind_errors,
            "filter_errors": r.filter_errors, "device_plugin_errors": r.device_plugin_errors,
            "api_writes_per_pod": r.api_calls.writes() as f64 / r.bound.max(1) as f64,
            "api_reads_per_pod": r.api_calls.reads() as f64 / r.bound.max(1) as f64,
            "device_plugin_reads_per_pod": r.device_plugin_calls.0 as f64 / r.bound.max(1) as f64,
            "device_plugin_writes_per_pod": r.device_plugin_calls.1 as f64 / r.bound.max(1) as f64,
            "server_cpu_ms_per_pod": r.cpu.0.map(|c| per_pod_ms(c, r.bound)),
            "fake_and_stand_ins_cpu_ms_per_pod": r.cpu.1.map(|c| per_pod_ms(c, r.bound)),
            "watch_bytes_per_pod": r.watch_traffic.sent.iter()
                .map(|(resource, sent)| (resource.clone(), sent.bytes / r.bound.max(1) as u64))
                .collect::<std::collections::BTreeMap<_, _>>(),
        }));
    }
    println!(
        "(part.: GPUs partly used; over: GPUs over capacity; 2x: a second pod allocating on a node before the first was answered)"
    );
    println!(
        "(api calls: requests to the API server per bound pod, by every client (the pods' creator, server and stand-ins, kube-scheduler's Scheduled events included), watches apart)"
    );
    println!(
        "(watches: events the API server sent its watchers per bound pod, the creates' included, with their JSON bytes; a real cluster has more watchers of each)"
    );
    println!(
        "{}",
        json!({"nodes": o.nodes, "pods": o.pods, "runs": report})
    );
    Ok(ok)
}
