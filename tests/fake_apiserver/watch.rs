//! WATCH: a chunked stream of `{"type":..,"object":..}` lines. Resumes from a
//! resourceVersion out of the bounded history (410 `Expired` as an ERROR event
//! when it is too old), sends synthetic ADDED events for rv 0 / unset /
//! `sendInitialEvents`, periodic BOOKMARKs, honours `timeoutSeconds`, and turns
//! objects that stop (start) matching the selectors into DELETED (ADDED).

use super::objects;
use super::query::ListOptions;
use super::resources::Resource;
use super::selectors::Filter;
use super::state::Shared;
use super::status::ApiError;
use super::store::{Change, ChangeKind};
use super::view;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use hyper::body::Frame;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// Default watch length when the client sets no `timeoutSeconds` (the real
/// server picks 30-60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// A response body fed from a channel of chunks.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b))))
    }
}

/// What one watch shows.
struct Spec {
    res: &'static Resource,
    filter: Filter,
    metadata_only: bool,
}

impl Spec {
    /// One event, `type` before `object` as the API server writes it (Go's
    /// `metav1.WatchEvent` field order): a client decoding the object as it
    /// streams by, knowing its type already, is served as a real one is.
    fn line(&self, ty: &str, object: Value) -> Bytes {
        let mut s = format!("{{\"type\":{},\"object\":{object}}}", Value::from(ty));
        s.push('\n');
        Bytes::from(s)
    }

    /// The event a watcher with these selectors sees for `ch`, if any.
    fn event(&self, ch: &Change) -> Option<Bytes> {
        let cur = ch.kind != ChangeKind::Deleted && self.filter.matches(&ch.object);
        let old = ch.prev.as_ref().is_some_and(|p| self.filter.matches(p));
        let (ty, obj) = match (cur, old) {
            (true, false) => ("ADDED", ch.object.clone()),
            (true, true) => ("MODIFIED", ch.object.clone()),
            (false, true) => {
                let mut prev = ch.prev.clone().expect("old matched");
                objects::meta_mut(&mut prev)
                    .insert("resourceVersion".into(), json!(ch.rv.to_string()));
                ("DELETED", prev)
            }
            (false, false) => return None,
        };
        Some(self.line(ty, view::watch_object(self.res, &obj, self.metadata_only)))
    }

    /// [`Spec::event`], counted as sent in `state`'s watch traffic.
    fn counted_event(&self, ch: &Change, state: &Shared) -> Option<Bytes> {
        let line = self.event(ch)?;
        self.count(&line, state);
        Some(line)
    }

    fn count(&self, line: &Bytes, state: &Shared) {
        state.watch_traffic.lock().add(self.res.plural, line.len());
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let (kind, api_version) = if self.metadata_only {
            (
                "PartialObjectMetadata".to_string(),
                "meta.k8s.io/v1".to_string(),
            )
        } else {
            (self.res.kind.to_string(), self.res.api_version())
        };
        self.line(
            "BOOKMARK",
            json!({"kind": kind, "apiVersion": api_version, "metadata": metadata}),
        )
    }
}

/// Starts a watch stream (selectors and options already validated).
pub fn start(
    state: Arc<Shared>,
    res: &'static Resource,
    filter: Filter,
    opts: &ListOptions,
    metadata_only: bool,
) -> Response {
    let spec = Spec {
        res,
        filter,
        metadata_only,
    };
    let mut initial: Vec<Bytes> = Vec::new();
    let mut close_after_initial = false;
    let rx = {
        let mut store = state.store.lock();
        let current = store.resource_version();
        let rv = opts.resource_version.as_deref().unwrap_or("");
        let from_state = opts.send_initial_events == Some(true)
            || ((rv.is_empty() || rv == "0") && opts.send_initial_events != Some(false));
        if from_state {
            for obj in store.objects(res.storage) {
                if spec.filter.matches(obj) {
                    let line = spec.line("ADDED", view::watch_object(res, obj, metadata_only));
                    spec.count(&line, &state);
                    initial.push(line);
                }
            }
            if opts.send_initial_events == Some(true) && opts.allow_watch_bookmarks {
                initial.push(spec.bookmark(current, true));
            }
        } else {
            let n = opts.rv_number();
            match store.changes_since(res.storage, n) {
                Some(changes) => {
                    initial.extend(changes.iter().filter_map(|c| spec.counted_event(c, &state)))
                }
                None => {
                    let err = ApiError::expired(format!(
                        "too old resource version: {n} ({})",
                        store.floor()
                    ));
                    initial.push(spec.line("ERROR", err.to_status()));
                    close_after_initial = true;
                }
            }
        }
        if close_after_initial {
            None
        } else {
            Some(store.subscribe(res.storage))
        }
    };
    let (tx, body_rx) = mpsc::channel::<Bytes>(256);
    let timeout = opts
        .timeout_seconds
        .filter(|&t| t > 0)
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let bookmarks = opts.allow_watch_bookmarks;
    tokio::spawn(async move {
        for chunk in initial {
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
        let Some(mut rx) = rx else {
            return;
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let interval = state.config.lock().bookmark_interval;
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                change = rx.recv() => {
                    let Some(change) = change else { break };
                    if let Some(line) = spec.counted_event(&change, &state)
                        && tx.send(line).await.is_err()
                    {
                        break;
                    }
                }
                _ = ticker.tick(), if bookmarks => {
                    // Drain under the store lock so the bookmark's rv covers
                    // every change this watcher has been sent.
                    let (pending, rv) = {
                        let store = state.store.lock();
                        let mut pending = Vec::new();
                        while let Ok(c) = rx.try_recv() {
                            pending.push(c);
                        }
                        (pending, store.resource_version())
                    };
                    let mut lines: Vec<Bytes> = pending
                        .iter()
                        .filter_map(|c| spec.counted_event(c, &state))
                        .collect();
                    lines.push(spec.bookmark(rv, false));
                    let mut gone = false;
                    for line in lines {
                        if tx.send(line).await.is_err() {
                            gone = true;
                            break;
                        }
                    }
                    if gone {
                        break;
                    }
                }
                _ = &mut deadline => break,
                _ = tx.closed() => break,
            }
        }
    });
    let mut resp = Response::new(Body::new(ChannelBody(body_rx)));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if metadata_only {
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
        } else {
            "application/json"
        }),
    );
    resp
}
