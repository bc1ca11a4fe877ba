//! The `AdmissionReview` wire format, for both `admission.k8s.io/v1` and `v1beta1`.
//!
//! The two versions carry identical request and response fields, and the API server
//! only accepts an answer in the version it asked with, so one set of types serves
//! both and the version string is echoed.
//!
//! kube-core's `admission` types (already in the dependency tree) were weighed and
//! do not fit: they would carry v1beta1 (they copy the request's `apiVersion`), but
//! their `AdmissionResponse` writes `patch` as a JSON array of numbers where the
//! API reference, HAMi and every client read a base64 string (Go happens to decode
//! both; anything else that reads our answers would not), their
//! `AdmissionResponse::invalid` always answers `admission.k8s.io/v1` with reason
//! `InvalidRequest` and no code (a v1beta1 request must get v1beta1 back, and the
//! user sees 400, 403 or 413 here), and their `AdmissionRequest` refuses a request
//! that lacks `resource` or `userInfo`, which this webhook still answers with its
//! uid. So the few fields read and written are spelled out here.

use k8s_openapi::ByteString;
use serde::{Deserialize, Serialize};

/// `apiVersion` of `admission.k8s.io/v1` reviews.
pub const ADMISSION_V1: &str = "admission.k8s.io/v1";
/// `apiVersion` of `admission.k8s.io/v1beta1` reviews (what HAMi's chart registers).
pub const ADMISSION_V1BETA1: &str = "admission.k8s.io/v1beta1";
/// `kind` of both the request and the answer.
pub const REVIEW_KIND: &str = "AdmissionReview";
/// The only patch type the API server accepts.
pub const PATCH_TYPE_JSON: &str = "JSONPatch";

/// The parts of an incoming `request` the webhook reads; everything else is ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionRequest {
    /// Echoed in the answer so the API server can match it.
    pub uid: String,
    /// Kind of the object under admission.
    #[serde(default)]
    pub kind: Option<GroupVersionKind>,
    /// Object name; empty on CREATE when the client used `generateName`.
    #[serde(default)]
    pub name: Option<String>,
    /// Namespace of the object.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object as sent by the client (null for DELETE).
    #[serde(default)]
    pub object: Option<serde_json::Value>,
    /// The object as stored before an UPDATE.
    #[serde(default)]
    pub old_object: Option<serde_json::Value>,
    /// Who sent the request, as the API server authenticated them.
    #[serde(default)]
    pub user_info: Option<UserInfo>,
}

/// The authenticated user of an admission request.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct UserInfo {
    /// `system:serviceaccount:NAMESPACE:NAME` for service accounts.
    #[serde(default)]
    pub username: String,
}

/// Group, version and kind of the object under admission.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
}

/// The answer: an `AdmissionReview` holding only a `response`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewResponse {
    /// Same version as the request (v1 when the request's version is unreadable).
    pub api_version: String,
    /// Always `AdmissionReview`.
    pub kind: String,
    /// The verdict.
    pub response: AdmissionResponse,
}

/// The verdict on one admission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// `request.uid`, or empty when it could not be read.
    pub uid: String,
    /// Whether the object may be stored.
    pub allowed: bool,
    /// Why the request was refused; the API server only reads it when not allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResponseStatus>,
    /// RFC 6902 JSON Patch, base64 on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<ByteString>,
    /// `JSONPatch` whenever `patch` is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Shown to the client (kubectl prints them), for things it should know about
    /// even though the request was allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The `metav1.Status` of a refused request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseStatus {
    /// HTTP-style code: 400 for unreadable requests, 403 for refused pods, 500 for
    /// our own failures.
    pub code: u16,
    /// `BadRequest`, `Forbidden` or `InternalError`.
    pub reason: String,
    /// Shown to the user after "admission webhook ... denied the request:".
    pub message: String,
    /// Always `Failure`.
    pub status: String,
}

impl ResponseStatus {
    /// A failure status whose reason matches `code`.
    pub fn failure(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            403 => "Forbidden",
            _ => "InternalError",
        };
        Self {
            code,
            reason: reason.into(),
            message: message.into(),
            status: "Failure".into(),
        }
    }
}

impl AdmissionReviewResponse {
    /// Wraps a response in a review of the given version.
    pub fn new(api_version: &str, response: AdmissionResponse) -> Self {
        Self {
            api_version: api_version.to_owned(),
            kind: REVIEW_KIND.to_owned(),
            response,
        }
    }
}

impl AdmissionResponse {
    /// Allows the request unchanged.
    pub fn allow(uid: &str) -> Self {
        Self {
            uid: uid.to_owned(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
        }
    }

    /// Refuses the request with `code` and `message`.
    pub fn refuse(uid: &str, code: u16, message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            status: Some(ResponseStatus::failure(code, message)),
            ..Self::allow(uid)
        }
    }

    /// Attaches a JSON Patch (already serialised as JSON bytes).
    pub fn with_patch(mut self, patch_json: Vec<u8>) -> Self {
        self.patch = Some(ByteString(patch_json));
        self.patch_type = Some(PATCH_TYPE_JSON.to_owned());
        self
    }

    /// The message of a refusal, or empty when allowed.
    pub fn message(&self) -> &str {
        self.status.as_ref().map_or("", |s| s.message.as_str())
    }
}
