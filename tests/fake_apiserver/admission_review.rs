//! The `admission.k8s.io/v1` AdmissionReview the API server sends a mutating
//! webhook, and what it makes of the answer: the checks of
//! `VerifyAdmissionResponse`, the denial `Status` (`ToStatusErr`) and the JSON
//! Patch applied to the object.

use super::status::ApiError;
use super::typed;
use serde_json::{Value, json};

/// Who the fake says made every request: the one bearer token it hands out
/// authenticates as a kubeadm cluster admin.
pub fn user_info() -> Value {
    json!({
        "username": "kubernetes-admin",
        "groups": ["kubeadm:cluster-admins", "system:authenticated"],
    })
}

/// What is being admitted.
pub struct Request<'a> {
    pub uid: &'a str,
    pub operation: &'a str,
    /// `{group, version, kind}`.
    pub kind: Value,
    /// `{group, version, resource}`.
    pub resource: Value,
    pub subresource: &'a str,
    pub namespace: &'a str,
    /// Empty on a CREATE that relies on `generateName`.
    pub name: &'a str,
    /// Whether the client sent a PATCH (the options are then `PatchOptions`).
    pub patch: bool,
}

impl Request<'_> {
    /// The `request` of the review without the objects: what CEL's `request`
    /// variable is bound to.
    pub fn fields(&self) -> Value {
        let options = match (self.operation, self.patch) {
            ("CREATE", _) => "CreateOptions",
            (_, true) => "PatchOptions",
            _ => "UpdateOptions",
        };
        let mut r = json!({
            "uid": self.uid,
            "kind": self.kind,
            "resource": self.resource,
            "requestKind": self.kind,
            "requestResource": self.resource,
            "operation": self.operation,
            "userInfo": user_info(),
            "dryRun": false,
            "options": {"kind": options, "apiVersion": "meta.k8s.io/v1"},
        });
        if !self.subresource.is_empty() {
            r["subResource"] = json!(self.subresource);
            r["requestSubResource"] = json!(self.subresource);
        }
        if !self.namespace.is_empty() {
            r["namespace"] = json!(self.namespace);
        }
        if !self.name.is_empty() {
            r["name"] = json!(self.name);
        }
        r
    }

    /// The whole AdmissionReview; `oldObject` only on UPDATE.
    pub fn review(&self, object: &Value, old_object: Option<&Value>) -> Value {
        let mut request = self.fields();
        request["object"] = object.clone();
        if let Some(old) = old_object {
            request["oldObject"] = old.clone();
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }
}

/// A webhook's verdict.
pub enum Verdict {
    /// Allowed, with the RFC 6902 operations to apply (if any).
    Allowed(Option<json_patch::Patch>),
    /// Refused: the error the client gets.
    Denied(ApiError),
}

/// Reads an answer; an `Err` is an invalid response, which the caller treats as
/// a failed call (subject to `failurePolicy`).
pub fn read_response(hook_name: &str, uid: &str, body: &Value) -> Result<Verdict, String> {
    let (api_version, kind) = (
        body["apiVersion"].as_str().unwrap_or(""),
        body["kind"].as_str().unwrap_or(""),
    );
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        return Err(format!(
            "received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={kind}"
        ));
    }
    let response = &body["response"];
    if !response.is_object() {
        return Err("received invalid webhook response: webhook response was absent".into());
    }
    let got_uid = response["uid"].as_str().unwrap_or("");
    if got_uid != uid {
        return Err(format!(
            "received invalid webhook response: expected response.uid={uid:?}, got {got_uid:?}"
        ));
    }
    if !response["allowed"].as_bool().unwrap_or(false) {
        return Ok(Verdict::Denied(denial(hook_name, &response["status"])));
    }
    let patch = response["patch"].as_str().unwrap_or("");
    if patch.is_empty() {
        return Ok(Verdict::Allowed(None));
    }
    let patch_type = response["patchType"].as_str().unwrap_or("");
    if patch_type != "JSONPatch" {
        return Err(format!(
            "received invalid webhook response: expected patchType JSONPatch, got {patch_type:?}"
        ));
    }
    let bytes = typed::std_decode(patch).map_err(|at| {
        format!("received invalid webhook response: illegal base64 data at input byte {at}")
    })?;
    let ops: json_patch::Patch = serde_json::from_slice(&bytes)
        .map_err(|e| format!("received invalid webhook response: {e}"))?;
    Ok(Verdict::Allowed(Some(ops)))
}

/// The `StatusReason`s of `metav1`, so a webhook's reason is passed on as given.
const REASONS: [&str; 18] = [
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
];

/// `ToStatusErr`: the webhook's code (400 when below 400), its reason and
/// details, and the message prefixed with who denied it.
fn denial(hook_name: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {hook_name:?} denied the request");
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let reason = status["reason"].as_str().unwrap_or("");
    let message = match status["message"].as_str().unwrap_or("") {
        "" if reason.is_empty() => format!("{denied_by} without explanation"),
        "" => format!("{denied_by}: {reason}"),
        m => format!("{denied_by}: {m}"),
    };
    let mut e = ApiError::unreasoned(code, message);
    e.reason = REASONS.into_iter().find(|r| *r == reason).unwrap_or("");
    e.details = status.get("details").filter(|d| !d.is_null()).cloned();
    e
}
