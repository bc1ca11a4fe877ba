//! Refusals answered in the shape of the route's own answers.
//!
//! kube-scheduler reads an extender's failure from the `Error` field of an HTTP
//! 200 JSON answer, and the API server reads a webhook's from an
//! `AdmissionReview`; any other shape (a bare 413 or 503 with a text body) only
//! shows up as an undecodable answer. So whatever refuses a request before or
//! instead of its handler (a body over its cap, a stalled body, the body budget,
//! the request time limit) answers through [`refusal`].

use crate::extender::wire::ExtenderError;
use crate::webhook::{ADMISSION_V1, AdmissionResponse, AdmissionReviewResponse};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Which answer shape a route speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteShape {
    /// `/filter`, `/prioritize`, `/bind`: `{"Error": ...}` with HTTP 200.
    Extender,
    /// `/mutate`, `/webhook`: an `AdmissionReview` that denies, with HTTP 200.
    Admission,
    /// Everything else: the status itself, with the message as text.
    Plain,
}

impl RouteShape {
    /// The shape of the route at `path`.
    pub fn of(path: &str) -> Self {
        match path {
            "/filter" | "/prioritize" | "/bind" => Self::Extender,
            "/mutate" | "/webhook" => Self::Admission,
            _ => Self::Plain,
        }
    }
}

/// A refusal of a request to `path` for `status`, in the route's shape. For the
/// webhook the status is carried in the review's `status.code`; the review's
/// `uid` is empty, since the request's was never read.
pub fn refusal(path: &str, status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    tracing::warn!(path, %message, status = status.as_u16(), "request refused");
    let body = match RouteShape::of(path) {
        RouteShape::Plain => return (status, message).into_response(),
        RouteShape::Admission => serde_json::to_vec(&AdmissionReviewResponse::new(
            ADMISSION_V1,
            AdmissionResponse::refuse("", status.as_u16(), message),
        )),
        RouteShape::Extender => serde_json::to_vec(&ExtenderError::new(message)),
    };
    match body {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_its_shape() {
        for path in ["/filter", "/prioritize", "/bind"] {
            assert_eq!(RouteShape::of(path), RouteShape::Extender, "{path}");
        }
        for path in ["/mutate", "/webhook"] {
            assert_eq!(RouteShape::of(path), RouteShape::Admission, "{path}");
        }
        for path in ["/healthz", "/metrics", "/debug/state", "/nowhere"] {
            assert_eq!(RouteShape::of(path), RouteShape::Plain, "{path}");
        }
    }

    #[test]
    fn a_plain_route_keeps_its_status() {
        let answer = refusal("/metrics", StatusCode::SERVICE_UNAVAILABLE, "busy");
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        let answer = refusal("/filter", StatusCode::SERVICE_UNAVAILABLE, "busy");
        assert_eq!(answer.status(), StatusCode::OK);
    }
}
