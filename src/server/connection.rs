//! Everything that happens to one accepted TCP connection: the bounded TLS handshake,
//! deriving the client identity, and serving HTTP on it until it closes or the server
//! shuts down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::client_identity::ClientIdentity;
use super::handshake_gate::PendingHandshake;
use super::settings::ServerLimits;
use super::tls_config::ALPN_H2;
use crate::refusal::refusal;

/// How often an idle HTTP/2 connection is pinged, so that peers which vanished without
/// closing (node failure, dropped NAT state) do not hold a task forever.
const H2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long an HTTP/2 ping may go unanswered before the connection is closed.
const H2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// HTTP/2 flow-control window, per stream and per connection.
const H2_WINDOW: u32 = 256 * 1024;
/// Largest HTTP/2 header block accepted (extender and webhook requests carry a
/// handful of headers).
const H2_MAX_HEADER_LIST: u32 = 64 * 1024;

/// State shared by all connection tasks of one server.
pub(crate) struct ConnectionContext {
    router: Router,
    limits: ServerLimits,
    /// Pinned to HTTP/1.1, used when ALPN did not select `h2`.
    http1: auto::Builder<TokioExecutor>,
    /// Pinned to HTTP/2, used when ALPN selected `h2`.
    http2: auto::Builder<TokioExecutor>,
}

impl ConnectionContext {
    /// Prepares the HTTP builders once per server rather than once per connection.
    ///
    /// The protocol is pinned from ALPN instead of letting hyper sniff the first bytes:
    /// sniffing has no timeout, so a peer that finished the handshake and then went
    /// quiet would otherwise never be dropped.
    pub(crate) fn new(router: Router, limits: ServerLimits) -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(nonzero(limits.header_read_timeout));
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(H2_KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(H2_KEEP_ALIVE_TIMEOUT)
            .max_concurrent_streams(limits.max_streams_per_connection)
            // What a peer may send ahead of the handlers reading it, per stream and
            // per connection: hyper's 1 MiB each, over hundreds of connections,
            // would be memory no request body budget sees.
            .initial_stream_window_size(H2_WINDOW)
            .initial_connection_window_size(H2_WINDOW)
            .max_header_list_size(H2_MAX_HEADER_LIST);
        Self {
            router,
            limits,
            http1: builder.clone().http1_only(),
            http2: builder.http2_only(),
        }
    }
}

/// Serves one accepted connection to completion. Never fails: every problem here is the
/// peer's and concerns only this connection, so it is logged at debug and the
/// connection dropped.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    handshake: PendingHandshake,
    acceptor: TlsAcceptor,
    context: Arc<ConnectionContext>,
    watcher: Watcher,
) {
    // Extender and webhook exchanges are small request/response pairs; Nagle's delay
    // would only add latency to them.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%peer, %error, "cannot disable Nagle's algorithm");
    }

    // The handshake counts against its source until it ends, either way.
    let accepted = acceptor.accept(stream);
    let accepted = match nonzero(handshake.timeout) {
        Some(limit) => tokio::time::timeout(limit, accepted).await,
        None => Ok(accepted.await),
    };
    drop(handshake);
    let tls = match accepted {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };

    let (_, session) = tls.get_ref();
    let identity = ClientIdentity::from_peer_certificates(session.peer_certificates());
    let use_h2 = session.alpn_protocol() == Some(ALPN_H2);
    tracing::debug!(%peer, ?identity, http2 = use_h2, "TLS connection established");

    let saw_request = Arc::new(AtomicBool::new(false));
    let service = {
        let router = context.router.clone();
        let request_timeout = nonzero(context.limits.request_timeout);
        let saw_request = Arc::clone(&saw_request);
        tower::service_fn(move |mut request: axum::http::Request<Incoming>| {
            saw_request.store(true, Ordering::Relaxed);
            request.extensions_mut().insert(identity.clone());
            request.extensions_mut().insert(ConnectInfo(peer));
            let path = request.uri().path().to_owned();
            let response = router.clone().oneshot(request);
            async move {
                match request_timeout {
                    Some(limit) => match tokio::time::timeout(limit, response).await {
                        Ok(result) => result,
                        Err(_) => Ok(timed_out(&path)),
                    },
                    None => response.await,
                }
            }
        })
    };

    let builder = if use_h2 {
        &context.http2
    } else {
        &context.http1
    };
    let connection = builder
        .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(service));
    let mut connection = std::pin::pin!(watcher.watch(connection));

    // HTTP/1 bounds the wait for each request head itself; HTTP/2 has no such bound
    // before its first stream, so give every connection the same deadline for its first
    // request and drop it if it never sends one.
    if let Some(limit) = nonzero(context.limits.header_read_timeout) {
        tokio::select! {
            result = &mut connection => {
                log_connection_end(peer, result);
                return;
            }
            () = tokio::time::sleep(limit) => {}
        }
        if !saw_request.load(Ordering::Relaxed) {
            tracing::debug!(%peer, "no request received in time; closing connection");
            return;
        }
    }
    log_connection_end(peer, connection.await);
}

fn log_connection_end(
    peer: SocketAddr,
    result: Result<(), Box<dyn std::error::Error + Send + Sync>>,
) {
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// The answer for a request to `path` whose handler outlived
/// [`ServerLimits::request_timeout`], in the route's shape: kube-scheduler and the
/// API server read a refusal only from their own answer format.
fn timed_out(path: &str) -> axum::response::Response {
    refusal(path, StatusCode::SERVICE_UNAVAILABLE, "request timed out")
}

/// Zero means "no limit" throughout [`ServerLimits`].
fn nonzero(limit: Duration) -> Option<Duration> {
    (!limit.is_zero()).then_some(limit)
}
