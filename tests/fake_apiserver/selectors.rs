//! Label and field selectors (`labelSelector=`, `fieldSelector=` query
//! parameters), with the real server's syntax, and `metav1.LabelSelector`
//! objects (PodDisruptionBudget selectors).

use super::objects;
use super::resources::Resource;
use super::status::Cause;
use serde_json::{Value, json};

#[derive(Clone, Debug)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    terms.push(cur);
    terms
}

fn check_key(k: &str) -> Result<String, String> {
    if objects::is_qualified_name(k) {
        Ok(k.to_string())
    } else {
        Err(format!(
            "unable to parse requirement: <nil>: Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn check_value(v: &str) -> Result<String, String> {
    if objects::is_label_value(v) {
        Ok(v.to_string())
    } else {
        Err(format!(
            "unable to parse requirement: values[0][key]: Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for term in split_terms(s) {
            let term = term.trim();
            if term.is_empty() {
                return Err(format!("found '', expected: identifier in selector {s:?}"));
            }
            if let Some(open) = term.find('(') {
                let head = term[..open].trim();
                let Some(inner) = term[open + 1..].strip_suffix(')') else {
                    return Err(format!("found '{term}', expected: ')'"));
                };
                let values = inner
                    .split(',')
                    .map(|v| check_value(v.trim()))
                    .collect::<Result<Vec<_>, _>>()?;
                let (key, op) = head
                    .rsplit_once(char::is_whitespace)
                    .map(|(k, op)| (k.trim(), op))
                    .ok_or_else(|| format!("found '{term}', expected: in, notin"))?;
                let key = check_key(key)?;
                match op {
                    "in" => reqs.push(Requirement::In(key, values)),
                    "notin" => reqs.push(Requirement::NotIn(key, values)),
                    _ => return Err(format!("found '{op}', expected: in, notin")),
                }
            } else if let Some(key) = term.strip_prefix('!') {
                reqs.push(Requirement::NotExists(check_key(key.trim())?));
            } else if let Some((k, v)) = term.split_once("!=") {
                reqs.push(Requirement::NotEq(
                    check_key(k.trim())?,
                    check_value(v.trim())?,
                ));
            } else if let Some((k, v)) = term.split_once("==") {
                reqs.push(Requirement::Eq(
                    check_key(k.trim())?,
                    check_value(v.trim())?,
                ));
            } else if let Some((k, v)) = term.split_once('=') {
                reqs.push(Requirement::Eq(
                    check_key(k.trim())?,
                    check_value(v.trim())?,
                ));
            } else {
                reqs.push(Requirement::Exists(check_key(term)?));
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as
    /// `LabelSelectorAsSelector` reads it: `{}` matches everything. The
    /// caller decides what an absent (null) selector means; on the real server
    /// it matches nothing.
    pub fn from_api(selector: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("{k}: value is not a string"))?;
                reqs.push(Requirement::Eq(check_key(k)?, check_value(v)?));
            }
        }
        let exprs = selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for e in exprs {
            let key = check_key(e.get("key").and_then(Value::as_str).unwrap_or(""))?;
            let values = e
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .map(|v| check_value(v.as_str().unwrap_or("")))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?
                .unwrap_or_default();
            let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
            reqs.push(match op {
                "In" if !values.is_empty() => Requirement::In(key, values),
                "NotIn" if !values.is_empty() => Requirement::NotIn(key, values),
                "Exists" if values.is_empty() => Requirement::Exists(key),
                "DoesNotExist" if values.is_empty() => Requirement::NotExists(key),
                _ => return Err(format!("{op:?} is not a valid label selector operator")),
            });
        }
        Ok(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let labels = objects::labels(obj);
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

/// `ValidateLabelSelector` of a `metav1.LabelSelector` object at `field`
/// (`spec.selector`): label keys and values, operators and their values.
pub fn validate_api(selector: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let at = format!("{field}.matchLabels");
        for (k, v) in labels {
            if !objects::is_qualified_name(k) {
                causes.push(Cause::invalid(&at, &json!(k), objects::KEY_MSG));
            }
            if !v.as_str().is_some_and(objects::is_label_value) {
                causes.push(Cause::invalid(&at, v, objects::VALUE_MSG));
            }
        }
    }
    let exprs = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, e) in exprs.iter().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        let values: Vec<&Value> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|vs| vs.iter().collect())
            .unwrap_or_default();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" | "NotIn" if values.is_empty() => causes.push(Cause {
                field: format!("{at}.values"),
                reason: "FieldValueRequired",
                message: "Required value: must be specified when `operator` is 'In' or 'NotIn'"
                    .into(),
            }),
            "Exists" | "DoesNotExist" if !values.is_empty() => causes.push(Cause::forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => causes.push(Cause::invalid(
                &format!("{at}.operator"),
                &json!(op),
                "not a valid selector operator",
            )),
        }
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        if !objects::is_qualified_name(key) {
            causes.push(Cause::invalid(
                &format!("{at}.key"),
                &json!(key),
                objects::KEY_MSG,
            ));
        }
        for (j, v) in values.iter().enumerate() {
            if !v.as_str().is_some_and(objects::is_label_value) {
                causes.push(Cause::invalid(
                    &format!("{at}.values[{j}]"),
                    v,
                    objects::VALUE_MSG,
                ));
            }
        }
    }
    causes
}

/// A parsed field selector (`a=b,c!=d`).
#[derive(Clone, Debug, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// The field a selector label reads on the stored object.
fn field_path(label: &str) -> String {
    if let Some(rest) = label.strip_prefix("regarding.") {
        return format!("involvedObject.{rest}");
    }
    match label {
        "reportingController" => "reportingComponent".into(),
        "source" => "source.component".into(),
        other => other.into(),
    }
}

impl FieldSelector {
    pub fn parse(s: &str, res: &Resource, label_selector: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for term in s.split(',') {
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !res.field_labels.contains(&field) {
                return Err(format!(
                    "Unable to find \"{}, Resource={}\" that match label selector \"{label_selector}\", field selector \"{s}\": field label not supported: {field}",
                    if res.group.is_empty() {
                        format!("/{}", res.version)
                    } else {
                        format!("{}/{}", res.group, res.version)
                    },
                    res.plural
                ));
            }
            reqs.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `obj` is in core form for events (field labels use core spellings).
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, eq, value)| {
            let mut actual = objects::field_string(obj, &field_path(field));
            if actual.is_empty()
                && matches!(field.as_str(), "spec.hostNetwork" | "spec.unschedulable")
            {
                actual = "false".into();
            }
            (actual == *value) == *eq
        })
    }
}

/// Selectors plus the namespace a request is scoped to.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn has_selectors(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }

    /// `obj` in stored form; events are compared in core form.
    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && objects::namespace(obj) != ns
        {
            return false;
        }
        if !self.labels.matches(obj) {
            return false;
        }
        if self.fields.is_empty() {
            return true;
        }
        if obj.get("apiVersion").and_then(Value::as_str) == Some("events.k8s.io/v1") {
            self.fields.matches(&super::events::to_core(obj))
        } else {
            self.fields.matches(obj)
        }
    }
}
