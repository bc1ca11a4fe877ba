//! PodDisruptionBudgets (`policy/v1`): decoding of `minAvailable` and
//! `maxUnavailable` (int or percent), spec and status validation, the status a
//! new budget starts with, which pods a budget selects and which of them count
//! as healthy.

use super::crud::Origin;
use super::objects;
use super::resources::Resource;
use super::selectors::{self, LabelSelector};
use super::status::{ApiError, Cause};
use serde_json::{Value, json};

const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

const EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

/// The status `PrepareForCreate` leaves (the zero `PodDisruptionBudgetStatus`).
pub fn zero_status() -> Value {
    json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
}

fn kind_of(v: &Value) -> String {
    match v {
        Value::Number(n) => format!("number {n}"),
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// `intstr.IntOrString` fields must be a string or an int32 (400 otherwise).
fn decode(res: &Resource, obj: &Value) -> Result<(), ApiError> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    for field in ["minAvailable", "maxUnavailable"] {
        let ok = match spec.get(field) {
            None | Some(Value::Null) | Some(Value::String(_)) => true,
            Some(v) => v.as_i64().and_then(|n| i32::try_from(n).ok()).is_some(),
        };
        if !ok {
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: json: cannot unmarshal {} into Go value of type int32",
                res.kind,
                res.version,
                res.kind,
                kind_of(&spec[field])
            )));
        }
    }
    Ok(())
}

fn set(spec: &Value, field: &str) -> bool {
    spec.get(field).is_some_and(|v| !v.is_null())
}

/// How the real server prints an `intstr.IntOrString` value in a field error.
fn go_int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
fn validate_int_or_percent(field: &str, v: &Value, causes: &mut Vec<Cause>) {
    let invalid = |detail: &str| Cause {
        field: field.into(),
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {}: {detail}", go_int_or_string(v)),
    };
    match v {
        Value::String(s) => {
            let digits = s.strip_suffix('%').unwrap_or("");
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                causes.push(invalid(PERCENT_MSG));
            } else if digits.parse::<u64>().map_or(true, |p| p > 100) {
                causes.push(invalid("must not be greater than 100%"));
            }
        }
        other => {
            let n = other.as_i64().unwrap_or(0);
            if n < 0 {
                causes.push(Cause::invalid(
                    field,
                    &json!(n),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

/// `ValidatePodDisruptionBudgetSpec`. Neither `minAvailable` nor
/// `maxUnavailable` is allowed (policy/v1 has no default).
fn validate_spec(obj: &Value) -> Vec<Cause> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let mut causes = Vec::new();
    if set(&spec, "minAvailable") && set(&spec, "maxUnavailable") {
        // The internal Go struct, printed with %#v (the addresses are made up).
        let ptr = |f: &str, ty: &str, addr: &str| {
            if set(&spec, f) {
                format!("(*{ty})({addr})")
            } else {
                format!("(*{ty})(nil)")
            }
        };
        let shown = format!(
            "policy.PodDisruptionBudgetSpec{{MinAvailable:{}, Selector:{}, MaxUnavailable:{}, UnhealthyPodEvictionPolicy:{}}}",
            ptr("minAvailable", "intstr.IntOrString", "0xc000a1c2a0"),
            ptr("selector", "v1.LabelSelector", "0xc000a1c2c0"),
            ptr("maxUnavailable", "intstr.IntOrString", "0xc000a1c2e0"),
            ptr(
                "unhealthyPodEvictionPolicy",
                "policy.UnhealthyPodEvictionPolicyType",
                "0xc000a1c300"
            ),
        );
        causes.push(Cause {
            field: "spec".into(),
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {shown}: minAvailable and maxUnavailable cannot be both set"
            ),
        });
    }
    for field in ["minAvailable", "maxUnavailable"] {
        if set(&spec, field) {
            validate_int_or_percent(&format!("spec.{field}"), &spec[field], &mut causes);
        }
    }
    if let Some(sel) = spec.get("selector").filter(|s| s.is_object()) {
        causes.extend(selectors::validate_api(sel, "spec.selector"));
    }
    if let Some(p) = spec
        .get("unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        && !EVICTION_POLICIES.contains(&p)
    {
        causes.push(Cause::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            p,
            &EVICTION_POLICIES,
        ));
    }
    causes
}

/// `ValidatePodDisruptionBudgetStatusUpdate` (policy/v1): counts are not
/// negative.
fn validate_status(obj: &Value) -> Vec<Cause> {
    let status = obj.get("status").cloned().unwrap_or(json!({}));
    [
        "disruptionsAllowed",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
    ]
    .into_iter()
    .filter_map(|f| {
        let n = status.get(f).and_then(Value::as_i64).unwrap_or(0);
        (n < 0).then(|| {
            Cause::invalid(
                &format!("status.{f}"),
                &json!(n),
                "must be greater than or equal to 0",
            )
        })
    })
    .collect()
}

/// Create: decoding, the zero status (a create cannot set status; a test
/// seeding state may) and spec validation. Returns validation causes.
pub fn prepare_create(
    res: &Resource,
    obj: &mut Value,
    origin: Origin,
) -> Result<Vec<Cause>, ApiError> {
    decode(res, obj)?;
    if origin == Origin::Http || !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = zero_status();
    }
    Ok(validate_spec(obj))
}

/// Update of the main resource (spec validation) or of `status` (status
/// validation). Returns validation causes.
pub fn prepare_update(
    res: &Resource,
    new: &mut Value,
    sub: Option<&str>,
) -> Result<Vec<Cause>, ApiError> {
    decode(res, new)?;
    Ok(if sub == Some("status") {
        validate_status(new)
    } else {
        validate_spec(new)
    })
}

/// The 422 a PUT without `metadata.resourceVersion` gets
/// (`AllowUnconditionalUpdate` is false for PodDisruptionBudgets).
pub fn unconditional_update(res: &Resource, name: &str) -> ApiError {
    ApiError::invalid(
        &res.qualified(),
        res.group,
        res.plural,
        name,
        vec![Cause {
            field: "metadata.resourceVersion".into(),
            reason: "FieldValueInvalid",
            message: "Invalid value: 0x0: must be specified for an update".into(),
        }],
    )
}

/// The budget's selector as `LabelSelectorAsSelector` reads it: None (matches
/// no pod) when absent or unreadable, everything for `{}`.
pub fn selector(pdb: &Value) -> Option<LabelSelector> {
    pdb.pointer("/spec/selector")
        .filter(|s| s.is_object())
        .and_then(|s| LabelSelector::from_api(s).ok())
}

/// Whether `pdb` covers `pod`: same namespace, selector matches.
pub fn covers(pdb: &Value, pod: &Value) -> bool {
    objects::namespace(pdb) == objects::namespace(pod)
        && selector(pdb).is_some_and(|s| s.matches(pod))
}

/// Whether `pod` counts as healthy (`IsPodReady`: its `Ready` condition is
/// True). The fake has no kubelet, so a pod with no `Ready` condition at all
/// counts as ready when its phase is Running.
pub fn is_healthy(pod: &Value) -> bool {
    let ready = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        });
    match ready {
        Some(c) => c.get("status").and_then(Value::as_str) == Some("True"),
        None => pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running"),
    }
}

/// Whether `pod` is being deleted.
pub fn is_terminating(pod: &Value) -> bool {
    objects::meta(pod)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}
