//! `serve`: wire flags, cluster source, scheduler and server together.

use crate::app::{AppState, RouterOptions, router};
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::config::{LogFormat, ServeArgs};
use crate::device::device_config::DeviceConfig;
use crate::metrics::Metrics;
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::server::{
    ServerLimits, TlsServer, TlsSettings, default_self_signed_names, install_crypto_provider,
};
use crate::webhook::WebhookConfig;
use anyhow::Context;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often expired reservations are swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Sets up logging.
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    install_crypto_provider();
    let devices = match &args.device_config_file {
        Some(path) => DeviceConfig::load(path)?,
        None => DeviceConfig::default(),
    };
    let config = SchedulerConfig {
        scheduler_name: args.scheduler_name.clone(),
        node_policy: args.node_scheduler_policy,
        gpu_policy: args.gpu_scheduler_policy.clone(),
        nvidia: devices.nvidia.clone(),
        filter_mode: args.filter_mode.into(),
        reservation_ttl: args.reservation_ttl,
        node_lock_timeout: args.node_lock_timeout,
        node_lock_retry_timeout: args.node_lock_retry_timeout,
    };
    let Some(cluster_file) = &args.cluster_file else {
        anyhow::bail!(
            "--cluster-file is required: live Kubernetes mode is not available in this build; \
             try --cluster-file examples/cluster.yaml"
        );
    };
    let objects = ClusterObjects::load(cluster_file)?;
    let memory = Arc::new(MemoryCluster::new(
        objects.nodes.clone(),
        objects.pods.clone(),
        args.simulate_device_plugin,
    ));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let scheduler = Arc::new(Scheduler::new(config, api, Arc::new(Metrics::new())));
    scheduler.load(&objects);
    tracing::info!(
        file = %cluster_file.display(),
        nodes = objects.nodes.len(),
        pods = objects.pods.len(),
        quotas = objects.quotas.len(),
        "cluster loaded"
    );

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
        webhook: WebhookConfig {
            scheduler_name: args.scheduler_name.clone(),
            force_overwrite_default_scheduler: args.force_overwrite_default_scheduler,
            nvidia: devices.nvidia.clone(),
        },
        memory_cluster: Some(memory),
        ready: Default::default(),
    });
    let app = router(
        state.clone(),
        RouterOptions {
            require_client_certificate: tls.requests_client_certificates(),
            max_request_body: args.max_request_body,
        },
    );
    let listener = tokio::net::TcpListener::bind(&args.http_bind)
        .await
        .with_context(|| format!("listen on {}", args.http_bind))?;
    tracing::info!(address = %listener.local_addr()?, "serving HTTPS");

    let sweeper = {
        let scheduler = scheduler.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_INTERVAL);
            loop {
                tick.tick().await;
                scheduler.expire_reservations().await;
            }
        })
    };
    state.ready.store(true, Ordering::Release);
    let limits = ServerLimits {
        request_timeout: args.request_timeout,
        ..ServerLimits::default()
    };
    let result = tls.serve(listener, app, limits, shutdown_signal()).await;
    sweeper.abort();
    tracing::info!("stopped");
    result
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
