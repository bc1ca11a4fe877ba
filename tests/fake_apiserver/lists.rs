//! LIST: selectors, resourceVersion semantics (current, NotOlderThan, Exact)
//! and `limit`/`continue` pagination over a consistent snapshot, with tokens
//! shaped like the real server's.

use super::objects;
use super::query::ListOptions;
use super::resources::Resource;
use super::selectors::Filter;
use super::status::ApiError;
use super::store::{Key, Store};
use super::view;
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;

const EXPIRED_LIST: &str = "The resourceVersion for the provided list is too old.";
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn key_string(res: &Resource, key: &Key) -> String {
    if res.namespaced {
        format!("{}/{}", key.0, key.1)
    } else {
        key.1.clone()
    }
}

/// `base64(json{"v","rv","start"})`, like the real server.
pub fn encode_continue(res: &Resource, rv: i64, after: &Key) -> String {
    let token = json!({
        "v": "meta.k8s.io/v1",
        "rv": rv,
        "start": format!("{}\u{0}", key_string(res, after)),
    });
    objects::base64_encode(token.to_string().as_bytes())
}

fn decode_continue(res: &Resource, token: &str) -> Result<(i64, Key), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("invalid continue token: {why}"));
    let bytes = objects::base64_decode(token).ok_or_else(|| bad("illegal base64 data"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let rv = v
        .get("rv")
        .and_then(Value::as_i64)
        .ok_or_else(|| bad("missing rv"))?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("missing start"))?
        .trim_end_matches('\u{0}');
    let key = if res.namespaced {
        match start.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None => return Err(bad("continue key is not valid")),
        }
    } else {
        (String::new(), start.to_string())
    };
    Ok((rv, key))
}

/// Builds the list answer. Waiting for a future resourceVersion is done by the
/// caller before this runs.
fn current_objects<'a>(store: &'a Store, res: &Resource) -> Cow<'a, BTreeMap<Key, Value>> {
    store
        .current(res.storage)
        .map_or_else(|| Cow::Owned(BTreeMap::new()), Cow::Borrowed)
}

pub fn list(
    store: &Store,
    res: &'static Resource,
    filter: &Filter,
    opts: &ListOptions,
    metadata_only: bool,
) -> Result<Value, ApiError> {
    let current = store.resource_version();
    // Only a list at an older revision rebuilds that revision; one at the
    // current revision filters the objects in place, as the watch cache does
    // (copying every object to answer a list of one node's pods would charge
    // this process for what a real API server does not do).
    let (snapshot, list_rv, after): (Cow<'_, BTreeMap<Key, Value>>, u64, Option<Key>) =
        if let Some(token) = &opts.continue_token {
            if opts.resource_version.as_deref().is_some_and(|rv| rv != "0") {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let (rv, after) = decode_continue(res, token)?;
            if rv <= 0 {
                (current_objects(store, res), current, Some(after))
            } else {
                match store.snapshot_at(res.storage, rv as u64) {
                    Some(snap) => (Cow::Owned(snap), rv as u64, Some(after)),
                    None => {
                        let mut e = ApiError::expired(INCONSISTENT_CONTINUE);
                        e.continue_token = Some(encode_continue(res, -1, &after));
                        return Err(e);
                    }
                }
            }
        } else if opts.resource_version_match.as_deref() == Some("Exact") {
            let rv = opts.rv_number();
            match store.snapshot_at(res.storage, rv) {
                Some(snap) => (Cow::Owned(snap), rv, None),
                None => return Err(ApiError::expired(EXPIRED_LIST)),
            }
        } else {
            (current_objects(store, res), current, None)
        };
    let matching: Vec<(&Key, &Value)> = snapshot
        .iter()
        .filter(|(k, _)| after.as_ref().is_none_or(|a| *k > a))
        .filter(|(_, v)| filter.matches(v))
        .collect();
    let limit = opts.limit.unwrap_or(usize::MAX);
    let page: Vec<&(&Key, &Value)> = matching.iter().take(limit).collect();
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), json!(list_rv.to_string()));
    if matching.len() > page.len()
        && let Some((last, _)) = page.last()
    {
        metadata.insert(
            "continue".into(),
            json!(encode_continue(res, list_rv as i64, last)),
        );
        if !filter.has_selectors() {
            metadata.insert(
                "remainingItemCount".into(),
                json!(matching.len() - page.len()),
            );
        }
    }
    let items: Vec<Value> = page
        .iter()
        .map(|(_, v)| view::list_item(res, v, metadata_only))
        .collect();
    let (kind, api_version) = if metadata_only {
        (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        )
    } else {
        (res.list_kind(), res.api_version())
    };
    Ok(json!({
        "kind": kind,
        "apiVersion": api_version,
        "metadata": metadata,
        "items": items,
    }))
}
