//! Who is on the other end of a connection, as proven by a TLS client certificate, and
//! the HTTP-layer gate that turns that proof into a per-route requirement.
//!
//! The TLS layer only *requests* a client certificate (see
//! [`super::TlsSettings::client_ca_file`]), because one server hosts both the admission
//! webhook (called by an API server that may present none) and the scheduler extender
//! (called by kube-scheduler, which should be authenticated). The decision is therefore
//! made per route, by [`client_certificate_layer`].

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::{FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::IntoResponse;
use rustls::pki_types::CertificateDer;
use tower::{Layer, Service};

use super::subject::subject_common_name;

/// Body of the `401` answer for a guarded route reached without a client certificate.
pub const CLIENT_CERTIFICATE_REQUIRED: &str = "client certificate required";

/// The TLS client identity of the connection a request arrived on.
///
/// The server inserts it as a request extension on every request. Handlers can take it
/// as an extractor; a request that did not come through the TLS server (for example in
/// a unit test calling the router directly) yields [`ClientIdentity::None`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ClientIdentity {
    /// No client certificate was presented.
    #[default]
    None,
    /// A certificate was presented and verified against the configured client CA.
    Verified {
        /// The subject common name of the leaf certificate, or empty if it has none.
        subject: String,
    },
}

impl ClientIdentity {
    /// Derives the identity from the peer certificates rustls kept after the
    /// handshake. rustls only keeps them if they verified, so presence means verified.
    pub fn from_peer_certificates(certificates: Option<&[CertificateDer<'_>]>) -> Self {
        match certificates.and_then(<[_]>::first) {
            Some(leaf) => Self::Verified {
                subject: subject_common_name(leaf.as_ref()).unwrap_or_default(),
            },
            None => Self::None,
        }
    }

    /// Whether a verified client certificate was presented.
    pub fn is_verified(&self) -> bool {
        matches!(self, Self::Verified { .. })
    }

    /// The identity attached to a request, [`ClientIdentity::None`] if absent.
    pub fn of<B>(request: &axum::http::Request<B>) -> Self {
        request
            .extensions()
            .get::<Self>()
            .cloned()
            .unwrap_or_default()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientIdentity {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts.extensions.get::<Self>().cloned().unwrap_or_default())
    }
}

/// Middleware for [`axum::middleware::from_fn`] that always insists on a verified
/// client certificate, answering `401 client certificate required` otherwise.
///
/// Prefer [`client_certificate_layer`] when enforcement is a runtime setting.
pub async fn require_client_certificate(request: Request, next: Next) -> axum::response::Response {
    if ClientIdentity::of(&request).is_verified() {
        next.run(request).await
    } else {
        unauthorized()
    }
}

/// Builds the client-certificate gate for a group of routes.
///
/// With `enforce` set, requests whose connection presented no verified client
/// certificate get `401 Unauthorized` with the body `client certificate required`;
/// with `enforce` unset the layer passes everything through, so router code can apply
/// it unconditionally and let configuration decide. Apply it with
/// [`axum::Router::route_layer`] to the scheduler-extender routes (`/filter`,
/// `/prioritize`, `/bind`) only, leaving the webhook, health and metrics routes open:
///
/// ```
/// use axum::{Router, routing::{get, post}};
/// use vgpu_scheduler::server::client_certificate_layer;
///
/// let enforce = true; // typically: a client CA file is configured
/// let extender = Router::new()
///     .route("/filter", post(|| async { "ok" }))
///     .route_layer(client_certificate_layer(enforce));
/// let app: Router = Router::new()
///     .route("/healthz", get(|| async { "ok" }))
///     .merge(extender);
/// ```
///
/// Enforcing without a client CA configured rejects every guarded request, since no
/// client can then present a certificate.
pub fn client_certificate_layer(enforce: bool) -> ClientCertificateLayer {
    ClientCertificateLayer { enforce }
}

/// Tower layer returned by [`client_certificate_layer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCertificateLayer {
    enforce: bool,
}

impl<S> Layer<S> for ClientCertificateLayer {
    type Service = RequireClientCertificate<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireClientCertificate {
            inner,
            enforce: self.enforce,
        }
    }
}

/// Service produced by [`ClientCertificateLayer`].
#[derive(Debug, Clone)]
pub struct RequireClientCertificate<S> {
    inner: S,
    enforce: bool,
}

impl<S, B> Service<axum::http::Request<B>> for RequireClientCertificate<S>
where
    S: Service<axum::http::Request<B>, Response = axum::response::Response>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = axum::response::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        if self.enforce && !ClientIdentity::of(&request).is_verified() {
            return Box::pin(std::future::ready(Ok(unauthorized())));
        }
        Box::pin(self.inner.call(request))
    }
}

fn unauthorized() -> axum::response::Response {
    (StatusCode::UNAUTHORIZED, CLIENT_CERTIFICATE_REQUIRED).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    fn app(enforce: bool) -> Router {
        Router::new()
            .route("/guarded", get(|| async { "ok" }))
            .route_layer(client_certificate_layer(enforce))
    }

    async fn status(app: Router, identity: Option<ClientIdentity>) -> StatusCode {
        let mut request = axum::http::Request::get("/guarded").body(Body::empty());
        if let (Ok(request), Some(identity)) = (request.as_mut(), identity) {
            request.extensions_mut().insert(identity);
        }
        match request {
            Ok(request) => match app.oneshot(request).await {
                Ok(response) => response.status(),
                Err(never) => match never {},
            },
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    #[tokio::test]
    async fn enforcing_layer_rejects_missing_identity() {
        assert_eq!(status(app(true), None).await, StatusCode::UNAUTHORIZED);
        assert_eq!(
            status(app(true), Some(ClientIdentity::None)).await,
            StatusCode::UNAUTHORIZED
        );
        let verified = ClientIdentity::Verified {
            subject: "kube-scheduler".to_owned(),
        };
        assert_eq!(status(app(true), Some(verified)).await, StatusCode::OK);
    }

    #[tokio::test]
    async fn non_enforcing_layer_passes_everything() {
        assert_eq!(status(app(false), None).await, StatusCode::OK);
    }

    #[tokio::test]
    async fn from_fn_middleware_rejects_missing_identity() {
        let app = Router::new()
            .route("/guarded", get(|| async { "ok" }))
            .route_layer(axum::middleware::from_fn(require_client_certificate));
        assert_eq!(status(app, None).await, StatusCode::UNAUTHORIZED);
    }
}
