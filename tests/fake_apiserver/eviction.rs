//! The `eviction` subresource of pods (policy/v1 `Eviction`), following the
//! real server's `EvictionREST.Create`:
//!
//! - a pod that is Pending, Succeeded, Failed or already being deleted is
//!   deleted without looking at budgets;
//! - otherwise the PodDisruptionBudgets whose selector matches the pod decide:
//!   more than one is a 500; none lets the eviction through;
//! - an unhealthy pod is deleted without spending the budget when the budget
//!   is met (`currentHealthy >= desiredHealthy > 0`, the default
//!   `IfHealthyBudget` policy) or its policy is `AlwaysAllow`;
//! - a budget its controller has not seen yet (`observedGeneration <
//!   generation`) or with no `disruptionsAllowed` left answers 429;
//! - a granted eviction spends one disruption and records the pod in
//!   `disruptedPods` (a status write), then the pod gets the
//!   `DisruptionTarget` condition and is deleted (gracefully when the fake
//!   deletes pods gracefully).
//!
//! A dry run (`?dryRun=All` or `deleteOptions.dryRun`) makes every check and
//! writes nothing.

use super::budgets;
use super::crud::{self, DeleteOptions};
use super::disruption;
use super::objects;
use super::pods;
use super::resources::{self, Storage};
use super::status::{self, ApiError, Cause};
use super::store::Store;
use serde_json::{Value, json};
use std::collections::HashMap;

/// `MaxDisruptedPodSize`.
const MAX_DISRUPTED_PODS: usize = 2000;

const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// One eviction the server handled, for tests to inspect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionRecord {
    pub namespace: String,
    pub pod: String,
    /// The HTTP status answered: 201 evicted, 429 refused by a budget, 500 more
    /// than one budget, 404 no such pod, ...
    pub code: u16,
    pub dry_run: bool,
}

/// A parsed eviction request.
pub struct Eviction {
    pub namespace: String,
    pub name: String,
    pub delete: DeleteOptions,
    pub dry_run: bool,
}

fn dry_run_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

