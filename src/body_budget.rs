//! How much request body the server holds in memory at once.
//!
//! A body is read whole before it is decoded, and a full-`Nodes` `/filter` body
//! may be tens of MiB, so the per-request cap (`--max-request-body`) alone lets a
//! few dozen concurrent clients take gigabytes. Every request with a body
//! therefore takes its declared length (or, without a `Content-Length`, its
//! route's cap) from one budget shared by all connections
//! (`--max-request-bodies-in-flight`) before its body is read, and gives it back
//! when its answer is ready. A request that cannot get its share within
//! [`BUDGET_WAIT`] is refused; one whose `Content-Length` is already over its
//! route's cap is refused before a byte of its body is read. `/mutate` and
//! `/webhook` have a cap of their own (`--max-admission-body`): an
//! AdmissionReview carries at most two objects the API server already limited.
//!
//! Refusals use the shape of the route's answers: an `AdmissionReview` for the
//! webhook, `{"Error": ...}` for the extender verbs.

use crate::extender::wire::ExtenderError;
use crate::webhook::{ADMISSION_V1, AdmissionResponse, AdmissionReviewResponse};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long a request waits for its share of the budget before it is refused.
/// Short: kube-scheduler's own timeout runs meanwhile, and a refused call is
/// retried, while a queue of waiting uploads would only hold their connections.
pub const BUDGET_WAIT: Duration = Duration::from_secs(5);

/// Caps and the shared budget.
#[derive(Debug)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
    request_cap: usize,
    admission_cap: usize,
}

impl BodyBudget {
    /// A budget of `total` bytes in flight, bodies of at most `request_cap` bytes
    /// (`admission_cap` on the webhook routes).
    pub fn new(total: usize, request_cap: usize, admission_cap: usize) -> Self {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(total)),
            total,
            request_cap,
            admission_cap,
        }
    }

    /// The body cap of a route.
    pub fn cap_for(&self, path: &str) -> usize {
        if is_admission(path) {
            self.admission_cap
        } else {
            self.request_cap
        }
    }

    /// Bytes not taken by bodies in flight.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

fn is_admission(path: &str) -> bool {
    matches!(path, "/mutate" | "/webhook")
}

/// The middleware: takes the request's share of the budget, or refuses it.
pub async fn limit_bodies(
    State(budget): State<Arc<BodyBudget>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let cap = budget.cap_for(&path);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let charge = match declared {
        Some(length) if length > cap as u64 => {
            return refuse(
                &path,
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body of {length} bytes is over this route's limit of {cap} bytes"),
            );
        }
        Some(length) => length as usize,
        None if matches!(*request.method(), Method::GET | Method::HEAD) => 0,
        // No declared length (chunked): the most it may grow to.
        None => cap,
    };
    if charge == 0 {
        return next.run(request).await;
    }
    // A body larger than the whole budget waits for all of it.
    let charge = u32::try_from(charge.min(budget.total)).unwrap_or(u32::MAX);
    let acquired =
        tokio::time::timeout(BUDGET_WAIT, budget.bytes.clone().acquire_many_owned(charge)).await;
    let Ok(Ok(_permit)) = acquired else {
        return refuse(
            &path,
            StatusCode::SERVICE_UNAVAILABLE,
            "too many request bodies in flight; retry".to_owned(),
        );
    };
    next.run(request).await
}

/// A refusal in the route's own answer shape.
fn refuse(path: &str, status: StatusCode, message: String) -> Response {
    tracing::warn!(path, %message, "request refused before its body was read");
    let body = if is_admission(path) {
        let code = status.as_u16();
        serde_json::to_vec(&AdmissionReviewResponse::new(
            ADMISSION_V1,
            AdmissionResponse::refuse("", code, message),
        ))
    } else {
        serde_json::to_vec(&ExtenderError::new(message))
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
    fn the_webhook_routes_have_their_own_cap() {
        let budget = BodyBudget::new(64, 32, 4);
        assert_eq!(budget.cap_for("/mutate"), 4);
        assert_eq!(budget.cap_for("/webhook"), 4);
        assert_eq!(budget.cap_for("/filter"), 32);
        assert_eq!(budget.available(), 64);
    }
}
