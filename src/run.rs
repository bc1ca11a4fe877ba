//! `serve`: wire flags, cluster source, scheduler and server together.

use crate::app::{AppState, RouterOptions, metrics_router, router};
use crate::background::BackgroundRuntime;
use crate::cluster::api::ClusterApi;
use crate::cluster::file::{ClusterObject, visit_file};
use crate::cluster::kube::housekeeping::{self, HousekeepingConfig};
use crate::cluster::kube::leader::{self, LeaderConfig, Leadership};
use crate::cluster::kube::{KubeCluster, watch};
use crate::cluster::memory::MemoryCluster;
use crate::config::{LogFormat, ServeArgs};
use crate::device::device_config::DeviceConfig;
use crate::metrics::{Metrics, MetricsOptions};
use crate::scheduler::{GangConfig, Scheduler, SchedulerConfig};
use crate::server::{
    ServerLimits, TlsServer, TlsSettings, default_self_signed_names, install_crypto_provider,
};
use crate::trace::{TraceRecorder, TraceSettings};
use crate::webhook::{AnnotationWriters, WebhookConfig};
use anyhow::Context;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often expired reservations are swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Flushes the buffered log when dropped.
pub type LogGuard = crate::log_writer::FlushGuard;

/// How long the plain-HTTP metrics listener may take to close its connections
/// once the server stopped.
const METRICS_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Sets up logging to standard output, buffered (see `log_writer`): a request
/// never waits on the log's pipe or file. RUST_LOG, when set, says what is logged;
/// else everything at info level and above.
pub fn init_logging(format: LogFormat) -> LogGuard {
    init_logging_at(format, "info")
}

/// [`init_logging`] with `default_filter` (RUST_LOG's syntax: `info`,
/// `info,vgpu_scheduler=debug`) used when RUST_LOG is not set.
pub fn init_logging_at(format: LogFormat, default_filter: &str) -> LogGuard {
    let (writer, guard) = crate::log_writer::buffered_stdout();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // Colours only for a terminal: in a container log they are escape codes.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    // Values carry what clients sent: escaped in text lines, and in JSON lines the
    // characters log readers take for line breaks.
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .with_writer(crate::log_json_escape::EscapeLineSeparators(writer))
            .try_init(),
        LogFormat::Text => builder
            .with_writer(writer)
            .fmt_fields(crate::log_fields::EscapedFields)
            .try_init(),
    };
    guard
}

/// The scheduler's settings from `serve`'s flags (the simulator reads the same
/// flags for its variants).
pub fn scheduler_config(args: &ServeArgs, devices: &DeviceConfig) -> SchedulerConfig {
    SchedulerConfig {
        scheduler_name: args.scheduler_name.clone(),
        node_policy: args.node_scheduler_policy,
        gpu_policy: args.gpu_scheduler_policy.clone(),
        nvidia: devices.nvidia.clone(),
        filter_mode: args.filter_mode.into(),
        reservation_ttl: args.reservation_ttl,
        node_lock_timeout: args.node_lock_timeout,
        node_lock: args.node_lock,
        node_lock_retry_timeout: args.node_lock_retry_timeout,
        busy_node_tolerance: args.busy_node_tolerance.0,
        check_device_plugin_health: args.cluster_file.is_none(),
        gang: GangConfig {
            enabled: args.gang_scheduling,
            timeout: args.gang_timeout,
            strict: args.gang_strict,
            strict_wait: args.gang_strict_wait,
            filter_only: crate::gang::filter_only::FilterOnlyLimits {
                max: args.max_filter_only_pods,
                ttl: args.filter_only_pod_ttl,
            },
        },
        previous_schedulers: args
            .previous_scheduler_names
            .iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect(),
        placement_events: args.placement_events,
    }
}

