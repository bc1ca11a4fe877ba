//! The MutatingAdmissionWebhook plugin: before a create or update is stored,
//! every matching webhook of every stored MutatingWebhookConfiguration is
//! called over HTTPS (configurations by name, webhooks in their order), its
//! JSON Patch applied, and a denial or a failed call (under `failurePolicy:
//! Fail`) answered to the client the way the real API server answers it.
//! Webhooks with `reinvocationPolicy: IfNeeded` are called once more when a
//! later webhook changed the object after them.

use super::admission_review::{Request, Verdict, read_response};
use super::objects;
use super::resources::Storage;
use super::state::Shared;
use super::status::ApiError;
use super::webhook_matching::{
    Target, conditions_hold, rules_match, selectors_match, unstored_namespace,
};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

/// What is written: what the rules match, and what else the review names.
pub struct Write<'a> {
    pub target: Target<'a>,
    pub namespace: &'a str,
    pub name: &'a str,
    pub patch: bool,
}

/// The stored webhooks, configurations sorted by name.
fn webhooks(state: &Shared) -> Vec<Value> {
    let store = state.store.lock();
    let mut configs: Vec<&Value> = store
        .objects(Storage::MutatingWebhookConfigurations)
        .collect();
    configs.sort_by(|a, b| objects::name(a).cmp(objects::name(b)));
    configs
        .into_iter()
        .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Whether any stored webhook's rules cover this write, so writes nobody
/// watches skip the admission round-trip.
pub fn any_rule_matches(state: &Shared, target: &Target) -> bool {
    webhooks(state).iter().any(|h| rules_match(h, target))
}

/// Runs the write's object through the matching webhooks; returns the object
/// to store.
pub async fn admit(
    state: &Shared,
    write: &Write<'_>,
    mut object: Value,
    old_object: Option<&Value>,
) -> Result<Value, ApiError> {
    let hooks = webhooks(state);
    let target = &write.target;
    let res = target.res;
    let namespace = res.namespaced.then(|| {
        state
            .store
            .lock()
            .get(Storage::Namespaces, "", write.namespace)
            .cloned()
            .unwrap_or_else(|| unstored_namespace(write.namespace))
    });
    let uid = objects::new_uid();
    let request = Request {
        uid: &uid,
        operation: target.operation,
        kind: json!({"group": res.group, "version": res.version, "kind": res.kind}),
        resource: json!({"group": res.group, "version": res.version, "resource": res.plural}),
        subresource: target.subresource,
        namespace: write.namespace,
        name: write.name,
        patch: write.patch,
    };
    // The object as each IfNeeded webhook left it.
    let mut reinvoke: Vec<(&Value, Value)> = Vec::new();
    for hook in &hooks {
        if !rules_match(hook, target)
            || !selectors_match(hook, target, namespace.as_ref(), &object, old_object)
        {
            continue;
        }
        if call_hook(state, hook, &request, &mut object, old_object).await?
            && hook["reinvocationPolicy"] == "IfNeeded"
        {
            reinvoke.push((hook, object.clone()));
        }
    }
    for (hook, left) in reinvoke {
        if left != object {
            call_hook(state, hook, &request, &mut object, old_object).await?;
        }
    }
    Ok(object)
}

/// Calls one webhook when its matchConditions hold, applying its patch to
/// `object`. `Ok(true)` when it was called and allowed the request.
async fn call_hook(
    state: &Shared,
    hook: &Value,
    request: &Request<'_>,
    object: &mut Value,
    old_object: Option<&Value>,
) -> Result<bool, ApiError> {
    let name = hook["name"].as_str().unwrap_or("");
    let fail_closed = hook["failurePolicy"] != "Ignore";
    let failed = |reason: String| {
        if fail_closed {
            Err(ApiError::internal(&format!(
                "failed calling webhook {name:?}: {reason}"
            )))
        } else {
            Ok(false)
        }
    };
    match conditions_hold(hook, object, old_object, &request.fields()) {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(e) => return failed(format!("failed to evaluate match conditions: {e}")),
    }
    let review = request.review(object, old_object);
    let answer = match post(state, hook, &review).await {
        Ok(answer) => answer,
        Err(e) => return failed(format!("failed to call webhook: {e}")),
    };
    match read_response(name, request.uid, &answer) {
        Err(e) => failed(e),
        Ok(Verdict::Denied(e)) => Err(e),
        Ok(Verdict::Allowed(None)) => Ok(true),
        Ok(Verdict::Allowed(Some(ops))) => {
            let mut patched = object.clone();
            json_patch::patch(&mut patched, &ops.0)
                .map_err(|e| ApiError::internal(&format!("JSON Patch: {e}")))?;
            *object = patched;
            Ok(true)
        }
    }
}

/// The default `timeoutSeconds` of admissionregistration/v1.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a webhook is reached: the URL the real server would show, the one
/// actually dialled, and the address its host name resolves to.
struct Endpoint {
    shown: String,
    dialled: String,
    resolve: Option<(String, SocketAddr)>,
}

fn endpoint(state: &Shared, client_config: &Value, timeout: Duration) -> Result<Endpoint, String> {
    let query = format!("?timeout={}s", timeout.as_secs());
    if let Some(url) = client_config["url"].as_str() {
        let shown = format!("{url}{query}");
        return Ok(Endpoint {
            dialled: shown.clone(),
            shown,
            resolve: None,
        });
    }
    let service = &client_config["service"];
    let (ns, svc) = (
        service["namespace"].as_str().unwrap_or(""),
        service["name"].as_str().unwrap_or(""),
    );
    let port = service["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let path = service["path"].as_str().unwrap_or("");
    let host = format!("{svc}.{ns}.svc");
    let shown = format!("https://{host}:{port}{path}{query}");
    let address = state
        .services
        .lock()
        .get(&(ns.to_string(), svc.to_string(), port))
        .copied()
        .ok_or_else(|| format!("Post {shown:?}: service \"{svc}\" not found"))?;
    Ok(Endpoint {
        dialled: format!("https://{host}:{}{path}{query}", address.port()),
        shown,
        resolve: Some((host, address)),
    })
}

/// POSTs the review over HTTPS, trusting only `caBundle` (the system roots
/// when it is empty), within `timeoutSeconds`.
async fn post(state: &Shared, hook: &Value, review: &Value) -> Result<Value, String> {
    let timeout = hook["timeoutSeconds"]
        .as_u64()
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let client_config = &hook["clientConfig"];
    let target = endpoint(state, client_config, timeout)?;
    let shown = &target.shown;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = client_config["caBundle"].as_str().unwrap_or("");
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .no_proxy()
        .timeout(timeout)
        .tls_built_in_root_certs(ca.is_empty());
    if !ca.is_empty() {
        let pem = super::typed::std_decode(ca)
            .map_err(|at| format!("caBundle: illegal base64 data at input byte {at}"))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("caBundle holds no PEM certificate: {e}"))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let Some((host, address)) = &target.resolve {
        builder = builder.resolve(host, *address);
    }
    let client = builder
        .build()
        .map_err(|e| format!("Post {shown:?}: {e}"))?;
    let answer = client
        .post(&target.dialled)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(review.to_string())
        .send()
        .await
        .map_err(|e| {
            let cause = if e.is_timeout() {
                "context deadline exceeded".to_string()
            } else {
                error_chain(&e)
            };
            format!("Post {shown:?}: {cause}")
        })?;
    let code = answer.status().as_u16();
    let body = answer
        .text()
        .await
        .map_err(|e| format!("Post {shown:?}: {}", error_chain(&e)))?;
    if code != 200 {
        return Err(format!(
            "Post {shown:?}: the server responded with status code {code}: {body}"
        ));
    }
    serde_json::from_str(&body).map_err(|e| format!("Post {shown:?}: {e}"))
}

/// An error with its causes, so a refused connection or a certificate that
/// does not verify says so.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
