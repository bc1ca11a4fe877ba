//! PriorityClasses (`scheduling.k8s.io/v1`) and the `Priority` admission
//! plugin: the two system classes the server creates at startup, the class
//! defaults and validation, at most one `globalDefault` class, system classes
//! that cannot be deleted, and pods getting `spec.priority` and
//! `spec.preemptionPolicy` from their class (or from the global default).

use super::crud::Origin;
use super::objects;
use super::resources::{Resource, Storage};
use super::status::{ApiError, Cause};
use super::store::Store;
use serde_json::{Value, json};

/// `scheduling.HighestUserDefinablePriority`.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// `scheduling.SystemCriticalPriority`.
const SYSTEM_CRITICAL_PRIORITY: i64 = 2 * HIGHEST_USER_DEFINABLE_PRIORITY;

const SYSTEM_PREFIX: &str = "system-";

/// The classes the real server creates at startup, in its order:
/// (name, value, description).
const SYSTEM_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        SYSTEM_CRITICAL_PRIORITY + 1000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        SYSTEM_CRITICAL_PRIORITY,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

const PREEMPTION_POLICIES: [&str; 2] = ["PreemptLowerPriority", "Never"];

/// The system classes as the real server creates them at startup.
pub fn system_classes() -> Vec<Value> {
    SYSTEM_CLASSES
        .iter()
        .map(|(name, value, description)| {
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": description,
            })
        })
        .collect()
}

fn cannot_handle(res: &Resource, field: &str, got: &Value, go_type: &str) -> ApiError {
    let kind = match got {
        Value::Number(n) => format!("number {n}"),
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    };
    ApiError::bad_request(format!(
        "{} in version \"{}\" cannot be handled as a {}: json: cannot unmarshal {kind} into Go struct field {}.{field} of type {go_type}",
        res.kind, res.version, res.kind, res.kind
    ))
}

/// Decoding and defaulting of a PriorityClass body (create and update):
/// `value` an int32 (0 when absent, like the Go zero value), `globalDefault` a
/// bool, `preemptionPolicy` defaulted to `PreemptLowerPriority`.
fn decode_class(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
    let map = obj.as_object_mut().expect("object");
    match map.get("value") {
        None | Some(Value::Null) => {
            map.insert("value".into(), json!(0));
        }
        Some(v) => {
            if v.as_i64().and_then(|n| i32::try_from(n).ok()).is_none() {
                return Err(cannot_handle(res, "value", v, "int32"));
            }
        }
    }
    if let Some(v) = map.get("globalDefault")
        && !v.is_boolean()
        && !v.is_null()
    {
        return Err(cannot_handle(res, "globalDefault", v, "bool"));
    }
    if map.get("preemptionPolicy").is_none_or(Value::is_null) {
        map.insert("preemptionPolicy".into(), json!("PreemptLowerPriority"));
    }
    Ok(())
}

fn value(obj: &Value) -> i64 {
    obj.get("value").and_then(Value::as_i64).unwrap_or(0)
}

fn global_default(obj: &Value) -> bool {
    obj.get("globalDefault").and_then(Value::as_bool) == Some(true)
}

/// `IsKnownSystemPriorityClass`: the error text when `name` (with the system
/// prefix) is not exactly one of the system classes.
fn system_class_error(name: &str, value: i64, global_default: bool) -> Option<String> {
    match SYSTEM_CLASSES.iter().find(|(n, ..)| *n == name) {
        None => Some(format!("{name} is not a known system priority class")),
        Some((n, v, _)) if *v != value => Some(format!("value of {n} PriorityClass must be {v}")),
        Some((n, ..)) if global_default => {
            Some(format!("globalDefault of {n} PriorityClass must be false"))
        }
        Some(_) => None,
    }
}

