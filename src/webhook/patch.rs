//! The JSON Patch that turns the received pod into the mutated one.

use json_patch::Patch;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// Why no patch could be built (a bug on our side, never the client's).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError {
    #[error("cannot serialise pod: {0}")]
    Serialise(#[from] serde_json::Error),
    #[error("mutation does not apply to the received pod: {0}")]
    Apply(#[from] json_patch::PatchError),
}

/// Computes the RFC 6902 patch from `received` (the object JSON exactly as the API
/// server sent it) to `mutated`. `None` when nothing changed.
///
/// The typed pod cannot be diffed against `received` directly: fields this crate's
/// Kubernetes types do not know, and explicit nulls, vanish in a typed round trip and
/// would turn into `remove` operations. So the change is first taken between the
/// typed original and the typed mutation, applied to `received`, and the final patch
/// is the diff between `received` and that result, which is sure to apply to what
/// the API server holds.
pub(crate) fn pod_patch(
    received: &Value,
    original: &Pod,
    mutated: &Pod,
) -> Result<Option<Patch>, PatchError> {
    let change = json_patch::diff(
        &serde_json::to_value(original)?,
        &serde_json::to_value(mutated)?,
    );
    if change.0.is_empty() {
        return Ok(None);
    }
    let mut target = received.clone();
    json_patch::patch(&mut target, &change)?;
    let patch = json_patch::diff(received, &target);
    Ok((!patch.0.is_empty()).then_some(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_and_nulls_survive() {
        let received = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "futureField": {"x": 1}},
            "spec": {
                "containers": [{"name": "c", "env": null, "futureContainerField": true}],
                "futureSpecField": "kept"
            }
        });
        let original: Pod = serde_json::from_value(received.clone()).unwrap();
        let mut mutated = original.clone();
        let spec = mutated.spec.as_mut().unwrap();
        spec.scheduler_name = Some("vgpu".into());
        spec.containers[0].env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
            name: "A".into(),
            value: Some("b".into()),
            ..Default::default()
        }]);
        let patch = pod_patch(&received, &original, &mutated).unwrap().unwrap();
        let mut applied = received.clone();
        json_patch::patch(&mut applied, &patch).unwrap();
        assert_eq!(applied["spec"]["futureSpecField"], "kept");
        assert_eq!(
            applied["spec"]["containers"][0]["futureContainerField"],
            true
        );
        assert_eq!(applied["metadata"]["futureField"]["x"], 1);
        assert_eq!(applied["spec"]["schedulerName"], "vgpu");
        assert_eq!(applied["spec"]["containers"][0]["env"][0]["name"], "A");
        let text = serde_json::to_string(&patch).unwrap();
        assert!(!text.contains("\"remove\""), "{text}");
    }

    #[test]
    fn no_change_means_no_patch() {
        let received = json!({"spec": {"containers": [{"name": "c"}]}});
        let pod: Pod = serde_json::from_value(received.clone()).unwrap();
        assert!(pod_patch(&received, &pod, &pod).unwrap().is_none());
    }
}
