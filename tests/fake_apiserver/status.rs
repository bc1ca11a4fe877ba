//! `metav1.Status` failures, spelled the way the real kube-apiserver spells them
//! (`k8s.io/apimachinery/pkg/api/errors`).

use super::resources::Resource;
use serde_json::{Map, Value, json};

/// An API failure: becomes an HTTP status plus a `Status` body.
#[derive(Clone, Debug)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after: Option<u32>,
    /// `metadata.continue` of the Status (expired continue tokens).
    pub continue_token: Option<String>,
}

/// One field error of an `Invalid` answer.
pub struct Cause {
    pub field: String,
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueForbidden`, ...
    pub reason: &'static str,
    /// The message part after the field, e.g. `Required value`.
    pub message: String,
}

impl Cause {
    pub fn required(field: &str) -> Self {
        Cause {
            field: field.into(),
            reason: "FieldValueRequired",
            message: "Required value".into(),
        }
    }

    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        Cause {
            field: field.into(),
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {shown}: {detail}"),
        }
    }

    pub fn forbidden(field: &str, detail: &str) -> Self {
        Cause {
            field: field.into(),
            reason: "FieldValueForbidden",
            message: format!("Forbidden: {detail}"),
        }
    }

    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Cause {
            field: field.into(),
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }

    pub fn too_long(field: &str, max: usize) -> Self {
        Cause {
            field: field.into(),
            reason: "FieldValueTooLong",
            message: format!("Too long: may not be more than {max} bytes"),
        }
    }
}

fn resource_details(res: &Resource, name: &str) -> Value {
    let mut d = Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !res.group.is_empty() {
        d.insert("group".into(), json!(res.group));
    }
    d.insert("kind".into(), json!(res.plural));
    Value::Object(d)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `pods "x" not found`.
    pub fn not_found(res: &Resource, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.qualified()),
        )
        .with_details(resource_details(res, name))
    }

    /// Unknown path or resource.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `pods "x" already exists`.
    pub fn already_exists(res: &Resource, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", res.qualified()),
        )
        .with_details(resource_details(res, name))
    }

    /// `Operation cannot be fulfilled on <qualified> "x": <detail>`.
    pub fn conflict_on(
        qualified: &str,
        group: &str,
        plural: &str,
        name: &str,
        detail: &str,
    ) -> Self {
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(plural));
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {detail}"),
        )
        .with_details(Value::Object(d))
    }

    pub fn conflict(res: &Resource, name: &str, detail: &str) -> Self {
        Self::conflict_on(&res.qualified(), res.group, res.plural, name, detail)
    }

    /// The optimistic-concurrency failure.
    pub fn modified(res: &Resource, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// A failed UID / resourceVersion precondition, as etcd storage reports it.
    pub fn precondition(res: &Resource, namespace: &str, name: &str, detail: &str) -> Self {
        let key = if namespace.is_empty() {
            format!("/registry/{}/{name}", res.plural)
        } else {
            format!("/registry/{}/{namespace}/{name}", res.plural)
        };
        Self::conflict(
            res,
            name,
            &format!(
                "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {detail}"
            ),
        )
    }

    /// `Kind "name" is invalid: field: message` (422).
    pub fn invalid(
        qualified_kind: &str,
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<Cause>,
    ) -> Self {
        let parts: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(kind));
        d.insert(
            "causes".into(),
            Value::Array(
                causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect(),
            ),
        );
        Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details(Value::Object(d))
    }

    pub fn invalid_object(res: &Resource, name: &str, causes: Vec<Cause>) -> Self {
        Self::invalid(&res.qualified_kind(), res.group, res.kind, name, causes)
    }

    /// Invalid list/watch options (`ListOptions.meta.k8s.io "" is invalid: ...`).
    pub fn invalid_list_options(causes: Vec<Cause>) -> Self {
        Self::invalid(
            "ListOptions.meta.k8s.io",
            "meta.k8s.io",
            "ListOptions",
            "",
            causes,
        )
    }

    /// `<qualified> "name" is forbidden: <detail>` (403), as `NewForbidden`
    /// builds it for a group and resource (admission plugins, protected
    /// objects).
    pub fn forbidden_on(group: &str, resource: &str, name: &str, detail: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let message = if name.is_empty() {
            format!("{qualified} is forbidden: {detail}")
        } else {
            format!("{qualified} \"{name}\" is forbidden: {detail}")
        };
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(resource));
        Self::new(403, "Forbidden", message).with_details(Value::Object(d))
    }

    /// [`ApiError::forbidden_on`] for one of the served resources.
    pub fn forbidden(res: &Resource, name: &str, detail: &str) -> Self {
        Self::forbidden_on(res.group, res.plural, name, detail)
    }

    /// `TooManyRequests` (429) as `NewTooManyRequests` builds it, with extra
    /// `details.causes`; `retry_after` 0 means no `Retry-After` header and no
    /// `retryAfterSeconds`.
    pub fn too_many_requests(message: &str, retry_after: u32, causes: Vec<Value>) -> Self {
        let mut d = Map::new();
        if !causes.is_empty() {
            d.insert("causes".into(), Value::Array(causes));
        }
        if retry_after > 0 {
            d.insert("retryAfterSeconds".into(), json!(retry_after));
        }
        let mut e = Self::new(429, "TooManyRequests", message).with_details(Value::Object(d));
        if retry_after > 0 {
            e.retry_after = Some(retry_after);
        }
        e
    }

    /// A failure `Status` with no reason and no details: what the server
    /// writes for a plain Go error, or for a failure `Status` a handler returns
    /// as its result (its `code` becomes the HTTP status).
    pub fn unreasoned(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, "", message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message).with_details(json!({}))
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn internal(message: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    pub fn entity_too_large(message: &str) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {message}"),
        )
    }

    /// `Timeout: Too large resource version` (504) after waiting for a future
    /// resourceVersion.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1
        }));
        e.retry_after = Some(1);
        e
    }

    /// The answer `NewGenericServerResponse` would build for `code` (used for
    /// injected errors).
    pub fn generic(code: u16, method: &str) -> Self {
        let (reason, message): (&'static str, String) = match code {
            409 if method == "POST" => ("AlreadyExists", "the server reported a conflict".into()),
            409 => ("Conflict", "the server reported a conflict".into()),
            404 => ("NotFound", "the server could not find the requested resource".into()),
            400 => ("BadRequest", "the server rejected our request for an unknown reason".into()),
            401 => ("Unauthorized", "the server has asked for the client to provide credentials".into()),
            403 => ("Forbidden", "forbidden: injected by the fake apiserver".into()),
            405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource".into()),
            410 => ("Expired", "the resource has expired (injected by the fake apiserver)".into()),
            422 => ("Invalid", "the server rejected our request due to an error in our request".into()),
            429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later".into()),
            503 => ("ServiceUnavailable", "the server is currently unable to handle the request".into()),
            504 => ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request".into()),
            c if c >= 500 => ("InternalError", "an error on the server (\"injected by the fake apiserver\") has prevented the request from succeeding".into()),
            _ => ("", format!("the server responded with the status code {code} but did not return more information")),
        };
        let mut e = Self::new(code, reason, message).with_details(json!({}));
        if matches!(code, 429 | 503 | 504) {
            e.retry_after = Some(1);
            e.details = Some(json!({"retryAfterSeconds": 1}));
        }
        e
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut metadata = Map::new();
        if let Some(token) = &self.continue_token {
            metadata.insert("continue".into(), json!(token));
        }
        let mut s = Map::new();
        s.insert("kind".into(), json!("Status"));
        s.insert("apiVersion".into(), json!("v1"));
        s.insert("metadata".into(), Value::Object(metadata));
        s.insert("status".into(), json!("Failure"));
        s.insert("message".into(), json!(self.message));
        if !self.reason.is_empty() {
            s.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            s.insert("details".into(), d.clone());
        }
        s.insert("code".into(), json!(self.code));
        Value::Object(s)
    }
}

/// A `Success` Status (binding, eviction, delete of most resources).
pub fn success(code: u16, details: Option<Value>) -> Value {
    let mut s = Map::new();
    s.insert("kind".into(), json!("Status"));
    s.insert("apiVersion".into(), json!("v1"));
    s.insert("metadata".into(), json!({}));
    s.insert("status".into(), json!("Success"));
    if let Some(d) = details {
        s.insert("details".into(), d);
    }
    if code != 200 {
        s.insert("code".into(), json!(code));
    }
    Value::Object(s)
}

/// The `details` of a delete Status.
pub fn delete_details(res: &Resource, name: &str, uid: &str) -> Value {
    let mut d = resource_details(res, name);
    d["uid"] = json!(uid);
    d
}