/// The webhook's settings from `serve`'s flags.
pub fn webhook_config(args: &ServeArgs, devices: &DeviceConfig) -> WebhookConfig {
    WebhookConfig {
        scheduler_name: args.scheduler_name.clone(),
        force_overwrite_default_scheduler: args.force_overwrite_default_scheduler,
        nvidia: devices.nvidia.clone(),
        gang_gates: args.gang_scheduling,
        allow_privileged_vgpu: args.allow_privileged_vgpu,
        annotation_writers: AnnotationWriters {
            scheduler: args.scheduler_users.clone(),
            device_plugin: args.device_plugin_users.clone(),
        },
    }
}

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    install_crypto_provider();
    if args.profiling {
        tracing::warn!("--profiling has no effect: this server has no profiling routes");
    }
    for (set, flag) in [
        (args.enable_ascend, "--enable-ascend"),
        (args.enable_iluvatar, "--enable-iluvatar"),
    ] {
        if set {
            tracing::warn!("{flag} has no effect: only NVIDIA GPUs are scheduled here");
        }
    }
    if args.cluster_file.is_none() && args.scheduler_users.is_empty() {
        tracing::warn!(
            "--scheduler-users is not set: if the webhook is sent pod updates, it refuses this scheduler's own placement annotations"
        );
    }
    let devices = match &args.device_config_file {
        Some(path) => DeviceConfig::load(path)?,
        None => DeviceConfig::default(),
    };
    let config = scheduler_config(&args, &devices);
    let metrics = Arc::new(Metrics::with_options(MetricsOptions {
        quota_memory_resource: devices.nvidia.resource_memory_name.clone(),
        quota_cores_resource: devices.nvidia.resource_core_name.clone(),
        legacy_names: args.legacy_metrics,
    }));
    let (trace, trace_writer) = match &args.record_trace {
        Some(path) => {
            let (recorder, writer) = TraceRecorder::open(
                path,
                &TraceSettings {
                    verbatim: args.record_trace_verbatim,
                    ..TraceSettings::default()
                },
                metrics.trace_dropped.clone(),
            )
            .with_context(|| {
                format!(
                    "--record-trace {}: cannot append to the file",
                    path.display()
                )
            })?;
            tracing::info!(file = %path.display(), "recording a trace");
            (Some(recorder), Some(writer))
        }
        None => (None, None),
    };
    let gang = GangDriver {
        enabled: args.gang_scheduling,
        period: args.schedule_period,
        conf_path: args.scheduler_config.clone(),
    };
    let conf = match &args.scheduler_config {
        Some(path) => Some(crate::scheduler::gang::driver::load_conf(path)?),
        None => None,
    };
    let background_runtime = BackgroundRuntime::start().context("start the background runtime")?;
    let kube_config = match &args.cluster_file {
        Some(_) => None,
        None => {
            let mut kube_config = kube_config(
                args.kubeconfig.as_deref(),
                "no cluster configuration: run in a pod, pass --kubeconfig, or use --cluster-file",
            )
            .await?;
            set_kube_timeout(&mut kube_config, args.kube_timeout());
            Some(kube_config)
        }
    };
    let source = match (&args.cluster_file, kube_config) {
        (Some(path), _) => {
            // The sweeper and the planner land on the background runtime.
            let _background = background_runtime.handle().enter();
            file_source(
                path,
                config,
                metrics,
                args.simulate_device_plugin,
                &gang,
                trace,
            )?
        }
        (None, Some(kube_config)) => {
            // Two clients, each driving its connections from its own runtime: the
            // request threads' for the writes `/filter` and `/bind` wait on, the
            // background thread's for the watches, the Lease and housekeeping.
            let requests =
                kube::Client::try_from(kube_config.clone()).context("build Kubernetes client")?;
            let evictions =
                kube::Client::try_from(crate::cluster::kube::client::no_retry(kube_config.clone()))
                    .context("build Kubernetes client")?;
            let _background = background_runtime.handle().enter();
            let node_metrics =
                kube::Client::try_from(crate::cluster::kube::client::no_retry(kube_config.clone()))
                    .context("build Kubernetes client")?;
            let background =
                kube::Client::try_from(kube_config).context("build Kubernetes client")?;
            live_source(
                LiveClients {
                    requests,
                    evictions,
                    background,
                    node_metrics,
                },
                &args,
                config,
                metrics,
                &gang,
                trace,
            )?
        }
        (None, None) => anyhow::bail!("no cluster file and no Kubernetes client"),
    };
    let scheduler = source.scheduler.clone();
    if let Some(conf) = conf {
        scheduler.set_gang_conf(conf);
    }

    let mut names = default_self_signed_names();
    names.extend(args.self_signed_names.iter().cloned());
    let settings = TlsSettings {
        cert_file: args.cert_file.clone(),
        key_file: args.key_file.clone(),
        client_ca_file: args.client_ca_file.clone(),
        self_signed_dir: args.self_signed_dir.clone(),
        self_signed_names: names,
        ..TlsSettings::default()
    };
    let tls = TlsServer::new(&settings).context("TLS setup")?;
    if let Some(cert) = tls.self_signed_certificate_file() {
        tracing::info!(certificate = %cert.display(), "serving a self-signed certificate");
    }
    let state = Arc::new(AppState {
        scheduler: scheduler.clone(),
        webhook: webhook_config(&args, &devices),
        memory_cluster: source.memory.clone(),
        ready: Default::default(),
    });
    let app = router(
        state.clone(),
        RouterOptions {
            require_client_certificate: tls.requests_client_certificates(),
            max_request_body: args.max_request_body,
            max_admission_body: args.max_admission_body,
            max_bodies_in_flight: args.max_request_bodies_in_flight,
            max_admission_bodies_in_flight: args.max_admission_bodies_in_flight,
        },
    );
    let listener = listen(&args.http_bind)
        .await
        .with_context(|| format!("listen on {}", args.http_bind))?;
    tracing::info!(address = %listener.local_addr()?, "serving HTTPS");
    // One stop signal for every listener.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let metrics_server = match &args.metrics_bind_address {
        Some(address) => {
            let listener = listen(address)
                .await
                .with_context(|| format!("listen on {address} (--metrics-bind-address)"))?;
            tracing::info!(address = %listener.local_addr()?, "serving /metrics over HTTP");
            let app = metrics_router(state.clone());
            let stopped = stopped.clone();
            Some(tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(stop_requested(stopped))
                    .await
            }))
        }
        None => None,
    };
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });

    let background = source.background;
    {
        let state = state.clone();
        let synced = source.synced;
        tokio::spawn(async move {
            while !synced() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            state.ready.store(true, Ordering::Release);
            tracing::info!("ready: ledger built");
        });
    }
    let limits = ServerLimits {
        request_timeout: args.request_timeout,
        max_connections: args.max_connections,
        max_streams_per_connection: args.max_streams_per_connection,
        ..ServerLimits::default()
    };
    let result = tls
        .serve(listener, app, limits, stop_requested(stopped))
        .await;
    if let Some(mut server) = metrics_server {
        match tokio::time::timeout(METRICS_SHUTDOWN_GRACE, &mut server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "metrics listener failed"),
            Ok(Err(error)) => tracing::warn!(%error, "metrics listener task failed"),
            Err(_) => server.abort(),
        }
    }
    for task in background {
        task.abort();
    }
    drop(background_runtime);
    if let Some(writer) = trace_writer {
        // What the last requests and watch events queued goes out before exit.
        writer.finish();
    }
    tracing::info!("stopped");
    result
}

