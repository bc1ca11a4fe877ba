//! An object's metadata copied without its managed fields: what this server
//! keeps of a pod never reads them, and on a live cluster they are often most
//! of an object. Copied field by field, so the managed fields are never cloned
//! only to be dropped; a field Kubernetes adds to the metadata fails to compile
//! here until it is decided.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `meta` without `managedFields`.
pub fn without_managed_fields(meta: &ObjectMeta) -> ObjectMeta {
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version,
        self_link,
        uid,
    } = meta;
    ObjectMeta {
        annotations: annotations.clone(),
        creation_timestamp: creation_timestamp.clone(),
        deletion_grace_period_seconds: *deletion_grace_period_seconds,
        deletion_timestamp: deletion_timestamp.clone(),
        finalizers: finalizers.clone(),
        generate_name: generate_name.clone(),
        generation: *generation,
        labels: labels.clone(),
        managed_fields: None,
        name: name.clone(),
        namespace: namespace.clone(),
        owner_references: owner_references.clone(),
        resource_version: resource_version.clone(),
        self_link: self_link.clone(),
        uid: uid.clone(),
    }
}
