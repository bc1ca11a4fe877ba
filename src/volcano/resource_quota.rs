//! A namespace's ResourceQuota as the `resourcequota` plugin reads it: what it
//! allows (`spec.hard`) and what Kubernetes counts as used (`status.used`), each
//! under the quota's own names (`requests.nvidia.com/gpu`, `cpu`, `limits.memory`,
//! `pods`).

use crate::object_namespace::namespace_of;
use crate::resources::{Resources, parse_milli};
use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// One ResourceQuota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceQuota {
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// What the namespace may use: `spec.hard`, or `status.hard` when the spec
    /// says nothing (the quota controller copies one to the other; the spec is
    /// the newer when a quota was just raised).
    pub hard: Resources,
    /// What Kubernetes counts as used (`status.used`; nothing before the quota
    /// controller first counted).
    pub used: Resources,
    /// The quota applies only to some pods (`scopes` or `scopeSelector`).
    pub scoped: bool,
}

impl NamespaceQuota {
    /// Reads a ResourceQuota. Quantities that cannot be read are left out (logged):
    /// one bad entry must not stop the namespace's other limits from applying.
    pub fn of(quota: &ResourceQuota) -> Self {
        let namespace = namespace_of(&quota.metadata).to_owned();
        let name = quota.metadata.name.clone().unwrap_or_default();
        let spec = quota.spec.as_ref();
        let status = quota.status.as_ref();
        let read = |list: Option<&BTreeMap<String, Quantity>>, field: &str| {
            list.into_iter()
                .flatten()
                .filter_map(|(resource, q)| match parse_milli(resource, &q.0) {
                    Ok(v) => Some((resource.clone(), v)),
                    Err(e) => {
                        tracing::warn!(namespace = %namespace, quota = %name, field, error = %e, "ignoring unreadable quota amount");
                        None
                    }
                })
                .collect::<Resources>()
        };
        let mut hard = read(spec.and_then(|s| s.hard.as_ref()), "spec.hard");
        if hard.is_empty() {
            hard = read(status.and_then(|s| s.hard.as_ref()), "status.hard");
        }
        let used = read(status.and_then(|s| s.used.as_ref()), "status.used");
        let scoped = spec.is_some_and(|s| {
            s.scopes.as_ref().is_some_and(|v| !v.is_empty())
                || s.scope_selector
                    .as_ref()
                    .and_then(|sel| sel.match_expressions.as_ref())
                    .is_some_and(|v| !v.is_empty())
        });
        Self {
            namespace,
            name,
            hard,
            used,
            scoped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quota(value: serde_json::Value) -> NamespaceQuota {
        NamespaceQuota::of(&serde_json::from_value(value).unwrap())
    }

    #[test]
    fn reads_hard_and_used_under_the_quota_names() {
        let q = quota(json!({
            "metadata": {"name": "gpu-quota", "namespace": "ml"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "8", "limits.memory": "64Gi", "pods": "10"}},
            "status": {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "6", "pods": "3"}}
        }));
        assert_eq!((q.namespace.as_str(), q.name.as_str()), ("ml", "gpu-quota"));
        assert_eq!(
            q.hard.get("requests.nvidia.com/gpu"),
            8000,
            "the spec is newer"
        );
        assert_eq!(q.hard.get("limits.memory"), 64 * (1 << 30) * 1000);
        assert_eq!(q.used.get("requests.nvidia.com/gpu"), 6000);
        assert_eq!(q.used.get("pods"), 3000);
        assert!(!q.scoped);
    }

    #[test]
    fn falls_back_to_the_status_and_skips_what_it_cannot_read() {
        let q = quota(json!({
            "metadata": {"name": "q"},
            "spec": {"scopes": ["NotBestEffort"]},
            "status": {"hard": {"cpu": "4", "memory": "lots"}}
        }));
        assert_eq!(q.namespace, "default");
        assert_eq!(q.hard, Resources::from_units([("cpu", 4)]));
        assert!(q.used.is_empty());
        assert!(q.scoped);
    }
}