/// A cluster source and the tasks that keep the ledger in line with it.
struct Source {
    scheduler: Arc<Scheduler>,
    memory: Option<Arc<MemoryCluster>>,
    synced: Box<dyn Fn() -> bool + Send + Sync>,
    background: Vec<tokio::task::JoinHandle<()>>,
}

/// How the planner runs.
struct GangDriver {
    enabled: bool,
    period: Duration,
    conf_path: Option<std::path::PathBuf>,
}

fn file_source(
    path: &std::path::Path,
    config: SchedulerConfig,
    metrics: Arc<Metrics>,
    simulate_device_plugin: bool,
    gang: &GangDriver,
    trace: Option<Arc<TraceRecorder>>,
) -> anyhow::Result<Source> {
    let memory = Arc::new(MemoryCluster::new(
        Vec::new(),
        Vec::new(),
        simulate_device_plugin,
    ));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let scheduler = Arc::new(Scheduler::new(config, api, metrics));
    // Before the file is read: its PodGroups (and pods still waiting) are part
    // of what a replay needs.
    if let Some(trace) = trace {
        scheduler.record_trace(trace);
    }
    scheduler.node_metrics_from_cluster_file();
    let (mut nodes, mut pods, mut quotas) = (0usize, 0usize, 0usize);
    visit_file(path, |object| {
        scheduler.apply_cluster_object(&object);
        match object {
            ClusterObject::Node(node) => {
                nodes += 1;
                memory.insert_node(*node);
            }
            ClusterObject::Pod(pod) => {
                pods += 1;
                memory.insert_pod(&pod);
            }
            ClusterObject::Quota(_) => quotas += 1,
            _ => {}
        }
    })?;
    tracing::info!(file = %path.display(), nodes, pods, quotas, "cluster loaded");
    release_freed_memory();
    let sweeper = {
        let scheduler = scheduler.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_INTERVAL);
            loop {
                tick.tick().await;
                scheduler.expire_reservations(true).await;
            }
        })
    };
    let mut background = vec![sweeper];
    if gang.enabled {
        background.extend(crate::scheduler::gang::driver::start(
            scheduler.clone(),
            gang.period,
            gang.conf_path.clone(),
            Arc::new(|| true),
        ));
    }
    Ok(Source {
        scheduler,
        memory: Some(memory),
        synced: Box::new(|| true),
        background,
    })
}

