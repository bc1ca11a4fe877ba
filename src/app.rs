//! The HTTP surface: one router for the extender verbs, the webhook, probes,
//! metrics and the debug dumps, and one serving only the metrics (for a plain-HTTP
//! metrics listener).

use crate::body_budget::{BodyBudget, read_body_within_budget};
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderError, ExtenderFilterResult,
};
use crate::object_namespace::namespace_of;
use crate::scheduler::Scheduler;
use crate::server::client_certificate_layer;
use crate::webhook::{WebhookConfig, review_with_quota};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, middleware};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tracing::Instrument;

#[cfg(test)]
mod fuzz_tests;

/// What the handlers share.
pub struct AppState {
    /// The scheduler core.
    pub scheduler: Arc<Scheduler>,
    /// Webhook settings.
    pub webhook: WebhookConfig,
    /// The in-memory cluster in cluster-file mode (its events appear in /debug/state).
    pub memory_cluster: Option<Arc<MemoryCluster>>,
    /// Set once the ledger is built; /readyz and the extender verbs wait for it.
    pub ready: AtomicBool,
}

/// Router settings.
#[derive(Debug, Clone, Copy)]
pub struct RouterOptions {
    /// Require a verified client certificate on /filter, /prioritize, /bind and the
    /// debug dumps (/debug/state, /debug/queues).
    pub require_client_certificate: bool,
    /// Largest request body accepted.
    pub max_request_body: usize,
    /// Largest AdmissionReview body accepted on `/mutate` and `/webhook`.
    pub max_admission_body: usize,
    /// Extender request body bytes held at once, over all connections (see
    /// `body_budget`).
    pub max_bodies_in_flight: usize,
    /// AdmissionReview body bytes held at once, over all connections: a budget
    /// apart from the extender's, so webhook traffic cannot starve kube-scheduler.
    pub max_admission_bodies_in_flight: usize,
}

/// Builds the router. The extender verbs and the debug dumps (which show every
/// pod, node and quota) sit behind the client-certificate requirement; the webhook
/// (called by the API server), the probes and the metrics stay open. Bodies are
/// read within the budget of their class of routes (see `body_budget`); the
/// extender's is drawn on only once the client certificate was checked.
pub fn router(state: Arc<AppState>, options: RouterOptions) -> Router {
    let extender_budget = Arc::new(BodyBudget::new(
        options.max_bodies_in_flight,
        options.max_request_body,
    ));
    let admission_budget = Arc::new(BodyBudget::new(
        options.max_admission_bodies_in_flight,
        options.max_admission_body,
    ));
    // route_layer: the last one added runs first.
    let guarded = Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind))
        .route("/debug/state", get(debug_state))
        .route("/debug/queues", get(debug_queues))
        .route_layer(middleware::from_fn_with_state(
            extender_budget,
            read_body_within_budget,
        ))
        .route_layer(client_certificate_layer(options.require_client_certificate));
    let admission = Router::new()
        .route("/mutate", post(mutate))
        .route("/webhook", post(mutate))
        .route_layer(middleware::from_fn_with_state(
            admission_budget,
            read_body_within_budget,
        ))
        .layer(DefaultBodyLimit::max(options.max_admission_body));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(admission)
        .merge(guarded)
        .layer(DefaultBodyLimit::max(options.max_request_body))
        .with_state(state)
}

/// Only `GET /metrics`, the same text as the main router's: for the plain-HTTP
/// listener of `--metrics-bind-address` (HAMi's metrics port).
pub fn metrics_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

