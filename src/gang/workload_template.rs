//! A native PodGroup completed from the Workload template it was made from.
//!
//! Kubernetes' workload controllers create each PodGroup from one of a
//! Workload's `podGroupTemplates` and are expected to copy the template's
//! policy, disruption mode and priority into it. A PodGroup written by hand, or
//! by a controller that copies less, may leave some of them out; the Workload
//! then still says what was meant. What the PodGroup says itself always wins:
//! the template only fills what it leaves unsaid.

use serde_json::{Map, Value};

/// The fields a PodGroup may take from its template.
const INHERITED: [&str; 4] = [
    "schedulingPolicy",
    "disruptionMode",
    "priorityClassName",
    "priority",
];

/// The Workload and template a PodGroup names, in either served shape:
/// `spec.podGroupTemplateRef.workload` (`v1alpha2`: `workloadName`,
/// `podGroupTemplateName`) or `spec.workloadRef` (`v1beta1`: `workloadName`,
/// `templateName`).
pub fn template_ref(podgroup: &Value) -> Option<(&str, &str)> {
    let spec = podgroup.get("spec")?;
    let (reference, template_field) = match spec.pointer("/podGroupTemplateRef/workload") {
        Some(r) if r.is_object() => (r, "podGroupTemplateName"),
        _ => (spec.get("workloadRef")?, "templateName"),
    };
    let workload = reference.get("workloadName")?.as_str()?;
    let template = reference.get(template_field)?.as_str()?;
    (!workload.is_empty() && !template.is_empty()).then_some((workload, template))
}

/// The PodGroup with what it leaves unsaid taken from the named template of
/// `workload`; the PodGroup unchanged when the Workload has no such template.
pub fn complete(podgroup: &Value, workload: &Value) -> Value {
    let mut completed = podgroup.clone();
    let Some((_, template_name)) = template_ref(podgroup) else {
        return completed;
    };
    let Some(template) = workload
        .pointer("/spec/podGroupTemplates")
        .and_then(Value::as_array)
        .and_then(|ts| {
            ts.iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some(template_name))
        })
    else {
        return completed;
    };
    let Some(object) = completed.as_object_mut() else {
        return completed;
    };
    let spec = object
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(spec) = spec.as_object_mut() else {
        return completed;
    };
    for field in INHERITED {
        if spec.get(field).is_none_or(says_nothing)
            && let Some(value) = template.get(field).filter(|v| !says_nothing(v))
        {
            spec.insert(field.to_owned(), value.clone());
        }
    }
    completed
}

/// Whether a field's value says nothing: null, `""` or `{}`.
fn says_nothing(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload() -> Value {
        json!({"metadata": {"name": "job"}, "spec": {"podGroupTemplates": [
            {"name": "launcher", "schedulingPolicy": {"basic": {}}},
            {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}},
             "disruptionMode": "PodGroup", "priorityClassName": "high", "priority": 1000}
        ]}})
    }

    #[test]
    fn the_template_fills_only_what_the_podgroup_leaves_unsaid() {
        let pg = json!({"metadata": {"name": "job-0"}, "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "job", "podGroupTemplateName": "workers"}},
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "priorityClassName": ""
        }});
        let done = complete(&pg, &workload());
        assert_eq!(
            done["spec"]["schedulingPolicy"],
            json!({"gang": {"minCount": 2}})
        );
        assert_eq!(done["spec"]["disruptionMode"], "PodGroup");
        assert_eq!(done["spec"]["priorityClassName"], "high");
        assert_eq!(done["spec"]["priority"], 1000);
    }

    #[test]
    fn a_v1beta1_reference_and_an_unknown_template() {
        let pg =
            json!({"spec": {"workloadRef": {"workloadName": "job", "templateName": "workers"}}});
        assert_eq!(template_ref(&pg), Some(("job", "workers")));
        assert_eq!(
            complete(&pg, &workload())["spec"]["schedulingPolicy"],
            json!({"gang": {"minCount": 4}})
        );
        let other =
            json!({"spec": {"workloadRef": {"workloadName": "job", "templateName": "gone"}}});
        assert_eq!(complete(&other, &workload()), other);
        assert_eq!(template_ref(&json!({"spec": {}})), None);
        assert_eq!(complete(&json!([1]), &workload()), json!([1]));
    }
}
