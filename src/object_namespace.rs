//! The namespace of a namespaced object read from a cluster file, a recorded
//! trace or an API answer: the API server defaults an unset one to `default`
//! when the object is created, so an object that names none is read as living
//! there, the same way wherever it is read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

/// The namespace the API server gives an object created without one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The object's namespace, [`DEFAULT_NAMESPACE`] when it names none.
pub fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
}

/// The namespace of an object kept as JSON (kinds read without a typed
/// model), [`DEFAULT_NAMESPACE`] when it names none: an empty or non-text
/// `metadata.namespace` names none either, as the API server never serves one.
pub fn namespace_in(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(DEFAULT_NAMESPACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_without_a_namespace_is_read_as_in_default() {
        let mut meta = ObjectMeta::default();
        assert_eq!(namespace_of(&meta), "default");
        meta.namespace = Some("ml".into());
        assert_eq!(namespace_of(&meta), "ml");
    }

    #[test]
    fn a_json_object_without_a_usable_namespace_is_read_as_in_default() {
        for metadata in [
            serde_json::json!({"name": "g"}),
            serde_json::json!({"name": "g", "namespace": ""}),
            serde_json::json!({"name": "g", "namespace": 3}),
        ] {
            let object = serde_json::json!({ "metadata": metadata });
            assert_eq!(namespace_in(&object), "default", "{object}");
        }
        let object = serde_json::json!({"metadata": {"name": "g", "namespace": "ml"}});
        assert_eq!(namespace_in(&object), "ml");
    }
}