/// Create: decoding, defaults and `ValidatePriorityClass`. Returns validation
/// causes.
pub fn prepare_create(res: &Resource, obj: &mut Value) -> Result<Vec<Cause>, ApiError> {
    decode_class(res, obj)?;
    let mut causes = Vec::new();
    let name = objects::name(obj);
    if name.starts_with(SYSTEM_PREFIX) {
        if let Some(err) = system_class_error(name, value(obj), global_default(obj)) {
            causes.push(Cause::forbidden(
                "metadata.name",
                &format!(
                    "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {err}"
                ),
            ));
        }
    } else if value(obj) > HIGHEST_USER_DEFINABLE_PRIORITY {
        causes.push(Cause::forbidden(
            "value",
            &format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    match obj.get("preemptionPolicy").and_then(Value::as_str) {
        Some(p) if PREEMPTION_POLICIES.contains(&p) => {}
        Some("") => causes.push(Cause::required("preemptionPolicy")),
        Some(p) => causes.push(Cause::not_supported(
            "preemptionPolicy",
            p,
            &PREEMPTION_POLICIES,
        )),
        None => causes.push(Cause::required("preemptionPolicy")),
    }
    Ok(causes)
}

/// Update: decoding, defaults and `ValidatePriorityClassUpdate` (`value` and
/// `preemptionPolicy` are immutable; nothing else is checked).
pub fn prepare_update(
    res: &Resource,
    old: &Value,
    new: &mut Value,
) -> Result<Vec<Cause>, ApiError> {
    decode_class(res, new)?;
    let mut causes = Vec::new();
    if value(old) != value(new) {
        causes.push(Cause::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    if old.get("preemptionPolicy") != new.get("preemptionPolicy") {
        causes.push(Cause::invalid(
            "preemptionPolicy",
            new.get("preemptionPolicy").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
    Ok(causes)
}

/// The class pods without a `priorityClassName` get: the `globalDefault` one
/// (the lowest value if a race left more than one).
fn default_class(store: &Store) -> Option<&Value> {
    store
        .objects(Storage::PriorityClasses)
        .filter(|c| global_default(c))
        .min_by_key(|c| value(c))
}

/// The validating half of the plugin: a class may become `globalDefault` only
/// while no other class is (403). `old` is None on create; `name` is the
/// name the request carries (`generateName` when it has none).
pub fn admit_class(
    store: &Store,
    res: &Resource,
    obj: &Value,
    name: &str,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if !global_default(obj) {
        return Ok(());
    }
    let Some(current) = default_class(store) else {
        return Ok(());
    };
    let current = objects::name(current);
    if old.is_none() || current != objects::name(obj) {
        return Err(ApiError::forbidden(
            res,
            name,
            &format!(
                "PriorityClass {current} is already marked as default. Only one default can exist"
            ),
        ));
    }
    Ok(())
}

/// A DELETE of a system class is refused (403); deletecollection is not
/// checked, like on the real server.
pub fn check_delete(res: &Resource, name: &str) -> Result<(), ApiError> {
    if res.storage == Storage::PriorityClasses && SYSTEM_CLASSES.iter().any(|(n, ..)| *n == name) {
        return Err(ApiError::forbidden(
            res,
            name,
            "this is a system priority class and cannot be deleted",
        ));
    }
    Ok(())
}

/// The mutating half of the plugin on a pod create: `spec.priority` and
/// `spec.preemptionPolicy` from the named class, or from the global default
/// class (whose name is then set), or 0 and `PreemptLowerPriority`. Over HTTP a
/// missing class or a conflicting `priority`/`preemptionPolicy` in the pod is
/// 403; a test seeding state gets the pod as written instead.
pub fn admit_pod(
    store: &Store,
    pod: &mut Value,
    name: &str,
    origin: Origin,
) -> Result<(), ApiError> {
    let pods = super::resources::canonical(Storage::Pods);
    let spec = &pod["spec"];
    let class_name = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let (class, priority, policy) = if class_name.is_empty() {
        match default_class(store) {
            Some(c) => (
                objects::name(c).to_string(),
                value(c),
                c.get("preemptionPolicy")
                    .and_then(Value::as_str)
                    .map(String::from),
            ),
            None => (String::new(), 0, Some("PreemptLowerPriority".to_string())),
        }
    } else {
        match store.get(Storage::PriorityClasses, "", &class_name) {
            Some(c) => (
                class_name.clone(),
                value(c),
                c.get("preemptionPolicy")
                    .and_then(Value::as_str)
                    .map(String::from),
            ),
            None if origin == Origin::Http => {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    &format!("no PriorityClass with name {class_name} was found"),
                ));
            }
            None => return Ok(()),
        }
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        if origin == Origin::Http {
            return Err(ApiError::forbidden(
                pods,
                name,
                &format!(
                    "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
                ),
            ));
        }
        return Ok(());
    }
    if let (Some(given), Some(computed)) = (
        spec.get("preemptionPolicy").and_then(Value::as_str),
        policy.as_deref(),
    ) && given != computed
    {
        if origin == Origin::Http {
            return Err(ApiError::forbidden(
                pods,
                name,
                &format!(
                    "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name"
                ),
            ));
        }
        return Ok(());
    }
    let spec = pod["spec"].as_object_mut().expect("spec is an object");
    if !class.is_empty() {
        spec.insert("priorityClassName".into(), json!(class));
    }
    spec.insert("priority".into(), json!(priority));
    if let Some(p) = policy {
        spec.insert("preemptionPolicy".into(), json!(p));
    }
    Ok(())
}

/// The plugin on a pod update: an update that leaves out `priority` or
/// `preemptionPolicy` keeps the stored ones.
pub fn admit_pod_update(old: &Value, new: &mut Value) {
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        if spec.get(field).is_none_or(Value::is_null)
            && let Some(v) = old.pointer(&format!("/spec/{field}"))
        {
            spec.insert(field.into(), v.clone());
        }
    }
}