fn json_response<T: serde::Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn pod_key(args: &ExtenderArgs) -> String {
    args.pod
        .as_ref()
        .map(|p| {
            format!(
                "{}/{}",
                namespace_of(&p.metadata),
                p.metadata.name.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_default()
}

/// Runs `work` to completion even if the request that started it is dropped (the
/// client hung up). It is polled here first: when it finishes without waiting (no
/// API call pending, as with a cluster file) it costs no task and no trip through
/// the run queue, where under many requests in flight it would wait behind the
/// others; only work that must wait moves to a task of its own, which then finishes
/// whatever happens to the request.
async fn run_to_completion<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let mut work = Box::pin(work);
    match futures::poll!(work.as_mut()) {
        std::task::Poll::Ready(result) => Ok(result),
        std::task::Poll::Pending => tokio::spawn(work).await,
    }
}

const NOT_READY: &str = "scheduler is starting: cluster state not loaded yet";

async fn filter(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let started = Instant::now();
    let result = match serde_json::from_slice::<ExtenderArgs>(&body) {
        Err(e) => ExtenderFilterResult::error(format!("decode extender args: {e}")),
        Ok(_) if !state.ready.load(Ordering::Acquire) => ExtenderFilterResult::error(NOT_READY),
        Ok(args) => {
            let span = tracing::info_span!("filter", pod = %pod_key(&args));
            // Run to completion even if kube-scheduler hangs up: a reservation and
            // its annotation patch must not be cut in half.
            let scheduler = state.scheduler.clone();
            run_to_completion(async move { scheduler.filter(args).await }.instrument(span))
                .await
                .unwrap_or_else(|e| ExtenderFilterResult::error(format!("filter task failed: {e}")))
        }
    };
    state
        .scheduler
        .metrics()
        .observe("filter", started.elapsed().as_secs_f64());
    json_response(&result)
}

async fn prioritize(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let started = Instant::now();
    let response = match serde_json::from_slice::<ExtenderArgs>(&body) {
        Err(e) => json_response(&ExtenderError::new(format!("decode extender args: {e}"))),
        Ok(_) if !state.ready.load(Ordering::Acquire) => {
            json_response(&ExtenderError::new(NOT_READY))
        }
        Ok(args) => {
            let span = tracing::info_span!("prioritize", pod = %pod_key(&args));
            let _guard = span.enter();
            match state.scheduler.prioritize(args) {
                Ok(list) => json_response(&list),
                Err(e) => json_response(&ExtenderError::new(e)),
            }
        }
    };
    state
        .scheduler
        .metrics()
        .observe("prioritize", started.elapsed().as_secs_f64());
    response
}

async fn bind(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let started = Instant::now();
    let result = match serde_json::from_slice::<ExtenderBindingArgs>(&body) {
        Err(e) => ExtenderBindingResult {
            error: format!("decode binding args: {e}"),
        },
        Ok(_) if !state.ready.load(Ordering::Acquire) => ExtenderBindingResult {
            error: NOT_READY.into(),
        },
        Ok(args) => {
            let key = format!(
                "{}/{}",
                args.pod_namespace.as_deref().unwrap_or(""),
                args.pod_name.as_deref().unwrap_or("")
            );
            let span = tracing::info_span!("bind", pod = %key);
            // Run to completion even if kube-scheduler hangs up mid-bind.
            let scheduler = state.scheduler.clone();
            run_to_completion(async move { scheduler.bind(args).await }.instrument(span))
                .await
                .unwrap_or_else(|e| ExtenderBindingResult {
                    error: format!("bind task failed: {e}"),
                })
        }
    };
    state
        .scheduler
        .metrics()
        .observe("bind", started.elapsed().as_secs_f64());
    json_response(&result)
}

async fn mutate(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let started = Instant::now();
    let answer = review_with_quota(&body, &state.webhook, state.scheduler.as_ref());
    state
        .scheduler
        .metrics()
        .observe("mutate", started.elapsed().as_secs_f64());
    json_response(&answer)
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(Ordering::Acquire) {
        "ready".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, NOT_READY).into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let gangs = state.scheduler.gang_view();
    let text = state
        .scheduler
        .with_ledger(|l| state.scheduler.metrics().render(l, &gangs));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn debug_state(State(state): State<Arc<AppState>>) -> Response {
    let mut value = state.scheduler.debug_state();
    if let Some(cluster) = &state.memory_cluster {
        value["events"] = serde_json::to_value(cluster.events()).unwrap_or_default();
    }
    json_response(&value)
}

/// Queues (deserved, allocated, share) and every gang with the reason it waits,
/// as of the last planning cycle. In cluster-file mode also the PodGroup and Queue
/// statuses written (there is no API server to read them from).
async fn debug_queues(State(state): State<Arc<AppState>>) -> Response {
    let mut value = serde_json::to_value(&*state.scheduler.gang_view()).unwrap_or_default();
    if let Some(cluster) = &state.memory_cluster {
        let statuses: serde_json::Map<String, serde_json::Value> = cluster
            .volcano_statuses()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        value["statuses"] = serde_json::Value::Object(statuses);
    }
    json_response(&value)
}
