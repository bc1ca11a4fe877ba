//! Create, update, patch and delete of one object, with the real server's
//! preconditions, immutable metadata, status-subresource split, finalizers and
//! graceful pod deletion. All functions run under the store lock.

use super::budgets;
use super::events;
use super::objects;
use super::patch::{self, PatchType};
use super::pods;
use super::priority;
use super::resources::{Resource, Storage};
use super::status::{self, ApiError, Cause};
use super::store::Store;
use super::typed;
use super::view;
use serde_json::{Value, json};

/// Who is writing: the REST API (all checks) or a test seeding state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Http,
    Test,
}

/// Fills `kind`/`apiVersion` or rejects a mismatch (400).
fn check_type_meta(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the object provided is unrecognized (must be of type map)",
        ));
    };
    let want_av = res.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), json!(want_av));
        }
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), json!(res.kind));
        }
        Some(k) if k == res.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "{k} in version \"{}\" cannot be handled as a {}: the kind in the data ({k}) does not match the expected kind ({})",
                res.version, res.kind, res.kind
            )));
        }
    }
    Ok(())
}

fn check_namespace(res: &Resource, obj: &mut Value, url_ns: &str) -> Result<(), ApiError> {
    let meta = objects::meta_mut(obj);
    if res.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(url_ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

fn validate(res: &Resource, obj: &Value, mut causes: Vec<Cause>) -> Result<(), ApiError> {
    causes.extend(objects::validate_metadata(obj, true));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_object(res, objects::name(obj), causes))
    }
}

/// POST to a collection (or a test `create`). Returns the stored object.
pub fn create(
    store: &mut Store,
    res: &'static Resource,
    url_ns: &str,
    mut obj: Value,
    origin: Origin,
) -> Result<Value, ApiError> {
    check_type_meta(res, &mut obj)?;
    check_namespace(res, &mut obj, url_ns)?;
    let meta = objects::meta_mut(&mut obj);
    let has_name = meta
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    // Admission sees the name before one is generated (`generateName` then).
    let admission_name = if has_name {
        objects::meta_str(&obj, "name")
    } else {
        objects::meta_str(&obj, "generateName")
    }
    .to_string();
    let meta = objects::meta_mut(&mut obj);
    if !has_name {
        let generate = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if generate.is_empty() {
            return Err(ApiError::invalid_object(
                res,
                "",
                vec![Cause {
                    field: "metadata.name".into(),
                    reason: "FieldValueRequired",
                    message: "Required value: name or generateName is required".into(),
                }],
            ));
        }
        let mut generated = format!("{generate}{}", objects::name_suffix());
        let ns = url_ns.to_string();
        while store.get(res.storage, &ns, &generated).is_some() {
            generated = format!("{generate}{}", objects::name_suffix());
        }
        meta.insert("name".into(), json!(generated));
    }
    let has_rv = meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty());
    if has_rv && origin == Origin::Http {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    for f in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(f);
    }
    let has_uid = meta
        .get("uid")
        .and_then(Value::as_str)
        .is_some_and(|u| !u.is_empty());
    if origin == Origin::Http || !has_uid {
        meta.insert("uid".into(), json!(objects::new_uid()));
    }
    if origin == Origin::Http || !meta.contains_key("creationTimestamp") {
        meta.insert("creationTimestamp".into(), json!(objects::now_time()));
    }
    let mut causes = Vec::new();
    match res.storage {
        Storage::Pods => {
            causes.extend(pods::prepare_create(&mut obj, origin == Origin::Http));
            priority::admit_pod(store, &mut obj, &admission_name, origin)?;
        }
        Storage::Events if origin == Origin::Http => {
            causes.extend(events::validate_create(&obj, !res.group.is_empty()));
        }
        Storage::ResourceQuotas if origin == Origin::Http => {
            obj.as_object_mut().expect("object").remove("status");
        }
        Storage::Namespaces => {
            if origin == Origin::Http || obj.get("status").is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
        }
        _ => {}
    }
    causes.extend(typed::prepare_create(res, &mut obj, origin)?);
    validate(res, &obj, causes)?;
    if res.storage == Storage::PriorityClasses {
        priority::admit_class(store, res, &obj, &admission_name, None)?;
    }
    let name = objects::name(&obj).to_string();
    if store.get(res.storage, url_ns, &name).is_some() {
        return Err(ApiError::already_exists(res, &name));
    }
    Ok(store.insert(res.storage, obj))
}

