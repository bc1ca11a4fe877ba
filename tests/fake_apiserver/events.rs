//! Events: core v1 and events.k8s.io/v1 are two views of one stored resource,
//! converted field by field like the real server does, plus the create-time
//! validation each API version applies.

use super::objects;
use super::status::Cause;
use serde_json::{Map, Value, json};

/// (core v1 field, events.k8s.io/v1 field) pairs that only differ in name.
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn is_events_k8s_io(obj: &Value) -> bool {
    obj.get("apiVersion").and_then(Value::as_str) == Some("events.k8s.io/v1")
}

fn rename(obj: &Value, to_new: bool, api_version: &str) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        let renamed = RENAMES.iter().find_map(|(core, new)| {
            if to_new && k == core {
                Some(*new)
            } else if !to_new && k == new {
                Some(*core)
            } else {
                None
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// The core v1 view of a stored event.
pub fn to_core(obj: &Value) -> Value {
    if is_events_k8s_io(obj) {
        rename(obj, false, "v1")
    } else {
        obj.clone()
    }
}

/// The events.k8s.io/v1 view of a stored event.
pub fn to_events_k8s_io(obj: &Value) -> Value {
    if is_events_k8s_io(obj) {
        obj.clone()
    } else {
        rename(obj, true, "events.k8s.io/v1")
    }
}

fn str_field<'a>(obj: &'a Value, f: &str) -> &'a str {
    obj.get(f).and_then(Value::as_str).unwrap_or("")
}

/// Who reported a "new" event and what was done: the reporting controller (named
/// `controller_field` in the view posted), instance, action and reason are
/// required and bounded.
fn check_reporting(obj: &Value, controller_field: &str, causes: &mut Vec<Cause>) {
    for (f, max) in [
        (controller_field, 253usize),
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
    ] {
        let v = str_field(obj, f);
        if v.is_empty() {
            causes.push(Cause::required(f));
        } else if v.len() > max {
            causes.push(Cause::too_long(f, max));
        }
    }
}

/// Create validation for an event in the view it was posted in.
pub fn validate_create(obj: &Value, events_k8s_io: bool) -> Vec<Cause> {
    let ns = objects::namespace(obj);
    let mut causes = Vec::new();
    if events_k8s_io {
        let regarding_ns = obj
            .get("regarding")
            .map(|r| objects::field_string(r, "namespace"))
            .unwrap_or_default();
        let mismatch = if regarding_ns.is_empty() {
            ns != "default" && ns != "kube-system"
        } else {
            regarding_ns != ns
        };
        if mismatch {
            causes.push(Cause::invalid(
                "regarding.namespace",
                &json!(regarding_ns),
                "does not match event.namespace",
            ));
        }
        if str_field(obj, "eventTime").is_empty() {
            causes.push(Cause::required("eventTime"));
        }
        let ty = str_field(obj, "type");
        if ty != "Normal" && ty != "Warning" {
            causes.push(Cause::invalid(
                "type",
                &json!(""),
                &format!("has invalid value: {ty}"),
            ));
        }
        for f in ["deprecatedFirstTimestamp", "deprecatedLastTimestamp"] {
            if !str_field(obj, f).is_empty() {
                causes.push(Cause::invalid(f, &json!(""), "needs to be unset"));
            }
        }
        if obj
            .get("deprecatedCount")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            != 0
        {
            causes.push(Cause::invalid(
                "deprecatedCount",
                &json!(""),
                "needs to be unset",
            ));
        }
        check_reporting(obj, "reportingController", &mut causes);
        if str_field(obj, "note").len() > 1024 {
            causes.push(Cause::too_long("note", 1024));
        }
    } else {
        let involved_ns = obj
            .get("involvedObject")
            .map(|r| objects::field_string(r, "namespace"))
            .unwrap_or_default();
        let ok = if involved_ns.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            involved_ns == ns
        };
        if !ok {
            causes.push(Cause::invalid(
                "involvedObject.namespace",
                &json!(involved_ns),
                "does not match event.namespace",
            ));
        }
        // A core/v1 event with `eventTime` is a "new" event: it must say who
        // reported it and what was done, and its message is a note of at most 1 KiB.
        if !str_field(obj, "eventTime").is_empty() {
            check_reporting(obj, "reportingComponent", &mut causes);
            if str_field(obj, "message").len() > 1024 {
                causes.push(Cause::invalid(
                    "message",
                    &json!(""),
                    "can have at most 1024 characters",
                ));
            }
        }
    }
    causes
}

/// Whether a stored event (either view) is about pod `ns/pod`.
pub fn involves_pod(obj: &Value, ns: &str, pod: &str) -> bool {
    let core = to_core(obj);
    let Some(io) = core.get("involvedObject") else {
        return false;
    };
    let kind = objects::field_string(io, "kind");
    objects::namespace(obj) == ns
        && objects::field_string(io, "name") == pod
        && (kind.is_empty() || kind == "Pod")
}
