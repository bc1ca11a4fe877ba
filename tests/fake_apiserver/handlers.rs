//! The HTTP side: authentication, injected faults, routing and the REST verbs.

use super::admitted_writes::{self, admitted_create};
use super::crud::{self, DeleteOptions, Origin};
use super::discovery;
use super::eviction::{self, Eviction, EvictionRecord};
use super::lists;
use super::mutating_admission;
use super::node_metrics;
use super::objects;
use super::patch::{self, PatchType};
use super::pods;
use super::priority;
use super::query::{self, ListOptions};
use super::request_cost::RequestKind;
use super::resources::{self, Resource, Storage};
use super::routes::{self, Discovery, Route};
use super::selectors::{FieldSelector, Filter, LabelSelector};
use super::state::Shared;
use super::status::{ApiError, Cause};
use super::typed;
use super::view;
use super::watch;
use super::webhook_matching::Target;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The real server's request body limit (3 MiB).
const BODY_LIMIT: usize = 3 * 1024 * 1024;

/// How long a request for a future resourceVersion waits before 504.
const TOO_LARGE_RV_WAIT: Duration = Duration::from_secs(3);

pub fn json_response(code: u16, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub fn error_response(err: &ApiError) -> Response {
    let mut resp = json_response(err.code, &err.to_status());
    if let Some(secs) = err.retry_after {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

fn text_response(text: &'static str) -> Response {
    let mut resp = Response::new(Body::from(text));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Entry point for every request: latency, the handling itself, common headers
/// and the request log.
pub async fn handle(State(state): State<Arc<Shared>>, req: Request) -> Response {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let line = if query.is_empty() {
        path.clone()
    } else {
        format!("{path}?{query}")
    };
    let latency = state.faults.lock().latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(kind) = RequestKind::of(&method, &query) {
        let answer_at = state.cost.lock().answer_at(kind, state.write_lane.now());
        if let Some(at) = answer_at {
            state.write_lane.wait_until(at).await;
        }
    }
    let mut resp = match dispatch(&state, &method, &path, &query, &line, req).await {
        Ok(resp) => resp,
        Err(err) => error_response(&err),
    };
    let headers = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&objects::new_uid()) {
        headers.insert("audit-id", v);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    state
        .faults
        .lock()
        .log
        .push((method, line, resp.status().as_u16()));
    resp
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// A request after routing, with its body read.
struct Req<'a> {
    method: &'a str,
    query: HashMap<String, String>,
    content_type: String,
    metadata_only: bool,
    body: Bytes,
}

async fn dispatch(
    state: &Arc<Shared>,
    method: &str,
    path: &str,
    query: &str,
    line: &str,
    req: Request,
) -> Result<Response, ApiError> {
    let route = routes::route(path);
    let workload_version = state.config.lock().workload_version();
    let route = match route {
        Route::Collection { res, .. } | Route::Object { res, .. }
            if !resources::is_served(res, workload_version) =>
        {
            Route::NotFound
        }
        Route::Discovery(Discovery::Resources(g, v))
            if !discovery::served(&g, &v, workload_version) =>
        {
            Route::NotFound
        }
        other => other,
    };
    let public = matches!(
        route,
        Route::Discovery(Discovery::Version | Discovery::Health)
    );
    if !public && state.config.lock().require_auth {
        let auth = header_str(req.headers(), header::AUTHORIZATION);
        if auth != format!("Bearer {}", state.token) {
            return Err(ApiError::unauthorized());
        }
    }
    let fault_line = format!("{method} {line}");
    if let Some(code) = state.faults.lock().take_error(&fault_line) {
        return Err(ApiError::generic(code, method));
    }
    if node_metrics::claims(path) {
        return node_metrics::handle(state, method, path, query);
    }
    let content_type = header_str(req.headers(), header::CONTENT_TYPE).to_string();
    let metadata_only =
        header_str(req.headers(), header::ACCEPT).contains("as=PartialObjectMetadata");
    let body = axum::body::to_bytes(req.into_body(), BODY_LIMIT)
        .await
        .map_err(|_| ApiError::entity_too_large(&format!("limit is {BODY_LIMIT}")))?;
    let r = Req {
        method,
        query: query::parse(query),
        content_type,
        metadata_only,
        body,
    };
    if matches!(method, "POST" | "PUT" | "PATCH" | "DELETE")
        && state.faults.lock().take_conflict(&fault_line)
    {
        return Err(injected_conflict(&route, &r));
    }
    let answer = match route {
        Route::Discovery(d) => discovery(state, d, &r),
        Route::NotFound => Err(ApiError::path_not_found()),
        Route::Collection { res, namespace } => collection(state, res, namespace, &r).await,
        Route::Object {
            res,
            namespace,
            name,
            sub,
        } if is_admitted_update(state, res, &namespace, &name, sub.as_deref(), &r) => {
            admitted_update(state, res, &namespace, &name, sub.as_deref(), &r).await
        }
        Route::Object {
            res,
            namespace,
            name,
            sub,
        } => object(state, res, &namespace, &name, sub.as_deref(), &r),
    };
    if let Some(code) = state.faults.lock().take_lost_answer(&fault_line) {
        return Err(ApiError::generic(code, method));
    }
    answer
}

fn injected_conflict(route: &Route, r: &Req) -> ApiError {
    match route {
        Route::Object { res, name, .. } => ApiError::modified(res, name),
        Route::Collection { res, .. } => {
            let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            ApiError::modified(res, objects::name(&body))
        }
        _ => ApiError::generic(409, r.method),
    }
}

fn discovery(state: &Shared, d: Discovery, r: &Req) -> Result<Response, ApiError> {
    if r.method != "GET" {
        return Err(ApiError::method_not_allowed());
    }
    Ok(match d {
        Discovery::Version => json_response(200, &discovery::version()),
        Discovery::Health => text_response("ok"),
        Discovery::Api => json_response(200, &discovery::api_versions(&state.address)),
        Discovery::Apis => {
            let mut groups = discovery::group_list(state.config.lock().workload_version());
            if let (Some(entry), Some(list)) = (
                node_metrics::group_entry(state),
                groups["groups"].as_array_mut(),
            ) {
                list.push(entry);
            }
            json_response(200, &groups)
        }
        Discovery::Group(g) => json_response(
            200,
            &discovery::group(&g, state.config.lock().workload_version()),
        ),
        Discovery::Resources(g, v) => json_response(200, &discovery::resource_list(&g, &v)),
    })
}

/// A JSON object request body (POST/PUT).
fn parse_body(r: &Req) -> Result<Value, ApiError> {
    let base = r.content_type.split(';').next().unwrap_or("").trim();
    if !matches!(base, "" | "application/json" | "application/yaml" | "*/*") {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor (the fake apiserver reads JSON only; got {base:?})"
        )));
    }
    let v: Value = serde_json::from_slice(&r.body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: json: cannot unmarshal into Go value of type struct",
        ));
    }
    Ok(v)
}