/// The object a create shows the mutating admission webhooks: type and
/// namespace filled in, the scheme's defaults and the built-in mutating plugins
/// (DefaultTolerationSeconds, Priority) applied, as the real server runs them
/// first. No name is generated and no uid or creationTimestamp set yet (that
/// happens when the object is stored), and the status is as sent. Validation
/// waits for [`create`], after the webhooks.
pub fn before_webhooks(
    store: &Store,
    res: &'static Resource,
    url_ns: &str,
    mut obj: Value,
) -> Result<Value, ApiError> {
    check_type_meta(res, &mut obj)?;
    check_namespace(res, &mut obj, url_ns)?;
    if res.storage == Storage::Pods {
        let status = obj.get("status").cloned();
        pods::prepare_create(&mut obj, true);
        match (status, obj.as_object_mut()) {
            (Some(status), _) => obj["status"] = status,
            (None, Some(map)) => {
                map.remove("status");
            }
            (None, None) => {}
        }
        let name = match objects::meta_str(&obj, "name") {
            "" => objects::meta_str(&obj, "generateName"),
            name => name,
        }
        .to_string();
        priority::admit_pod(store, &mut obj, &name, Origin::Http)?;
    }
    Ok(obj)
}

fn is_set(obj: &Value, field: &str) -> bool {
    objects::meta(obj)
        .and_then(|m| m.get(field))
        .is_some_and(|v| !v.is_null())
}

/// Applies the rules of an update of `old` to `new` (both in the view of `res`)
/// and stores the result. `sub` is `Some("status")` for the status subresource.
fn commit_update(
    store: &mut Store,
    res: &'static Resource,
    old: &Value,
    mut new: Value,
    sub: Option<&str>,
) -> Result<Value, ApiError> {
    let ns = objects::namespace(old).to_string();
    let name = objects::name(old).to_string();
    check_type_meta(res, &mut new)?;
    let new_name = objects::name(&new).to_string();
    if new_name.is_empty() {
        objects::meta_mut(&mut new).insert("name".into(), json!(name));
    } else if new_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(res, &mut new, &ns)?;
    let new_uid = objects::uid(&new);
    if !new_uid.is_empty() && new_uid != objects::uid(old) {
        return Err(ApiError::precondition(
            res,
            &ns,
            &name,
            &format!(
                "UID in precondition: {new_uid}, UID in object meta: {}",
                objects::uid(old)
            ),
        ));
    }
    let new_rv = objects::resource_version(&new);
    if !new_rv.is_empty() && new_rv != objects::resource_version(old) {
        return Err(ApiError::modified(res, &name));
    }
    // System fields cannot be changed by an update.
    {
        let old_meta = objects::meta(old).cloned().unwrap_or_default();
        let meta = objects::meta_mut(&mut new);
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_meta.get(f) {
                Some(v) => {
                    meta.insert(f.into(), v.clone());
                }
                None => {
                    meta.remove(f);
                }
            }
        }
        meta.remove("selfLink");
        meta.insert(
            "resourceVersion".into(),
            old_meta
                .get("resourceVersion")
                .cloned()
                .unwrap_or(json!("")),
        );
    }
    if sub == Some("status") {
        // Only status (and labels/annotations) change through `status`.
        let mut merged = old.clone();
        match new.get("status") {
            Some(s) => merged["status"] = s.clone(),
            None => {
                merged.as_object_mut().expect("object").remove("status");
            }
        }
        let new_meta = objects::meta(&new).cloned().unwrap_or_default();
        let meta = objects::meta_mut(&mut merged);
        // Custom resources' `/status` copies nothing but status; the built-in
        // types also take labels and annotations.
        let carried: &[&str] = if res.custom {
            &[]
        } else {
            &["labels", "annotations"]
        };
        for &f in carried {
            match new_meta.get(f) {
                Some(v) => {
                    meta.insert(f.into(), v.clone());
                }
                None => {
                    meta.remove(f);
                }
            }
        }
        new = merged;
    } else if res.status_subresource {
        let map = new.as_object_mut().expect("object");
        match old.get("status") {
            Some(s) => {
                map.insert("status".into(), s.clone());
            }
            None => {
                map.remove("status");
            }
        }
        if res.storage == Storage::Pods {
            priority::admit_pod_update(old, &mut new);
            pods::validate_update(old, &new)?;
        }
    }
    let causes = typed::prepare_update(res, old, &mut new, sub)?;
    validate(res, &new, causes)?;
    if res.storage == Storage::PriorityClasses {
        priority::admit_class(store, res, &new, &name, Some(old))?;
    }
    // The last finalizer of an object being deleted is gone: delete it.
    let finalizers_empty = objects::meta(&new)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .is_none_or(|f| f.is_empty());
    let grace_zero = objects::meta(old)
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        == Some(0);
    if is_set(old, "deletionTimestamp") && grace_zero && finalizers_empty {
        store.replace(res.storage, new);
        return Ok(store
            .remove(res.storage, &ns, &name)
            .expect("object exists"));
    }
    Ok(store.replace(res.storage, new))
}

