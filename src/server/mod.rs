//! The single HTTPS server that hosts both the kube-scheduler extender and the
//! admission webhook.
//!
//! Both endpoints must be served over TLS, and the webhook's API server and the
//! extender's kube-scheduler authenticate differently, so this module owns the whole
//! path from TCP accept to the axum router:
//!
//! * certificates come from mounted files (reloaded when they change, so Secret
//!   rotation needs no restart) or are generated self-signed at start;
//! * a client certificate is requested (never required) when a client CA is
//!   configured, and the verified result is attached to every request as a
//!   [`ClientIdentity`] extension; [`client_certificate_layer`] turns it into a
//!   per-route requirement;
//! * each connection gets its own task with bounded handshake, header and request
//!   times, and shutdown drains in-flight requests;
//! * one source address may have only so many handshakes in progress, and
//!   handshakes get less time while the connection slots run out, so raw TCP
//!   connections cannot keep kube-scheduler's out (see `handshake_gate`).

mod client_identity;
mod connection;
mod error;
mod handshake_gate;
mod listener;
mod reload;
mod self_signed;
mod settings;
mod subject;
mod tls_config;

pub use client_identity::{
    CLIENT_CERTIFICATE_REQUIRED, ClientCertificateLayer, ClientIdentity, RequireClientCertificate,
    client_certificate_layer, require_client_certificate,
};
pub use error::TlsSetupError;
pub use listener::TlsServer;
pub use settings::{ServerLimits, TlsSettings, default_self_signed_names};

/// Serves `router` over TLS on `listener` until `shutdown` completes.
///
/// Shorthand for [`TlsServer::new`] followed by [`TlsServer::serve`]; use those
/// directly to fail on bad certificates before starting other work, or to find the
/// generated certificate in self-signed mode.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    settings: TlsSettings,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    TlsServer::new(&settings)?
        .serve(listener, router, limits, shutdown)
        .await
}

/// Installs rustls' ring provider as the process-wide default.
///
/// The server itself never relies on the default (it names ring explicitly), but TLS
/// clients in the same process, such as a Kubernetes API client, may; with more than
/// one provider compiled in they would otherwise panic. Calling this again, or after
/// another provider was installed, is harmless.
pub fn install_crypto_provider() {
    // An error only means a default is already installed, which is all we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
