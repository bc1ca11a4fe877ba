//! What a trace leaves out unless asked to keep it (`--record-trace-verbatim`):
//! the values of containers' environment variables and kubectl's
//! `last-applied-configuration` annotation. Both often hold secrets (tokens,
//! passwords, a whole manifest with them), a trace is a file meant to be copied
//! off the cluster and replayed elsewhere, and neither changes where a pod is
//! placed. Variables keep their names and references (`valueFrom`), so the pod
//! still reads as it was written.

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

/// kubectl's copy of the whole object as last applied.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Removes environment variable values and the last-applied configuration
/// from a pod.
pub fn leave_out_private(pod: &mut Pod) {
    if let Some(annotations) = pod.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.containers.iter_mut().for_each(clear_env_values);
    spec.init_containers
        .iter_mut()
        .flatten()
        .for_each(clear_env_values);
    for container in spec.ephemeral_containers.iter_mut().flatten() {
        for var in container.env.iter_mut().flatten() {
            var.value = None;
        }
    }
}

/// Removes the last-applied configuration from a PodGroup.
pub fn leave_out_private_of_podgroup(group: &mut Value) {
    if let Some(annotations) = group
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
}

fn clear_env_values(container: &mut Container) {
    for var in container.env.iter_mut().flatten() {
        var.value = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn env_values_and_the_applied_configuration_go_and_the_rest_stays() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": {
                LAST_APPLIED: "{\"spec\":{\"env\":\"secret\"}}",
                "nvidia.com/use-gputype": "H100"}},
            "spec": {
                "initContainers": [{"name": "init", "env": [{"name": "A", "value": "init-secret"}]}],
                "containers": [{"name": "main", "env": [
                    {"name": "TOKEN", "value": "s3cret"},
                    {"name": "FROM", "valueFrom": {"secretKeyRef": {"name": "k", "key": "v"}}}]}],
                "ephemeralContainers": [{"name": "debug", "env": [{"name": "B", "value": "eph-secret"}]}]
            }
        }))
        .unwrap();
        leave_out_private(&mut pod);
        let text = serde_json::to_string(&pod).unwrap();
        for secret in ["s3cret", "init-secret", "eph-secret", "last-applied"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let value = serde_json::to_value(&pod).unwrap();
        assert_eq!(
            value["metadata"]["annotations"],
            json!({"nvidia.com/use-gputype": "H100"})
        );
        assert_eq!(
            value["spec"]["containers"][0]["env"],
            json!([{"name": "TOKEN"},
                   {"name": "FROM", "valueFrom": {"secretKeyRef": {"name": "k", "key": "v"}}}])
        );
    }

    #[test]
    fn a_podgroup_loses_its_applied_configuration() {
        let mut group = json!({"metadata": {"name": "g", "annotations": {LAST_APPLIED: "{}", "a": "b"}},
                               "spec": {"minMember": 2}});
        leave_out_private_of_podgroup(&mut group);
        assert_eq!(group["metadata"]["annotations"], json!({"a": "b"}));
    }
}
