//! The namespace of a namespaced object read from a cluster file, a recorded
//! trace or an API answer: the API server defaults an unset one to `default`
//! when the object is created, so an object that names none is read as living
//! there, the same way wherever it is read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The namespace the API server gives an object created without one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The object's namespace, [`DEFAULT_NAMESPACE`] when it names none.
pub fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
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
}
