//! Turning an `AdmissionReview` request body into the answer.

use super::WebhookConfig;
use super::patch::pod_patch;
use super::placement_annotations::{check_create, check_update};
use super::pod::{Admission, admit_pod};
use super::quota_check::{self, NoQuota, QuotaLookup};
use super::wire::{
    ADMISSION_V1, ADMISSION_V1BETA1, AdmissionRequest, AdmissionResponse, AdmissionReviewResponse,
    REVIEW_KIND,
};
use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde_json::Value;

/// Answers one `AdmissionReview` (`admission.k8s.io/v1` or `v1beta1`) in the same
/// version. Every outcome, including an unreadable body, is an `AdmissionReview`
/// answer: the API server treats anything else as a webhook failure and falls back
/// to the failure policy, which would hide the reason from the user.
pub fn review(body: &[u8], config: &WebhookConfig) -> AdmissionReviewResponse {
    review_with_quota(body, config, &NoQuota)
}

/// [`review`], also refusing vGPU pods that would exceed their namespace's vGPU
/// quota as `quota` knows it.
pub fn review_with_quota(
    body: &[u8],
    config: &WebhookConfig,
    quota: &dyn QuotaLookup,
) -> AdmissionReviewResponse {
    let document: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return bad_request(
                ADMISSION_V1,
                "",
                format!("request body is not an AdmissionReview: {e}"),
            );
        }
    };
    let uid = document
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_version = match document.get("apiVersion").and_then(Value::as_str) {
        Some(v @ (ADMISSION_V1 | ADMISSION_V1BETA1)) => v,
        other => {
            return bad_request(
                ADMISSION_V1,
                uid,
                format!(
                    "unsupported AdmissionReview apiVersion {:?}; expected {ADMISSION_V1} or {ADMISSION_V1BETA1}",
                    other.unwrap_or_default()
                ),
            );
        }
    };
    let kind = document.get("kind").and_then(Value::as_str);
    if kind != Some(REVIEW_KIND) {
        return bad_request(
            api_version,
            uid,
            format!(
                "request body has kind {:?}, expected {REVIEW_KIND}",
                kind.unwrap_or_default()
            ),
        );
    }
    let Some(request) = document.get("request").filter(|r| !r.is_null()) else {
        return bad_request(api_version, uid, "AdmissionReview has no request");
    };
    let request = match AdmissionRequest::deserialize(request) {
        Ok(r) => r,
        Err(e) => {
            return bad_request(
                api_version,
                uid,
                format!("cannot read AdmissionReview request: {e}"),
            );
        }
    };
    AdmissionReviewResponse::new(api_version, respond(&request, config, quota))
}

