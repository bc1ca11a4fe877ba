//! What an update may do to the node selection of a pod that still has
//! scheduling gates (kube-apiserver's pod update validation, 1.30+): it is judged
//! against the pod before the update, so the update that removes the last gate
//! may still narrow it. `spec.nodeSelector` may only gain keys; the required node
//! affinity may be set freely when it has no terms, and otherwise keeps its
//! number of terms, each of which may only gain requirements. The preferred node
//! affinity may change; the rest of `spec.affinity` may not. A pod without gates
//! may change none of it.

use super::status::Cause;
use serde_json::{Value, json};

const TERMS: &str =
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";

fn required_terms(spec: &Value) -> Vec<Value> {
    spec.pointer(
        "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    )
    .and_then(Value::as_array)
    .cloned()
    .unwrap_or_default()
}

fn list<'a>(term: &'a Value, field: &str) -> Vec<&'a Value> {
    term.get(field)
        .and_then(Value::as_array)
        .map(|l| l.iter().collect())
        .unwrap_or_default()
}

/// Whether `new` keeps every requirement of `old` (it may add more).
fn only_additions(old: &Value, new: &Value) -> bool {
    ["matchExpressions", "matchFields"]
        .into_iter()
        .all(|field| {
            let kept = list(new, field);
            list(old, field).iter().all(|r| kept.contains(r))
        })
}

/// Why the change from `old` to `new` (both pod specs, `old` gated) is refused.
pub fn narrowing_causes(old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let empty = json!({});
    let old_selector = old.get("nodeSelector").unwrap_or(&empty);
    let new_selector = new.get("nodeSelector").unwrap_or(&empty);
    let kept = old_selector
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| new_selector.get(k) == Some(v));
    if !kept {
        causes.push(Cause::invalid(
            "spec.nodeSelector",
            new_selector,
            "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
        ));
    }
    let old_terms = required_terms(old);
    if old_terms.is_empty() {
        return causes;
    }
    let new_terms = required_terms(new);
    if new_terms.len() != old_terms.len() {
        causes.push(Cause::invalid(
            TERMS,
            &Value::Array(new_terms),
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        ));
        return causes;
    }
    for (i, (o, n)) in old_terms.iter().zip(&new_terms).enumerate() {
        if !only_additions(o, n) {
            causes.push(Cause::invalid(
                &format!("{TERMS}[{i}]"),
                n,
                "only additions are allowed (no mutations or deletions)",
            ));
        }
    }
    causes
}

/// Puts `old`'s node selection back into `new` (what the server compares the
/// rest of the spec on, once the narrowing was found valid).
pub fn restore_node_selection(old: &Value, new: &mut serde_json::Map<String, Value>) {
    match old.get("nodeSelector") {
        Some(v) => {
            new.insert("nodeSelector".into(), v.clone());
        }
        None => {
            new.remove("nodeSelector");
        }
    }
    let old_node_affinity = old.pointer("/affinity/nodeAffinity").cloned();
    if let Some(affinity) = new.get_mut("affinity").and_then(Value::as_object_mut) {
        match old_node_affinity {
            Some(v) => {
                affinity.insert("nodeAffinity".into(), v);
            }
            None => {
                affinity.remove("nodeAffinity");
            }
        }
        if affinity.is_empty() && old.get("affinity").is_none() {
            new.remove("affinity");
        }
    }
}
