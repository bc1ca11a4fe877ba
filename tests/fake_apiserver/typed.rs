//! Defaulting and validation of the types whose rules differ from the generic
//! ones: Secrets (`stringData`, `type`, base64 `data`, immutability),
//! MutatingWebhookConfigurations (v1 defaults, base64 `caBundle`, webhook
//! checks, `generation`) and custom resources (`generation`, status dropped on
//! create when the status subresource exists), Namespaces (the name label the
//! server keeps on each); PriorityClass and
//! PodDisruptionBudget rules live in `priority.rs` and `budgets.rs` and are
//! dispatched from here.

use super::budgets;
use super::crud::Origin;
use super::objects;
use super::priority;
use super::resources::{Resource, Storage};
use super::status::{ApiError, Cause};
use serde_json::{Map, Value, json};

/// The real server's limit on the data of one Secret.
const SECRET_MAX_BYTES: usize = 1024 * 1024;

const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// Go's `base64.StdEncoding`: the standard alphabet, padding required, stray bits
/// in the last symbol ignored (Go is not strict about them).
const GO_STD: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Standard base64 with padding (how Go's JSON encodes `[]byte`).
pub fn std_encode(data: &[u8]) -> String {
    use base64::Engine;
    GO_STD.encode(data)
}

/// Decodes like Go's `base64.StdEncoding`. The error is the offset Go reports
/// ("illegal base64 data at input byte N").
pub fn std_decode(s: &str) -> Result<Vec<u8>, usize> {
    use base64::{DecodeError, Engine};
    GO_STD.decode(s).map_err(|e| match e {
        DecodeError::InvalidByte(at, _) | DecodeError::InvalidLastSymbol(at, _) => at,
        // Go stops at the last whole quantum.
        DecodeError::InvalidLength(_) | DecodeError::InvalidPadding => s.len() / 4 * 4,
    })
}

fn cannot_handle(res: &Resource, detail: String) -> ApiError {
    ApiError::bad_request(format!(
        "{} in version \"{}\" cannot be handled as a {}: {detail}",
        res.kind, res.version, res.kind
    ))
}

/// Checks that every value of `obj[field]` (a map of strings) is base64;
/// returns the decoded sizes.
fn check_base64_map(res: &Resource, obj: &Value, field: &str) -> Result<usize, ApiError> {
    let mut total = 0;
    match obj.get(field) {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for v in m.values() {
                let Some(s) = v.as_str() else {
                    return Err(cannot_handle(
                        res,
                        format!(
                            "json: cannot unmarshal {} into Go value of type []uint8",
                            kind_of(v)
                        ),
                    ));
                };
                let data = std_decode(s).map_err(|at| {
                    cannot_handle(res, format!("illegal base64 data at input byte {at}"))
                })?;
                total += data.len();
            }
        }
        Some(other) => {
            return Err(cannot_handle(
                res,
                format!(
                    "json: cannot unmarshal {} into Go struct field {}.{field} of type map[string][]uint8",
                    kind_of(other),
                    res.kind
                ),
            ));
        }
    }
    Ok(total)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_config_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k != "."
        && k != ".."
        && !k.starts_with("..")
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Secret decoding and defaulting: `stringData` folded into `data`, `type`
/// defaulted to `Opaque`. Returns validation causes.
fn prepare_secret(res: &Resource, obj: &mut Value) -> Result<Vec<Cause>, ApiError> {
    check_base64_map(res, obj, "data")?;
    let map = obj.as_object_mut().expect("object");
    if let Some(sd) = map.remove("stringData") {
        match sd {
            Value::Null => {}
            Value::Object(sd) => {
                let data = map
                    .entry("data")
                    .or_insert_with(|| Value::Object(Map::new()));
                if data.is_null() {
                    *data = Value::Object(Map::new());
                }
                let data = data.as_object_mut().expect("checked above");
                for (k, v) in sd {
                    let Some(s) = v.as_str() else {
                        return Err(cannot_handle(
                            res,
                            format!(
                                "json: cannot unmarshal {} into Go struct field Secret.stringData of type string",
                                kind_of(&v)
                            ),
                        ));
                    };
                    data.insert(k, json!(std_encode(s.as_bytes())));
                }
            }
            other => {
                return Err(cannot_handle(
                    res,
                    format!(
                        "json: cannot unmarshal {} into Go struct field Secret.stringData of type map[string]string",
                        kind_of(&other)
                    ),
                ));
            }
        }
    }
    if map
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        map.insert("type".into(), json!("Opaque"));
    }
    let mut causes = Vec::new();
    let mut total = 0;
    let data = map.get("data").and_then(Value::as_object).cloned();
    for (k, v) in data.iter().flatten() {
        if !is_config_key(k) {
            causes.push(Cause::invalid(
                &format!("data[{k}]"),
                &json!(k),
                CONFIG_KEY_MSG,
            ));
        }
        total += v.as_str().map_or(0, |s| s.len() / 4 * 3);
    }
    if total > SECRET_MAX_BYTES {
        causes.push(Cause {
            field: "data".into(),
            reason: "FieldValueTooLong",
            message: format!("Too long: must have at most {SECRET_MAX_BYTES} bytes"),
        });
    }
    let ty = map.get("type").and_then(Value::as_str).unwrap_or("");
    let required: &[&str] = match ty {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    };
    for key in required {
        if data.as_ref().is_none_or(|d| !d.contains_key(*key)) {
            causes.push(Cause::required(&format!("data[{key}]")));
        }
    }
    Ok(causes)
}