fn respond(
    request: &AdmissionRequest,
    config: &WebhookConfig,
    quota: &dyn QuotaLookup,
) -> AdmissionResponse {
    let uid = request.uid.as_str();
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let user = request
        .user_info
        .as_ref()
        .map_or("", |u| u.username.as_str());
    if request.operation == "UPDATE" {
        let Some(object) = request.object.as_ref().filter(|o| !o.is_null()) else {
            return refused_request(request, "update request has no object".to_owned());
        };
        // An update without the object as it was cannot show what changed: every
        // placement annotation it carries then counts as new, so a review that
        // lost its oldObject never lets a forged placement through.
        let old = request.old_object.as_ref().unwrap_or(&Value::Null);
        if let Err(message) = check_update(object, old, user, &config.annotation_writers) {
            tracing::info!(namespace, name = request.name.as_deref().unwrap_or_default(), %message, "admission: pod update denied");
            return AdmissionResponse::refuse(uid, 403, message);
        }
    }
    if request.operation != "CREATE" {
        tracing::info!(
            namespace,
            name = request.name.as_deref().unwrap_or_default(),
            operation = %request.operation,
            "admission: allowed, only pod creation is mutated"
        );
        return AdmissionResponse::allow(uid);
    }
    if let Some(kind) = request
        .kind
        .as_ref()
        .filter(|k| !(k.group.is_empty() && k.kind == "Pod"))
    {
        let shown = if kind.group.is_empty() {
            kind.kind.clone()
        } else {
            format!("{}/{}", kind.group, kind.kind)
        };
        return refused_request(request, format!("object is a {shown}, not a Pod"));
    }
    let Some(object) = request.object.as_ref().filter(|o| !o.is_null()) else {
        return refused_request(request, "request has no object".to_owned());
    };
    if let Err(message) = check_create(object, user, &config.annotation_writers) {
        tracing::info!(namespace, %message, "admission: pod denied");
        return AdmissionResponse::refuse(uid, 403, message);
    }
    let pod = match crate::gang::scheduling_group::pod_from_value(object) {
        Ok(p) => p,
        Err(e) => return refused_request(request, format!("object is not a valid Pod: {e}")),
    };
    let name = pod_name(&pod, request);
    let namespace = pod
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(namespace);

    match admit_pod(&pod, config) {
        Admission::Deny { code, message } => {
            tracing::info!(namespace, name, code, %message, "admission: pod denied");
            AdmissionResponse::refuse(uid, code, message)
        }
        Admission::Allow {
            mutated,
            warnings,
            note,
        } => {
            let checked = mutated.as_deref().unwrap_or(&pod);
            if let Err(message) = quota_check::check(checked, namespace, &config.nvidia, quota) {
                tracing::info!(namespace, name, %message, "admission: pod denied");
                return AdmissionResponse::refuse(uid, 403, message);
            }
            // The scheduling group's in-memory copy is no change to write.
            let mut original = pod.clone();
            crate::gang::scheduling_group::strip(&mut original);
            let stripped = mutated.map(|mut m| {
                crate::gang::scheduling_group::strip(&mut m);
                m
            });
            let patch = match stripped
                .map(|m| pod_patch(object, &original, &m))
                .transpose()
            {
                Ok(p) => p.flatten(),
                Err(e) => {
                    let message = format!("cannot build the pod patch: {e}");
                    tracing::error!(namespace, name, %message, "admission: pod denied");
                    return AdmissionResponse::refuse(uid, 500, message);
                }
            };
            let mut response = AdmissionResponse::allow(uid);
            response.warnings = warnings;
            let operations = patch.as_ref().map_or(0, |p| p.0.len());
            if let Some(patch) = patch {
                match serde_json::to_vec(&patch) {
                    Ok(bytes) => response = response.with_patch(bytes),
                    Err(e) => {
                        let message = format!("cannot serialise the pod patch: {e}");
                        tracing::error!(namespace, name, %message, "admission: pod denied");
                        return AdmissionResponse::refuse(uid, 500, message);
                    }
                }
            }
            tracing::info!(
                namespace,
                name,
                patch_operations = operations,
                warnings = response.warnings.len(),
                %note,
                "admission: pod allowed"
            );
            response
        }
    }
}

/// The pod's name for logs: with `generateName` the name is only assigned after
/// admission, so the prefix is the best handle there is.
fn pod_name<'a>(pod: &'a Pod, request: &'a AdmissionRequest) -> &'a str {
    let meta = &pod.metadata;
    [
        meta.name.as_deref(),
        meta.generate_name.as_deref(),
        request.name.as_deref(),
    ]
    .into_iter()
    .flatten()
    .find(|n| !n.is_empty())
    .unwrap_or_default()
}

fn refused_request(request: &AdmissionRequest, message: String) -> AdmissionResponse {
    tracing::warn!(
        namespace = request.namespace.as_deref().unwrap_or_default(),
        name = request.name.as_deref().unwrap_or_default(),
        %message,
        "admission: bad request"
    );
    AdmissionResponse::refuse(&request.uid, 400, message)
}

fn bad_request(
    api_version: &str,
    uid: &str,
    message: impl Into<String>,
) -> AdmissionReviewResponse {
    let message = message.into();
    tracing::warn!(uid, %message, "admission: bad request");
    AdmissionReviewResponse::new(api_version, AdmissionResponse::refuse(uid, 400, message))
}
