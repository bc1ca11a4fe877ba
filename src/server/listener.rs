//! The TLS server itself: the accept loop, one task per connection, certificate
//! reloading in the background, and graceful shutdown.

use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use axum::Router;
use hyper_util::server::graceful::GracefulShutdown;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use super::connection::{ConnectionContext, serve_connection};
use super::error::TlsSetupError;
use super::handshake_gate::HandshakeGate;
use super::reload;
use super::settings::{ServerLimits, TlsSettings};
use super::tls_config::{CertificateSource, TlsInputs};

/// How long in-flight requests may run on after shutdown was requested before their
/// connections are cut. It only guarantees that shutdown finishes even if a handler
/// hangs; it matches Kubernetes' default termination grace period, after which the
/// process would be killed anyway.
const SHUTDOWN_GRACE_PERIOD: Duration = Duration::from_secs(30);

/// Pause after a failed `accept` (typically out of file descriptors) so the loop does
/// not spin while the condition lasts.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// A TLS server whose certificates are loaded (or generated) but which is not yet
/// serving.
///
/// Splitting preparation from serving lets start-up fail fast on bad certificate files
/// before anything listens, and lets a caller learn where a generated certificate was
/// written. [`super::serve`] does both steps in one call.
#[derive(Debug)]
pub struct TlsServer {
    source: CertificateSource,
    inputs: TlsInputs,
    current: Arc<ArcSwap<ServerConfig>>,
    reload_interval: Duration,
}

impl TlsServer {
    /// Loads the configured certificate, key and client CA, or generates and writes a
    /// self-signed certificate when none is configured.
    pub fn new(settings: &TlsSettings) -> Result<Self, TlsSetupError> {
        let source = CertificateSource::from_settings(settings)?;
        let inputs = source.read()?;
        let config = source.build(&inputs)?;
        Ok(Self {
            source,
            inputs,
            current: Arc::new(ArcSwap::from_pointee(config)),
            reload_interval: settings.reload_interval,
        })
    }

    /// Where the generated certificate was written, in self-signed mode; clients that
    /// should trust this server can be given this file.
    pub fn self_signed_certificate_file(&self) -> Option<&Path> {
        self.source.self_signed_cert_file()
    }

    /// Whether clients are asked for a certificate (a client CA file is configured).
    /// Callers typically enforce client certificates on the extender routes exactly
    /// when this is true.
    pub fn requests_client_certificates(&self) -> bool {
        self.source.requests_client_certificates()
    }

    /// Accepts connections on `listener` and serves `router` on them until `shutdown`
    /// completes, then stops accepting, lets in-flight requests finish (for at most
    /// 30 seconds) and returns.
    ///
    /// Failures of individual connections are logged and never end the server.
    /// Dropping the returned future instead of using `shutdown` aborts all connections
    /// at once.
    pub async fn serve(
        self,
        listener: TcpListener,
        router: Router,
        limits: ServerLimits,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let address = listener
            .local_addr()
            .context("cannot determine the address the TLS server listens on")?;
        let client_certificates = self.requests_client_certificates();
        let _reloader = AbortOnDrop(reload::spawn(
            self.source,
            self.inputs,
            Arc::clone(&self.current),
            self.reload_interval,
        ));
        let context = Arc::new(ConnectionContext::new(router, limits));
        let graceful = GracefulShutdown::new();
        let mut connections = JoinSet::new();
        let mut shutdown = pin!(shutdown);
        tracing::info!(%address, client_certificates, "serving HTTPS");

        // A connection is accepted only with a slot free; the others wait in the
        // listen backlog.
        let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        let gate = HandshakeGate::new(&limits);
        let accepting = &listener;
        loop {
            let slot = Arc::clone(&slots);
            tokio::select! {
                () = &mut shutdown => break,
                accepted = async move {
                    let slot = slot.acquire_owned().await;
                    (slot, accepting.accept().await)
                } => match accepted {
                    (Ok(slot), Ok((stream, peer))) => {
                        let Some(handshake) = gate.admit(peer.ip(), slots.available_permits())
                        else {
                            tracing::debug!(%peer, "too many handshakes from this source; closing");
                            continue;
                        };
                        // Load per connection so a reloaded certificate applies to
                        // every connection accepted from now on.
                        let acceptor = TlsAcceptor::from(self.current.load_full());
                        let connection = serve_connection(
                            stream,
                            peer,
                            handshake,
                            acceptor,
                            Arc::clone(&context),
                            graceful.watcher(),
                        );
                        connections.spawn(async move {
                            connection.await;
                            drop(slot);
                        });
                    }
                    (Err(_closed), _) => break,
                    (Ok(_), Err(error)) => {
                        tracing::warn!(%error, "cannot accept a connection");
                        tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                    }
                },
                Some(finished) = connections.join_next(), if !connections.is_empty() => {
                    if let Err(error) = finished
                        && error.is_panic()
                    {
                        tracing::error!(%error, "a connection task panicked");
                    }
                }
            }
        }

        drop(listener);
        tracing::info!(
            open_connections = connections.len(),
            "shutdown requested: stopped accepting, waiting for in-flight requests"
        );
        let drained = tokio::time::timeout(SHUTDOWN_GRACE_PERIOD, async {
            graceful.shutdown().await;
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                remaining = connections.len(),
                grace_period = ?SHUTDOWN_GRACE_PERIOD,
                "in-flight requests did not finish in time; closing their connections"
            );
            connections.shutdown().await;
        }
        tracing::info!("TLS server stopped");
        Ok(())
    }
}

/// Stops the certificate reloader when the server stops, however it stops.
struct AbortOnDrop(Option<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}