/// A Kubernetes client from `kubeconfig`, else the in-cluster config, else
/// `$KUBECONFIG` / `~/.kube/config`; `missing` says what to do when there is none.
pub async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
    missing: &'static str,
) -> anyhow::Result<kube::Client> {
    let kube_config = kube_config(kubeconfig, missing).await?;
    kube::Client::try_from(kube_config).context("build Kubernetes client")
}

/// The client configuration [`kube_client`] uses.
pub async fn kube_config(
    kubeconfig: Option<&std::path::Path>,
    missing: &'static str,
) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("use kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context(missing)?,
    })
}

/// `--kube-timeout`: with `Some`, connecting to the API server and each read and
/// write of a call must finish within it (the read limit counts from the request
/// being sent, not from when a pooled connection went idle). A watch stream that
/// stays quiet for longer is reconnected. `None` keeps the client's defaults.
pub fn set_kube_timeout(config: &mut kube::Config, timeout: Option<Duration>) {
    if let Some(timeout) = timeout {
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        config.reset_reader_on_write = true;
    }
}

/// Listens on `address`; Go's `:PORT` (every interface) is accepted as HAMi's
/// flags give it: IPv6 and IPv4 where the system allows, else IPv4.
pub async fn listen(address: &str) -> std::io::Result<tokio::net::TcpListener> {
    if let Some(port) = address
        .strip_prefix(':')
        .and_then(|p| p.parse::<u16>().ok())
    {
        let any: [std::net::SocketAddr; 2] = [
            (std::net::Ipv6Addr::UNSPECIFIED, port).into(),
            (std::net::Ipv4Addr::UNSPECIFIED, port).into(),
        ];
        return tokio::net::TcpListener::bind(&any[..]).await;
    }
    tokio::net::TcpListener::bind(address).await
}

