//! How stored objects are shown through a resource: the events.k8s.io view of
//! events, type meta on single objects (not on list items, like the real
//! server), and `PartialObjectMetadata` for metadata-only clients.

use super::events;
use super::resources::{Resource, Storage};
use serde_json::{Value, json};

/// The object as the API of `res` shows it (converts events), with type meta.
pub fn view(res: &Resource, stored: &Value) -> Value {
    let mut v = if res.storage == Storage::Events {
        if res.group.is_empty() {
            events::to_core(stored)
        } else {
            events::to_events_k8s_io(stored)
        }
    } else {
        stored.clone()
    };
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(res.api_version()));
        m.insert("kind".into(), json!(res.kind));
    }
    v
}

/// A single-object response (GET, POST, PUT, PATCH, watch event objects).
pub fn render(res: &Resource, stored: &Value) -> Value {
    view(res, stored)
}

/// The `PartialObjectMetadata` form.
pub fn partial(stored: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": stored.get("metadata").cloned().unwrap_or(json!({}))
    })
}

/// A watch event object.
pub fn watch_object(res: &Resource, stored: &Value, metadata_only: bool) -> Value {
    if metadata_only {
        partial(stored)
    } else {
        render(res, stored)
    }
}

/// A list item: the real server leaves kind/apiVersion off list items.
pub fn list_item(res: &Resource, stored: &Value, metadata_only: bool) -> Value {
    if metadata_only {
        return partial(stored);
    }
    let mut v = view(res, stored);
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}