impl Eviction {
    /// Reads the request: `?dryRun` may only be `All`, the body's name and
    /// namespace must match the URL, and the two dry-run settings must agree
    /// when both are given (`propagateDryRun`).
    pub fn parse(
        ns: &str,
        name: &str,
        body: &Value,
        query: &HashMap<String, String>,
    ) -> Result<Self, ApiError> {
        let query_dry: Vec<String> = query
            .get("dryRun")
            .filter(|v| !v.is_empty())
            .map(|v| vec![v.clone()])
            .unwrap_or_default();
        if let Some(bad) = query_dry.iter().find(|v| *v != "All") {
            return Err(ApiError::invalid(
                "CreateOptions.meta.k8s.io",
                "meta.k8s.io",
                "CreateOptions",
                "",
                vec![Cause {
                    field: "dryRun".into(),
                    reason: "FieldValueNotSupported",
                    message: format!(
                        "Unsupported value: []string{{{bad:?}}}: supported values: \"All\""
                    ),
                }],
            ));
        }
        if objects::name(body) != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let body_ns = objects::namespace(body);
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let options = body.get("deleteOptions").filter(|o| o.is_object());
        let body_dry = dry_run_list(options.and_then(|o| o.get("dryRun")));
        if !query_dry.is_empty() && !body_dry.is_empty() && query_dry != body_dry {
            return Err(ApiError::unreasoned(
                500,
                format!(
                    "Non-matching dry-run options in request and content: [{}] and [{}]",
                    query_dry.join(" "),
                    body_dry.join(" ")
                ),
            ));
        }
        Ok(Eviction {
            namespace: ns.to_string(),
            name: name.to_string(),
            delete: options.map(DeleteOptions::from_body).unwrap_or_default(),
            dry_run: !query_dry.is_empty() || !body_dry.is_empty(),
        })
    }
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `canIgnorePDB`: the pod already is, or never was, a disruption.
fn can_ignore_budgets(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending") || budgets::is_terminating(pod)
}

fn status_int(pdb: &Value, field: &str) -> i64 {
    pdb.pointer(&format!("/status/{field}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn budget_cause(message: String) -> Value {
    json!({"reason": "DisruptionBudget", "message": message})
}

/// `checkAndDecrement`: refuses when the budget cannot spend a disruption,
/// otherwise spends one and (unless a dry run) records the pod.
fn check_and_decrement(
    store: &mut Store,
    pdb: &Value,
    pod: &str,
    dry_run: bool,
) -> Result<(), ApiError> {
    let name = objects::name(pdb);
    let generation = objects::meta(pdb)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if status_int(pdb, "observedGeneration") < generation {
        return Err(ApiError::too_many_requests(
            VIOLATION,
            10,
            vec![budget_cause(format!(
                "The disruption budget {name} is still being processed by the server."
            ))],
        ));
    }
    let allowed = status_int(pdb, "disruptionsAllowed");
    if allowed < 0 {
        return Err(ApiError::forbidden_on(
            "policy",
            "poddisruptionbudget",
            name,
            "pdb disruptions allowed is negative",
        ));
    }
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(ApiError::forbidden_on(
            "policy",
            "poddisruptionbudget",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(ApiError::too_many_requests(
            VIOLATION,
            0,
            vec![budget_cause(format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status_int(pdb, "desiredHealthy"),
                status_int(pdb, "currentHealthy")
            ))],
        ));
    }
    if dry_run {
        return Ok(());
    }
    let mut new = pdb.clone();
    new["status"]["disruptionsAllowed"] = json!(allowed - 1);
    let now = chrono::Utc::now();
    if allowed - 1 == 0 {
        disruption::update_condition(&mut new["status"], now);
    }
    if !new["status"]
        .get("disruptedPods")
        .is_some_and(Value::is_object)
    {
        new["status"]["disruptedPods"] = json!({});
    }
    new["status"]["disruptedPods"][pod] = json!(now.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    store.replace(Storage::PodDisruptionBudgets, new);
    Ok(())
}

/// `addConditionAndDeletePod`: the `DisruptionTarget` condition, then the
/// delete (nothing for a dry run).
fn delete_pod(
    store: &mut Store,
    ev: &Eviction,
    pod: &Value,
    graceful: bool,
) -> Result<(), ApiError> {
    if ev.dry_run {
        return Ok(());
    }
    let conflict = |detail: String| ApiError::conflict_on("Pod", "", "Pod", &ev.name, &detail);
    if let Some(uid) = &ev.delete.uid
        && uid != objects::uid(pod)
    {
        return Err(conflict(format!(
            "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
            objects::uid(pod)
        )));
    }
    if let Some(rv) = &ev.delete.resource_version
        && rv != objects::resource_version(pod)
    {
        return Err(conflict(format!(
            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
            objects::resource_version(pod)
        )));
    }
    let mut marked = pod.clone();
    pods::set_condition(
        &mut marked,
        "DisruptionTarget",
        "True",
        Some(("EvictionByEvictionAPI", "Eviction API: evicting")),
    );
    store.replace(Storage::Pods, marked);
    // The preconditions held on the pod just marked.
    let opts = DeleteOptions {
        resource_version: None,
        ..ev.delete.clone()
    };
    let res = resources::canonical(Storage::Pods);
    crud::delete(store, res, &ev.namespace, &ev.name, &opts, graceful)?;
    Ok(())
}

/// Carries out an eviction; the `Success` Status (201) when the pod was
/// evicted (or would be, for a dry run).
pub fn evict(store: &mut Store, ev: &Eviction, graceful: bool) -> Result<Value, ApiError> {
    let res = resources::canonical(Storage::Pods);
    let Some(pod) = store.get(Storage::Pods, &ev.namespace, &ev.name).cloned() else {
        return Err(ApiError::not_found(res, &ev.name));
    };
    if can_ignore_budgets(&pod) {
        delete_pod(store, ev, &pod, graceful)?;
        return Ok(status::success(201, None));
    }
    let covering: Vec<Value> = store
        .objects_in(Storage::PodDisruptionBudgets, &ev.namespace)
        .filter(|pdb| budgets::covers(pdb, &pod))
        .cloned()
        .collect();
    if covering.len() > 1 {
        return Err(ApiError::unreasoned(
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    if let Some(pdb) = covering.first() {
        let always = pdb
            .pointer("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            == Some("AlwaysAllow");
        let met = status_int(pdb, "currentHealthy") >= status_int(pdb, "desiredHealthy")
            && status_int(pdb, "desiredHealthy") > 0;
        let spend = budgets::is_healthy(&pod) || !(always || met);
        if spend {
            check_and_decrement(store, pdb, &ev.name, ev.dry_run)?;
        }
    }
    delete_pod(store, ev, &pod, graceful)?;
    Ok(status::success(201, None))
}