/// Resolves once a stop was signalled (or the signalling side is gone).
async fn stop_requested(mut stopped: tokio::sync::watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// The Kubernetes clients of live mode (see `serve`).
struct LiveClients {
    /// Behind the scheduler's cluster calls (patches, Bindings, events), which
    /// requests wait on.
    requests: kube::Client,
    /// For evictions, which must not be retried (see `client::no_retry`).
    evictions: kube::Client,
    /// For the watches, leader election and housekeeping.
    background: kube::Client,
    /// For listing node usage, which must not retry a 503 by itself: without
    /// metrics-server every list would wait out the retries, and the next period
    /// asks again anyway.
    node_metrics: kube::Client,
}

fn live_source(
    clients: LiveClients,
    args: &ServeArgs,
    config: SchedulerConfig,
    metrics: Arc<Metrics>,
    gang: &GangDriver,
    trace: Option<Arc<TraceRecorder>>,
) -> anyhow::Result<Source> {
    let node_lock_timeout = config.node_lock_timeout;
    let scheduler_name = config.scheduler_name.clone();
    let client = clients.background;
    let api_dyn: Arc<dyn ClusterApi> = Arc::new(
        KubeCluster::new(
            clients.requests,
            scheduler_name.clone(),
            args.kube_qps,
            args.kube_burst,
        )
        .with_eviction_client(clients.evictions),
    );
    let scheduler = Arc::new(Scheduler::new(config, api_dyn.clone(), metrics));
    // Before the watches start, so the first list's waiting pods and PodGroups
    // are recorded too.
    if let Some(trace) = trace {
        scheduler.record_trace(trace);
    }
    let watches = watch::start(
        client.clone(),
        scheduler.clone(),
        args.node_label_selector.clone(),
    );
    let mut background = watches.tasks;
    let leadership = if args.leader_elect {
        let identity = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("{scheduler_name}-{}", std::process::id()));
        let leader_config = LeaderConfig {
            namespace: args
                .leader_elect_resource_namespace
                .clone()
                .or_else(|| std::env::var("POD_NAMESPACE").ok())
                .unwrap_or_else(|| "kube-system".into()),
            name: args
                .leader_elect_resource_name
                .clone()
                .unwrap_or_else(|| scheduler_name.clone()),
            identity,
            lease_duration: Duration::from_secs(15),
            retry_period: Duration::from_secs(2),
            clock: crate::clock::system(),
        };
        let leadership = Leadership::follower();
        background.push(tokio::spawn(leader::run(
            client.clone(),
            leader_config,
            leadership.clone(),
            scheduler.metrics().clone(),
        )));
        leadership
    } else {
        Leadership::always()
    };
    if gang.enabled {
        background.extend(crate::cluster::kube::volcano_watch::start(
            client.clone(),
            scheduler.clone(),
        ));
        background.push(crate::cluster::kube::native_group_watch::start(
            client.clone(),
            scheduler.clone(),
        ));
        background.extend(crate::cluster::kube::policy_watch::start(
            client.clone(),
            scheduler.clone(),
        ));
        let sync = watches.sync.clone();
        let leader = match &args.planner_follows_lease {
            Some(lease) => {
                let (namespace, name) = lease.split_once('/').with_context(|| {
                    format!("--planner-follows-lease {lease:?}: expected NAMESPACE/NAME")
                })?;
                let pod = std::env::var("POD_NAME")
                    .or_else(|_| std::env::var("HOSTNAME"))
                    .context("--planner-follows-lease needs POD_NAME (or HOSTNAME) to recognise this pod's kube-scheduler")?;
                let follower = Leadership::follower();
                background.push(tokio::spawn(crate::cluster::kube::lease_follower::run(
                    client.clone(),
                    namespace.to_string(),
                    name.to_string(),
                    pod,
                    Duration::from_secs(2),
                    follower.clone(),
                )));
                follower
            }
            None => leadership.clone(),
        };
        background.extend(crate::scheduler::gang::driver::start(
            scheduler.clone(),
            gang.period,
            gang.conf_path.clone(),
            Arc::new(move || leader.is_leader() && sync.synced()),
        ));
    }
    background.push(crate::cluster::kube::node_metrics_poll::start(
        clients.node_metrics,
        scheduler.clone(),
        args.node_metrics_interval,
    ));
    background.extend(housekeeping::start(
        client,
        api_dyn,
        scheduler.clone(),
        watches.nodes,
        leadership,
        HousekeepingConfig {
            node_period: Duration::from_secs(15),
            resync_period: args.resync_period,
            node_lock_timeout,
        },
    ));
    let sync = watches.sync;
    Ok(Source {
        scheduler,
        memory: None,
        synced: Box::new(move || sync.synced()),
        background,
    })
}

/// Hands the pages freed by loading (parse buffers, decoded objects) back to the
/// system, so the resident set reflects what the ledger holds, not the peak.
fn release_freed_memory() {
    // SAFETY: asks the allocator to purge its own free pages; no pointer is passed.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = tokio::signal::ctrl_c() => {},
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}