fn webhook_defaults(hook: &mut Map<String, Value>) {
    let mut default = |k: &str, v: Value| {
        if hook.get(k).is_none_or(Value::is_null) {
            hook.insert(k.into(), v);
        }
    };
    default("failurePolicy", json!("Fail"));
    default("matchPolicy", json!("Equivalent"));
    default("namespaceSelector", json!({}));
    default("objectSelector", json!({}));
    default("timeoutSeconds", json!(10));
    default("reinvocationPolicy", json!("Never"));
    if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
        for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
            if rule.get("scope").is_none_or(Value::is_null) {
                rule.insert("scope".into(), json!("*"));
            }
        }
    }
    if let Some(svc) = hook
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
        .and_then(Value::as_object_mut)
        && svc.get("port").is_none_or(Value::is_null)
    {
        svc.insert("port".into(), json!(443));
    }
}

/// Whether `s` is a DNS subdomain with at least three labels (webhook names).
fn is_fully_qualified(s: &str) -> bool {
    objects::is_dns_subdomain(s) && s.split('.').count() >= 3
}

fn prepare_webhooks(res: &Resource, obj: &mut Value) -> Result<Vec<Cause>, ApiError> {
    let mut causes = Vec::new();
    let Some(hooks) = obj.get_mut("webhooks") else {
        return Ok(causes);
    };
    if hooks.is_null() {
        return Ok(causes);
    }
    let Some(hooks) = hooks.as_array_mut() else {
        return Err(cannot_handle(
            res,
            "json: cannot unmarshal object into Go struct field MutatingWebhookConfiguration.webhooks of type []v1.MutatingWebhook".into(),
        ));
    };
    let mut names = std::collections::BTreeSet::new();
    for (i, hook) in hooks.iter_mut().enumerate() {
        let Some(h) = hook.as_object_mut() else {
            continue;
        };
        if let Some(ca) = h.get("clientConfig").and_then(|c| c.get("caBundle"))
            && !ca.is_null()
        {
            let s = ca.as_str().unwrap_or("");
            std_decode(s).map_err(|at| {
                cannot_handle(res, format!("illegal base64 data at input byte {at}"))
            })?;
        }
        webhook_defaults(h);
        let field = |f: &str| format!("webhooks[{i}].{f}");
        let name = h.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            causes.push(Cause::required(&field("name")));
        } else if !is_fully_qualified(name) {
            causes.push(Cause::invalid(
                &field("name"),
                &json!(name),
                "should be a domain with at least three segments separated by dots",
            ));
        } else if !names.insert(name.to_string()) {
            causes.push(Cause {
                field: field("name"),
                reason: "FieldValueDuplicate",
                message: format!("Duplicate value: {name:?}"),
            });
        }
        match h.get("sideEffects").and_then(Value::as_str) {
            None => causes.push(Cause::not_supported(
                &field("sideEffects"),
                "",
                &["None", "NoneOnDryRun"],
            )),
            Some("None" | "NoneOnDryRun") => {}
            Some(other) => causes.push(Cause::not_supported(
                &field("sideEffects"),
                other,
                &["None", "NoneOnDryRun"],
            )),
        }
        let versions: Vec<&str> = h
            .get("admissionReviewVersions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if versions.is_empty() {
            causes.push(Cause {
                field: field("admissionReviewVersions"),
                reason: "FieldValueRequired",
                message: "Required value: must specify one of v1, v1beta1".into(),
            });
        } else if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
            causes.push(Cause::invalid(
                &field("admissionReviewVersions"),
                &json!(versions),
                "must include at least one of v1, v1beta1",
            ));
        }
        let cc = h.get("clientConfig");
        let has = |k: &str| cc.and_then(|c| c.get(k)).is_some_and(|v| !v.is_null());
        if has("url") == has("service") {
            causes.push(Cause::required(&format!(
                "webhooks[{i}].clientConfig: exactly one of url or service is required"
            )));
        }
        for (key, allowed) in [
            ("failurePolicy", &["Ignore", "Fail"][..]),
            ("matchPolicy", &["Exact", "Equivalent"][..]),
            ("reinvocationPolicy", &["Never", "IfNeeded"][..]),
        ] {
            if let Some(v) = h.get(key).and_then(Value::as_str)
                && !allowed.contains(&v)
            {
                causes.push(Cause::not_supported(&field(key), v, allowed));
            }
        }
        if let Some(t) = h.get("timeoutSeconds").and_then(Value::as_i64)
            && !(1..=30).contains(&t)
        {
            causes.push(Cause::invalid(
                &field("timeoutSeconds"),
                &json!(t),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
    }
    Ok(causes)
}

/// The label the API server keeps on every Namespace, holding its name (set on
/// create and on every update, whatever the request says).
fn label_namespace_name(obj: &mut Value) {
    let name = objects::name(obj).to_string();
    let meta = objects::meta_mut(obj);
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels["kubernetes.io/metadata.name"] = json!(name);
}

/// Type-specific preparation of a new object. Returns validation causes.
pub fn prepare_create(
    res: &Resource,
    obj: &mut Value,
    origin: Origin,
) -> Result<Vec<Cause>, ApiError> {
    let causes = match res.storage {
        Storage::Secrets => prepare_secret(res, obj)?,
        Storage::MutatingWebhookConfigurations => prepare_webhooks(res, obj)?,
        Storage::PriorityClasses => priority::prepare_create(res, obj)?,
        Storage::PodDisruptionBudgets => budgets::prepare_create(res, obj, origin)?,
        Storage::Namespaces => {
            label_namespace_name(obj);
            Vec::new()
        }
        _ => Vec::new(),
    };
    if res.custom && res.status_subresource && origin == Origin::Http {
        obj.as_object_mut().expect("object").remove("status");
    }
    if res.tracks_generation() {
        objects::meta_mut(obj).insert("generation".into(), json!(1));
    }
    Ok(causes)
}

/// `obj` without the fields that do not count as a spec change.
fn spec_part(res: &Resource, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if res.status_subresource {
            m.remove("status");
        }
    }
    v
}