fn filter_for(
    res: &Resource,
    namespace: Option<String>,
    opts: &ListOptions,
) -> Result<Filter, ApiError> {
    Ok(Filter {
        namespace,
        labels: LabelSelector::parse(&opts.label_selector).map_err(ApiError::bad_request)?,
        fields: FieldSelector::parse(&opts.field_selector, res, &opts.label_selector)
            .map_err(ApiError::bad_request)?,
    })
}

/// Waits (up to 3 s, like the watch cache) for a resourceVersion from the future.
async fn wait_for_rv(state: &Shared, opts: &ListOptions) -> Result<(), ApiError> {
    let want = opts.rv_number();
    if want == 0 || opts.continue_token.is_some() {
        return Ok(());
    }
    /// Counts the read in `rv_waiters` while it waits.
    struct Waiting<'a>(&'a Shared);
    impl Drop for Waiting<'_> {
        fn drop(&mut self) {
            self.0.rv_waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let deadline = Instant::now() + TOO_LARGE_RV_WAIT;
    let mut waiting = None;
    loop {
        let current = state.store.lock().resource_version();
        if current >= want {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(ApiError::too_large_resource_version(want, current));
        }
        if waiting.is_none() {
            state.rv_waiters.fetch_add(1, Ordering::SeqCst);
            waiting = Some(Waiting(state));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn collection(
    state: &Arc<Shared>,
    res: &'static Resource,
    namespace: Option<String>,
    r: &Req<'_>,
) -> Result<Response, ApiError> {
    match r.method {
        "GET" => {
            let opts = ListOptions::from_query(&r.query)?;
            let filter = filter_for(res, namespace, &opts)?;
            wait_for_rv(state, &opts).await?;
            if opts.watch {
                return Ok(watch::start(
                    state.clone(),
                    res,
                    filter,
                    &opts,
                    r.metadata_only,
                ));
            }
            let list = lists::list(&state.store.lock(), res, &filter, &opts, r.metadata_only)?;
            let mut resp = json_response(200, &list);
            if r.metadata_only {
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(
                        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                    ),
                );
            }
            Ok(resp)
        }
        "POST" => {
            let ns = match (&namespace, res.namespaced) {
                (Some(ns), true) => ns.clone(),
                (None, false) => String::new(),
                _ => return Err(ApiError::method_not_allowed()),
            };
            let mut obj = parse_body(r)?;
            pods::drop_disabled_fields(res, &mut obj, state.config.lock().workload_apis);
            let obj = admitted_create(state, res, &ns, obj).await?;
            let stored = crud::create(&mut state.store.lock(), res, &ns, obj, Origin::Http)?;
            Ok(json_response(201, &view::render(res, &stored)))
        }
        "DELETE" => {
            let opts = ListOptions::from_query(&r.query)?;
            let filter = filter_for(res, namespace, &opts)?;
            let del = delete_options(r)?;
            let graceful = state.config.lock().graceful_pod_deletion;
            let mut store = state.store.lock();
            let targets: Vec<(String, String)> = store
                .objects(res.storage)
                .filter(|o| filter.matches(o))
                .map(|o| {
                    (
                        objects::namespace(o).to_string(),
                        objects::name(o).to_string(),
                    )
                })
                .collect();
            let mut items = Vec::new();
            for (ns, name) in targets {
                let outcome = crud::delete(&mut store, res, &ns, &name, &del, graceful)?;
                let obj = match outcome {
                    crud::DeleteOutcome::Deleted(o) | crud::DeleteOutcome::Pending(o) => o,
                };
                items.push(view::list_item(res, &obj, false));
            }
            let rv = store.resource_version();
            Ok(json_response(
                200,
                &json!({
                    "kind": res.list_kind(),
                    "apiVersion": res.api_version(),
                    "metadata": {"resourceVersion": rv.to_string()},
                    "items": items,
                }),
            ))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn delete_options(r: &Req) -> Result<DeleteOptions, ApiError> {
    let mut opts = if r.body.is_empty() {
        DeleteOptions::default()
    } else {
        let v: Value = serde_json::from_slice(&r.body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?;
        DeleteOptions::from_body(&v)
    };
    if let Some(g) = r
        .query
        .get("gracePeriodSeconds")
        .and_then(|g| g.parse().ok())
    {
        opts.grace_period_seconds = Some(g);
    }
    Ok(opts)
}

fn object(
    state: &Arc<Shared>,
    res: &'static Resource,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    r: &Req,
) -> Result<Response, ApiError> {
    match sub {
        None => {}
        Some("status") if res.status_subresource => {}
        Some("binding") if res.storage == Storage::Pods => {
            if r.method != "POST" {
                return Err(ApiError::method_not_allowed());
            }
            let body = parse_body(r)?;
            let topology_labels = state.config.lock().pod_topology_labels;
            let answer = pods::bind(&mut state.store.lock(), ns, name, &body, topology_labels)?;
            return Ok(json_response(201, &answer));
        }
        Some("eviction") if res.storage == Storage::Pods => {
            if r.method != "POST" {
                return Err(ApiError::method_not_allowed());
            }
            let body = parse_body(r)?;
            let parsed = Eviction::parse(ns, name, &body, &r.query);
            let dry_run = parsed.as_ref().is_ok_and(|e| e.dry_run);
            let graceful = state.config.lock().graceful_pod_deletion;
            let answer =
                parsed.and_then(|e| eviction::evict(&mut state.store.lock(), &e, graceful));
            state.faults.lock().evictions.push(EvictionRecord {
                namespace: ns.to_string(),
                pod: name.to_string(),
                code: answer.as_ref().map_or_else(|e| e.code, |_| 201),
                dry_run,
            });
            return Ok(json_response(201, &answer?));
        }
        Some(_) => return Err(ApiError::path_not_found()),
    }
    match r.method {
        "GET" => {
            let store = state.store.lock();
            let obj = store
                .get(res.storage, ns, name)
                .ok_or_else(|| ApiError::not_found(res, name))?;
            Ok(json_response(
                200,
                &if r.metadata_only {
                    view::partial(obj)
                } else {
                    view::render(res, obj)
                },
            ))
        }
        "PUT" => {
            let obj = parse_body(r)?;
            let (code, stored) = crud::update(&mut state.store.lock(), res, ns, name, obj, sub)?;
            Ok(json_response(code, &view::render(res, &stored)))
        }
        "PATCH" => {
            let ty = patch_type(res, r)?;
            let (code, stored) =
                crud::patch(&mut state.store.lock(), res, ns, name, &r.body, ty, sub)?;
            Ok(json_response(code, &view::render(res, &stored)))
        }
        "DELETE" if sub.is_none() => {
            priority::check_delete(res, name)?;
            let opts = delete_options(r)?;
            let graceful = state.config.lock().graceful_pod_deletion;
            let outcome = crud::delete(&mut state.store.lock(), res, ns, name, &opts, graceful)?;
            Ok(json_response(200, &outcome.response(res)))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// The PATCH's type, refusing what the resource or the body cannot take.
fn patch_type(res: &Resource, r: &Req) -> Result<PatchType, ApiError> {
    let ty = PatchType::from_content_type(&r.content_type)
        .ok_or_else(|| patch::unsupported(&r.content_type))?;
    if ty == PatchType::Strategic && res.custom {
        return Err(typed::strategic_merge_unsupported());
    }
    if ty == PatchType::Apply {
        if r.query.get("fieldManager").is_none_or(|m| m.is_empty()) {
            return Err(ApiError::invalid(
                "PatchOptions.meta.k8s.io",
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![Cause {
                    field: "fieldManager".into(),
                    reason: "FieldValueRequired",
                    message: "Required value: is required for apply patch".into(),
                }],
            ));
        }
        if serde_json::from_slice::<Value>(&r.body).is_err() {
            return Err(ApiError::unsupported_media_type(
                "the fake apiserver only understands apply patches written as JSON",
            ));
        }
    }
    Ok(ty)
}

/// A PUT or PATCH of an existing object (or its status) that a stored mutating
/// webhook's rules cover: it goes through [`admitted_writes::update`].
fn is_admitted_update(
    state: &Shared,
    res: &'static Resource,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    r: &Req,
) -> bool {
    matches!(r.method, "PUT" | "PATCH")
        && matches!(sub, None | Some("status"))
        && (sub.is_none() || res.status_subresource)
        && state.store.lock().get(res.storage, ns, name).is_some()
        && mutating_admission::any_rule_matches(
            state,
            &Target {
                res,
                operation: "UPDATE",
                subresource: sub.unwrap_or(""),
            },
        )
}

async fn admitted_update(
    state: &Shared,
    res: &'static Resource,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    r: &Req<'_>,
) -> Result<Response, ApiError> {
    let edit = if r.method == "PUT" {
        admitted_writes::Edit::Replace(parse_body(r)?)
    } else {
        admitted_writes::Edit::Patch(&r.body, patch_type(res, r)?)
    };
    let (code, stored) = admitted_writes::update(state, res, ns, name, sub, edit).await?;
    Ok(json_response(code, &view::render(res, &stored)))
}