/// PUT. Returns the HTTP status (200, or 201 when it created) and the stored
/// object.
pub fn update(
    store: &mut Store,
    res: &'static Resource,
    ns: &str,
    name: &str,
    new: Value,
    sub: Option<&str>,
) -> Result<(u16, Value), ApiError> {
    let mut new = new;
    if !new.is_object() {
        return Err(ApiError::bad_request(
            "the object provided is unrecognized (must be of type map)",
        ));
    }
    let Some(old) = store.get(res.storage, ns, name).cloned() else {
        if res.create_on_update && sub.is_none() {
            if objects::name(&new).is_empty() {
                objects::meta_mut(&mut new).insert("name".into(), json!(name));
            }
            if objects::name(&new) != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    objects::name(&new)
                )));
            }
            objects::meta_mut(&mut new).remove("resourceVersion");
            return create(store, res, ns, new, Origin::Http).map(|o| (201, o));
        }
        return Err(ApiError::not_found(res, name));
    };
    if res.requires_resource_version_on_update() && objects::resource_version(&new).is_empty() {
        return Err(budgets::unconditional_update(res, name));
    }
    let old = view::view(res, &old);
    commit_update(store, res, &old, new, sub).map(|o| (200, o))
}

/// PATCH. Server-side apply (approximated as a strategic merge) creates a
/// missing object.
pub fn patch(
    store: &mut Store,
    res: &'static Resource,
    ns: &str,
    name: &str,
    body: &[u8],
    ty: PatchType,
    sub: Option<&str>,
) -> Result<(u16, Value), ApiError> {
    let Some(old) = store.get(res.storage, ns, name).cloned() else {
        if ty == PatchType::Apply && sub.is_none() {
            let mut obj: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            if !obj.is_object() {
                return Err(ApiError::bad_request("error decoding YAML: not an object"));
            }
            if objects::name(&obj).is_empty() {
                objects::meta_mut(&mut obj).insert("name".into(), json!(name));
            }
            if objects::name(&obj) != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    objects::name(&obj)
                )));
            }
            return create(store, res, ns, obj, Origin::Http).map(|o| (201, o));
        }
        return Err(ApiError::not_found(res, name));
    };
    let old = view::view(res, &old);
    let patched = patch::apply(&old, body, ty)?;
    commit_update(store, res, &old, patched, sub).map(|o| (200, o))
}

/// DeleteOptions (body or query).
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl DeleteOptions {
    pub fn from_body(body: &Value) -> Self {
        let s = |p: &str| {
            body.pointer(p)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        DeleteOptions {
            grace_period_seconds: body.get("gracePeriodSeconds").and_then(Value::as_i64),
            uid: s("/preconditions/uid"),
            resource_version: s("/preconditions/resourceVersion"),
        }
    }
}

/// DELETE. `graceful_pods`: pods on a node get a deletionTimestamp instead of
/// vanishing (the kubelet, i.e. the test, finishes them). Returns the response
/// body in stored form (the caller renders it).
pub fn delete(
    store: &mut Store,
    res: &'static Resource,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    graceful_pods: bool,
) -> Result<DeleteOutcome, ApiError> {
    let Some(old) = store.get(res.storage, ns, name).cloned() else {
        return Err(ApiError::not_found(res, name));
    };
    if let Some(uid) = &opts.uid
        && uid != objects::uid(&old)
    {
        return Err(ApiError::precondition(
            res,
            ns,
            name,
            &format!(
                "UID in precondition: {uid}, UID in object meta: {}",
                objects::uid(&old)
            ),
        ));
    }
    if let Some(rv) = &opts.resource_version
        && rv != objects::resource_version(&old)
    {
        return Err(ApiError::precondition(
            res,
            ns,
            name,
            &format!(
                "ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                objects::resource_version(&old)
            ),
        ));
    }
    let grace = if res.storage == Storage::Pods && graceful_pods {
        pods::grace_period(&old, opts.grace_period_seconds)
    } else {
        0
    };
    let has_finalizers = objects::meta(&old)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if grace > 0 || has_finalizers {
        return Ok(DeleteOutcome::Pending(mark_terminating(
            store, res, &old, grace,
        )));
    }
    let deleted = store.remove(res.storage, ns, name).expect("object exists");
    Ok(DeleteOutcome::Deleted(deleted))
}

pub enum DeleteOutcome {
    /// Gone; the last state.
    Deleted(Value),
    /// Waiting for finalizers or the kubelet; the updated object.
    Pending(Value),
}

impl DeleteOutcome {
    /// The DELETE response body in the view of `res`.
    pub fn response(&self, res: &Resource) -> Value {
        match self {
            DeleteOutcome::Pending(obj) => view::render(res, obj),
            DeleteOutcome::Deleted(obj) if res.returns_deleted_object => view::render(res, obj),
            DeleteOutcome::Deleted(obj) => status::success(
                200,
                Some(status::delete_details(
                    res,
                    objects::name(obj),
                    objects::uid(obj),
                )),
            ),
        }
    }
}

/// Sets deletionTimestamp (now + grace) unless an earlier one is already set.
pub fn mark_terminating(store: &mut Store, res: &Resource, old: &Value, grace: i64) -> Value {
    let mut new = old.clone();
    let current_grace = objects::meta(old)
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64);
    if is_set(old, "deletionTimestamp") && current_grace.is_some_and(|g| g <= grace) {
        return old.clone();
    }
    let meta = objects::meta_mut(&mut new);
    meta.insert("deletionTimestamp".into(), json!(objects::time_in(grace)));
    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    store.replace(res.storage, new)
}