/// Type-specific rules of an update from `old` to `new` (generation carried
/// over from `old` already). Returns validation causes.
pub fn prepare_update(
    res: &Resource,
    old: &Value,
    new: &mut Value,
    sub: Option<&str>,
) -> Result<Vec<Cause>, ApiError> {
    let mut causes = match res.storage {
        Storage::Secrets => prepare_secret(res, new)?,
        Storage::MutatingWebhookConfigurations => prepare_webhooks(res, new)?,
        Storage::PriorityClasses => priority::prepare_update(res, old, new)?,
        Storage::PodDisruptionBudgets => budgets::prepare_update(res, new, sub)?,
        Storage::Namespaces => {
            label_namespace_name(new);
            Vec::new()
        }
        _ => Vec::new(),
    };
    if res.storage == Storage::Secrets {
        if old.get("type") != new.get("type") {
            causes.push(Cause::invalid(
                "type",
                new.get("type").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        if old.get("immutable") == Some(&json!(true)) {
            if old.get("data") != new.get("data") {
                causes.push(Cause::forbidden(
                    "data",
                    "field is immutable when `immutable` is set",
                ));
            }
            if new.get("immutable") != Some(&json!(true)) {
                causes.push(Cause::forbidden(
                    "immutable",
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }
    if res.tracks_generation() && sub.is_none() {
        let changed = match res.storage {
            Storage::MutatingWebhookConfigurations => old.get("webhooks") != new.get("webhooks"),
            // Set to 1 on create and never moved (`PrepareForUpdate` is empty).
            Storage::PriorityClasses => false,
            _ => spec_part(res, old) != spec_part(res, new),
        };
        if changed {
            let g = objects::meta(old)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            objects::meta_mut(new).insert("generation".into(), json!(g + 1));
        }
    }
    Ok(causes)
}

/// The 415 answer to a strategic merge patch of a custom resource.
pub fn strategic_merge_unsupported() -> ApiError {
    ApiError::unsupported_media_type(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )
}
