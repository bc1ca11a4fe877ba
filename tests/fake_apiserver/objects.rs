//! Object metadata helpers: identity, timestamps, generated names and the
//! metadata validation every resource gets.

use super::status::Cause;
use serde_json::{Map, Value, json};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 random-looking bits (no `rand` crate: std's randomly keyed hasher).
pub fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

/// A version-4 style UUID.
pub fn new_uid() -> String {
    let a = random_u64();
    let b = random_u64();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        ((b >> 48) & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// The 5-character suffix of `generateName` (same alphabet as the real server).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
            r /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// `metav1.Time`: RFC 3339, seconds.
pub fn now_time() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `metav1.Time` `secs` seconds from now.
pub fn time_in(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `metav1.MicroTime`.
pub fn now_micro_time() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata`, created when missing (the object must be a JSON object).
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid")
}

pub fn resource_version(obj: &Value) -> &str {
    meta_str(obj, "resourceVersion")
}

/// `metadata.labels` as a map (empty when absent).
pub fn labels(obj: &Value) -> Map<String, Value> {
    meta(obj)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Reads a dotted path (`spec.nodeName`) as the string a field selector sees.
pub fn field_string(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Whether `s` is a DNS-1123 subdomain (object names of most resources).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn is_qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// `prefix/name` label and annotation keys.
pub fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_qualified_name_part(name),
        None => is_qualified_name_part(s),
    }
}

/// Label values: empty, or a qualified-name part.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_qualified_name_part(s)
}

const NAME_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub const KEY_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
pub const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Total size limit of annotations.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// Metadata checks common to every resource (name format, labels, annotations).
pub fn validate_metadata(obj: &Value, check_name: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = name(obj);
    if check_name && !name.is_empty() && !is_dns_subdomain(name) {
        causes.push(Cause::invalid("metadata.name", &json!(name), NAME_MSG));
    }
    let Some(m) = meta(obj) else {
        return causes;
    };
    match m.get("labels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            for (k, v) in labels {
                if !is_qualified_name(k) {
                    causes.push(Cause::invalid("metadata.labels", &json!(k), KEY_MSG));
                }
                match v.as_str() {
                    Some(s) if is_label_value(s) => {}
                    _ => causes.push(Cause::invalid(
                        &format!("metadata.labels[{k}]"),
                        v,
                        VALUE_MSG,
                    )),
                }
            }
        }
        Some(other) => causes.push(Cause::invalid("metadata.labels", other, "must be a map")),
    }
    match m.get("annotations") {
        None | Some(Value::Null) => {}
        Some(Value::Object(ann)) => {
            let mut total = 0;
            for (k, v) in ann {
                if !is_qualified_name(&k.to_ascii_lowercase()) {
                    causes.push(Cause::invalid("metadata.annotations", &json!(k), KEY_MSG));
                }
                match v.as_str() {
                    Some(s) => total += k.len() + s.len(),
                    None => causes.push(Cause::invalid(
                        &format!("metadata.annotations[{k}]"),
                        v,
                        "must be a string",
                    )),
                }
            }
            if total > ANNOTATIONS_MAX_BYTES {
                causes.push(Cause::too_long(
                    "metadata.annotations",
                    ANNOTATIONS_MAX_BYTES,
                ));
            }
        }
        Some(other) => causes.push(Cause::invalid(
            "metadata.annotations",
            other,
            "must be a map",
        )),
    }
    causes
}

/// Raw URL base64, as the real server encodes continue tokens.
pub fn base64_encode(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
}
