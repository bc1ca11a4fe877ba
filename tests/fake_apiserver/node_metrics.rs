//! `metrics.k8s.io/v1beta1` nodes, as metrics-server serves them through the
//! aggregation layer, and as a cluster without it answers.
//!
//! Served: `GET /apis/metrics.k8s.io/v1beta1/nodes` (a `NodeMetricsList`,
//! `labelSelector` on the nodes' labels) and `.../nodes/{name}` (a `NodeMetrics`,
//! 404 `nodemetrics.metrics.k8s.io "x" not found` otherwise); an item exists only
//! for a Node that exists and has usage set, with the Node's labels and a fresh
//! `creationTimestamp`, like metrics-server's. No watch (405 `watch is not
//! supported on resources of kind "nodes.metrics.k8s.io"`), no writes (405).
//! Discovery lists the group and its `nodes` resource (`get`, `list`).
//!
//! Absent (the default, as on a cluster without metrics-server): no group in
//! discovery, and every path under `/apis/metrics.k8s.io` is 404 `the server
//! could not find the requested resource`. Unavailable (the APIService
//! registered, its server down): the group is listed, and every request under it
//! is 503 with the aggregator's plain-text `service unavailable`.

use super::handlers::json_response;
use super::objects;
use super::query;
use super::resources::Storage;
use super::selectors::LabelSelector;
use super::state::Shared;
use super::status::ApiError;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
const PREFIX: &str = "/apis/metrics.k8s.io";

/// Whether the metrics API is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricsApi {
    /// metrics-server installed and running.
    Served,
    /// No metrics-server (no APIService).
    #[default]
    Absent,
    /// The APIService registered, its server not answering.
    Unavailable,
}

/// One node's usage as metrics-server last scraped it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    /// `usage.cpu`, e.g. `3250m` (metrics-server writes nanocores: `3250000000n`).
    pub cpu: String,
    /// `usage.memory`, e.g. `81920Mi` (metrics-server writes `Ki`).
    pub memory: String,
    /// When the scrape's window ended.
    pub timestamp: chrono::DateTime<chrono::Utc>,
    /// The window, as metav1.Duration prints it (`20.05s`).
    pub window: String,
}

/// The metrics API's state.
#[derive(Debug, Default)]
pub struct MetricsState {
    pub api: MetricsApi,
    pub usage: BTreeMap<String, NodeUsage>,
}

/// Whether the path belongs to the metrics API.
pub fn claims(path: &str) -> bool {
    path == PREFIX || path.starts_with("/apis/metrics.k8s.io/")
}

/// The group's entry in `/apis`, when the APIService is registered.
pub fn group_entry(state: &Shared) -> Option<Value> {
    (state.metrics.lock().api != MetricsApi::Absent).then(|| {
        let gv = json!({"groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION});
        json!({"name": GROUP, "versions": [gv.clone()], "preferredVersion": gv})
    })
}

/// Answers a request under `/apis/metrics.k8s.io`.
pub fn handle(state: &Shared, method: &str, path: &str, query: &str) -> Result<Response, ApiError> {
    match state.metrics.lock().api {
        MetricsApi::Absent => return Err(ApiError::path_not_found()),
        MetricsApi::Unavailable => return Ok(service_unavailable()),
        MetricsApi::Served => {}
    }
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(3).collect();
    let reading = method == "GET";
    match segs.as_slice() {
        [] if reading => Ok(json_response(200, &group())),
        [VERSION] if reading => Ok(json_response(200, &resource_list())),
        [VERSION, "nodes"] | [VERSION, "nodes", _] if !reading => {
            Err(ApiError::method_not_allowed())
        }
        [VERSION, "nodes"] => {
            let q = query::parse(query);
            if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
                return Err(watch_not_supported());
            }
            let selector = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
                .map_err(ApiError::bad_request)?;
            let items: Vec<Value> = node_metrics(state)
                .into_iter()
                .filter(|item| selector.matches(item))
                .collect();
            Ok(json_response(
                200,
                &json!({"kind": "NodeMetricsList", "apiVersion": format!("{GROUP}/{VERSION}"),
                        "metadata": {}, "items": items}),
            ))
        }
        [VERSION, "nodes", name] => {
            let mut item = node_metrics(state)
                .into_iter()
                .find(|item| objects::name(item) == *name)
                .ok_or_else(|| not_found(name))?;
            if let Some(obj) = item.as_object_mut() {
                obj.insert("kind".into(), json!("NodeMetrics"));
                obj.insert("apiVersion".into(), json!(format!("{GROUP}/{VERSION}")));
            }
            Ok(json_response(200, &item))
        }
        _ => Err(ApiError::path_not_found()),
    }
}

/// The items metrics-server would list: nodes that exist and have usage, sorted
/// by name.
fn node_metrics(state: &Shared) -> Vec<Value> {
    let usage = state.metrics.lock().usage.clone();
    let store = state.store.lock();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    usage
        .iter()
        .filter_map(|(name, u)| {
            let node = store.get(Storage::Nodes, "", name)?;
            let labels = node
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or(json!({}));
            Some(json!({
                "metadata": {"name": name, "creationTimestamp": now, "labels": labels},
                "timestamp": u.timestamp.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "window": u.window,
                "usage": {"cpu": u.cpu, "memory": u.memory}
            }))
        })
        .collect()
}

fn group() -> Value {
    let gv = json!({"groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION});
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
           "versions": [gv.clone()], "preferredVersion": gv})
}

fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [{"name": "nodes", "singularName": "", "namespaced": false,
                       "kind": "NodeMetrics", "verbs": ["get", "list"]}]
    })
}

fn not_found(name: &str) -> ApiError {
    let mut e = ApiError::unreasoned(404, format!("nodemetrics.{GROUP} \"{name}\" not found"));
    e.reason = "NotFound";
    e.details = Some(json!({"name": name, "group": GROUP, "kind": "nodes"}));
    e
}

fn watch_not_supported() -> ApiError {
    let mut e = ApiError::unreasoned(
        405,
        format!("watch is not supported on resources of kind \"nodes.{GROUP}\""),
    );
    e.reason = "MethodNotAllowed";
    e.details = Some(json!({"group": GROUP, "kind": "nodes"}));
    e
}

/// What the aggregator writes when the APIService's server does not answer: not
/// a `Status`, plain text.
fn service_unavailable() -> Response {
    let mut resp = Response::new(Body::from("service unavailable\n"));
    *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}
