//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and an
//! approximation of strategic merge patch (merge keys by field name).

use super::status::ApiError;
use serde_json::{Map, Value};

/// The patch flavours the server distinguishes by `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// The 415 answer for a PATCH with another content type.
pub fn unsupported(ct: &str) -> ApiError {
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
    ))
}

/// The real server's limit on operations in one JSON patch.
const MAX_JSON_PATCH_OPERATIONS: usize = 10000;

/// Applies `body` of type `ty` to `doc`.
pub fn apply(doc: &Value, body: &[u8], ty: PatchType) -> Result<Value, ApiError> {
    match ty {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if ops.0.len() > MAX_JSON_PATCH_OPERATIONS {
                return Err(ApiError::entity_too_large(&format!(
                    "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                    ops.0.len()
                )));
            }
            let mut out = doc.clone();
            json_patch::patch(&mut out, &ops.0).map_err(|_| ApiError::generic(422, "PATCH"))?;
            Ok(out)
        }
        PatchType::Merge => {
            let p = decode_object(body)?;
            let mut out = doc.clone();
            json_patch::merge(&mut out, &p);
            Ok(out)
        }
        PatchType::Strategic | PatchType::Apply => {
            let p = decode_object(body)?;
            Ok(strategic_merge(doc, &p))
        }
    }
}

fn decode_object(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ));
    }
    Ok(v)
}

/// The merge key of a list field, by field name (the real server reads it
/// from the Go struct tags; these are the ones of the types we serve).
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "schedulingGates"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "conditions" | "addresses" => "type",
        "ownerReferences" => "uid",
        "hostAliases" | "podIPs" | "hostIPs" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Lists of scalars merged as sets.
fn is_primitive_merge_list(field: &str) -> bool {
    field == "finalizers"
}

/// Strategic merge of `patch` into `doc` (both objects).
pub fn strategic_merge(doc: &Value, patch: &Value) -> Value {
    let (Some(orig), Some(p)) = (doc.as_object(), patch.as_object()) else {
        return patch.clone();
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut out = p.clone();
        out.remove("$patch");
        return Value::Object(out);
    }
    let mut out = orig.clone();
    if let Some(Value::Array(retain)) = p.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (out.get_mut(field), v) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        match v {
            Value::Null => {
                out.remove(k);
            }
            Value::Object(pm) => {
                if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                    out.remove(k);
                    continue;
                }
                let merged = match out.get(k) {
                    Some(cur @ Value::Object(_)) => strategic_merge(cur, v),
                    _ => strategic_merge(&Value::Object(Map::new()), v),
                };
                out.insert(k.clone(), merged);
            }
            Value::Array(items) => {
                let merged = merge_list(k, out.get(k), items);
                out.insert(k.clone(), merged);
            }
            other => {
                out.insert(k.clone(), other.clone());
            }
        }
    }
    Value::Object(out)
}

fn merge_list(field: &str, current: Option<&Value>, items: &[Value]) -> Value {
    let current = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if is_primitive_merge_list(field) {
        let mut out = current;
        for item in items {
            if !out.contains(item) {
                out.push(item.clone());
            }
        }
        return Value::Array(out);
    }
    let Some(key) = merge_key(field) else {
        // No merge strategy: the list is replaced (minus directive entries).
        return Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    };
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    }
    let mut out = current;
    for item in items {
        let id = item.get(key);
        let pos = id.and_then(|id| out.iter().position(|o| o.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => out[i] = strategic_merge(&out[i], item),
            (None, false) => out.push(strategic_merge(&Value::Object(Map::new()), item)),
        }
    }
    Value::Array(out)
}
