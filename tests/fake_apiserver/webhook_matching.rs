//! Which mutating webhooks a request is sent to, decided as the real API
//! server's webhook dispatcher decides it (`admission/plugin/webhook/predicates`
//! and `matchconditions`): every rule field, the namespace and object
//! selectors, then the CEL `matchConditions`. A webhook that does not match is
//! skipped silently; only a condition that cannot be evaluated is a failure,
//! left to the webhook's `failurePolicy`.

use super::resources::Resource;
use super::selectors::LabelSelector;
use cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

/// The request as the rules see it.
pub struct Target<'a> {
    pub res: &'static Resource,
    /// `CREATE` or `UPDATE`.
    pub operation: &'a str,
    /// `""` for the main resource, `status` for `pods/status`.
    pub subresource: &'a str,
}

fn strings(list: &Value) -> impl Iterator<Item = &str> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn listed(list: &Value, want: &str) -> bool {
    strings(list).any(|s| s == "*" || s == want)
}

/// `resources` entries: `pods` is the main resource only, `pods/*` every
/// subresource, `*` every main resource, `*/*` everything, `*/status` the
/// status subresource of any resource.
fn resource_listed(list: &Value, resource: &str, subresource: &str) -> bool {
    strings(list).any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        let res_ok = res == "*" || res == resource;
        let sub_ok = if subresource.is_empty() {
            sub.is_empty()
        } else {
            sub == "*" || sub == subresource
        };
        res_ok && sub_ok
    })
}

/// One `RuleWithOperations` against the request.
fn rule_matches(rule: &Value, t: &Target) -> bool {
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Namespaced" => t.res.namespaced,
        "Cluster" => !t.res.namespaced,
        _ => true,
    };
    scope_ok
        && listed(&rule["operations"], t.operation)
        && listed(&rule["apiGroups"], t.res.group)
        && listed(&rule["apiVersions"], t.res.version)
        && resource_listed(&rule["resources"], t.res.plural, t.subresource)
}

/// Whether any of the webhook's rules covers the request.
pub fn rules_match(hook: &Value, t: &Target) -> bool {
    hook["rules"]
        .as_array()
        .is_some_and(|rules| rules.iter().any(|r| rule_matches(r, t)))
}

/// A selector absent or `{}` selects everything (the v1 default); one that
/// does not parse selects nothing (the real server refuses to store it).
fn selects(selector: &Value, object: &Value) -> bool {
    if selector.is_null() {
        return true;
    }
    LabelSelector::from_api(selector).is_ok_and(|s| s.matches(object))
}

/// `namespaceSelector` against the namespace's labels (cluster-scoped
/// requests are not filtered by it) and `objectSelector` against the new or
/// the old object's labels (either is enough, as on the real server).
pub fn selectors_match(
    hook: &Value,
    t: &Target,
    namespace: Option<&Value>,
    object: &Value,
    old_object: Option<&Value>,
) -> bool {
    let namespace_ok =
        !t.res.namespaced || namespace.is_some_and(|ns| selects(&hook["namespaceSelector"], ns));
    let selector = &hook["objectSelector"];
    let object_ok =
        selects(selector, object) || old_object.is_some_and(|old| selects(selector, old));
    namespace_ok && object_ok
}

fn cel_value(value: &Value) -> Result<CelValue, String> {
    cel::to_value(value).map_err(|e| format!("cannot convert to CEL: {e}"))
}

/// Evaluates `matchConditions` with the variables the real server binds
/// (`object`, `oldObject`, `request`; no `authorizer`). `Ok(false)` as soon as
/// one condition is false; an error names the condition that failed.
pub fn conditions_hold(
    hook: &Value,
    object: &Value,
    old_object: Option<&Value>,
    request: &Value,
) -> Result<bool, String> {
    let Some(conditions) = hook["matchConditions"].as_array() else {
        return Ok(true);
    };
    let mut ctx = Context::default();
    ctx.add_variable_from_value("object", cel_value(object)?);
    ctx.add_variable_from_value("oldObject", cel_value(old_object.unwrap_or(&Value::Null))?);
    ctx.add_variable_from_value("request", cel_value(request)?);
    let mut errors = Vec::new();
    for condition in conditions {
        let name = condition["name"].as_str().unwrap_or("");
        let expression = condition["expression"].as_str().unwrap_or("");
        let outcome = Program::compile(expression)
            .map_err(|e| format!("compilation failed: {e}"))
            .and_then(|p| p.execute(&ctx).map_err(|e| e.to_string()));
        match outcome {
            Ok(CelValue::Bool(false)) => return Ok(false),
            Ok(CelValue::Bool(true)) => {}
            Ok(other) => errors.push(format!(
                "matchCondition '{name}': expected a bool, got {other:?}"
            )),
            Err(e) => errors.push(format!("matchCondition '{name}': {e}")),
        }
    }
    if errors.is_empty() {
        Ok(true)
    } else {
        Err(errors.join(", "))
    }
}

/// The labels of a namespace the store does not hold: only the one the API
/// server sets on every namespace.
pub fn unstored_namespace(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}})
}
