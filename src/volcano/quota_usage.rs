//! What a pod, or a job's minimum, counts against a namespace's ResourceQuotas,
//! under the names Kubernetes' pod quota evaluator uses:
//!
//! - `pods` and `count/pods`: one per pod;
//! - `cpu`, `memory`, `ephemeral-storage`: the requests, also as `requests.<name>`,
//!   and the limits as `limits.<name>`;
//! - `hugepages-<size>`: the requests, also as `requests.hugepages-<size>`;
//! - extended resources (`nvidia.com/gpu`, `nvidia.com/gpumem`): the requests as
//!   `requests.<name>` only; Kubernetes counts no plain or `limits.` name for them.
//!
//! Any other name in a quota (`services`, `requests.storage`, a plain
//! `nvidia.com/gpu`) is nothing pods count against, so it never refuses a job here.

use crate::resources::{Resources, parse_milli};
use k8s_openapi::api::core::v1::{Container, Pod};
use std::collections::BTreeMap;

const REQUESTS: &str = "requests.";
const LIMITS: &str = "limits.";
/// Counted under their plain name, `requests.` and `limits.`.
const COMPUTE: &[&str] = &["cpu", "memory", "ephemeral-storage"];
const HUGEPAGES: &str = "hugepages-";
/// One milli-unit per thousandth: a pod counts 1000 in `pods`.
const ONE: i64 = 1000;

/// How Kubernetes counts a resource a pod requests, by its plain name.
enum Kind {
    Compute,
    Hugepages,
    Extended,
    /// Native names quota does not count for pods.
    Other,
}

fn kind(name: &str) -> Kind {
    if COMPUTE.contains(&name) {
        Kind::Compute
    } else if name.starts_with(HUGEPAGES) {
        Kind::Hugepages
    } else if is_extended(name) {
        Kind::Extended
    } else {
        Kind::Other
    }
}

/// Kubernetes' extended resources: a domain-qualified name outside
/// `kubernetes.io`, not itself a quota name.
fn is_extended(name: &str) -> bool {
    name.contains('/')
        && !name.contains("kubernetes.io/")
        && !name.starts_with(REQUESTS)
        && !name.starts_with(LIMITS)
}

/// Whether pods count against this quota name at all.
pub fn counted_for_pods(quota_name: &str) -> bool {
    if matches!(quota_name, "pods" | "count/pods") {
        return true;
    }
    if let Some(name) = quota_name.strip_prefix(REQUESTS) {
        return !matches!(kind(name), Kind::Other);
    }
    if let Some(name) = quota_name.strip_prefix(LIMITS) {
        return matches!(kind(name), Kind::Compute);
    }
    matches!(kind(quota_name), Kind::Compute | Kind::Hugepages)
}

/// The resource a quota name counts, for printing amounts in its own unit
/// (`requests.memory` prints like `memory`).
pub fn base_name(quota_name: &str) -> &str {
    quota_name
        .strip_prefix(REQUESTS)
        .or_else(|| quota_name.strip_prefix(LIMITS))
        .unwrap_or(quota_name)
}

fn raise(out: &mut Resources, name: &str, milli: i64) {
    if milli > out.get(name) {
        out.set(name, milli);
    }
}

/// What a job's stated minimum counts against quotas: each plain name under the
/// names Kubernetes counts it (`cpu: 4` is `cpu`, `requests.cpu` and `limits.cpu`,
/// since a pod's limits are never below its requests), `pods` and `count/pods` for
/// its `members`. Names already written as quota names (Volcano's jobs write
/// `requests.cpu` next to `cpu`) are kept; where two say the same name the larger
/// stands, so the same amount stated twice is not counted twice.
pub fn of_minimum(min: &Resources, members: usize) -> Resources {
    let mut out = Resources::default();
    for (name, milli) in min.iter() {
        let already_quota_name = name.starts_with(REQUESTS)
            || name.starts_with(LIMITS)
            || matches!(name, "pods" | "count/pods");
        let names = if !already_quota_name {
            names_of(name)
        } else if counted_for_pods(name) {
            vec![name.to_string()]
        } else {
            Vec::new()
        };
        for quota_name in names {
            raise(&mut out, &quota_name, milli);
        }
    }
    let pods = i64::try_from(members)
        .unwrap_or(i64::MAX)
        .saturating_mul(ONE);
    raise(&mut out, "pods", pods);
    raise(&mut out, "count/pods", pods);
    out.without_zeros()
}

/// The quota names a request of `name` counts under.
fn names_of(name: &str) -> Vec<String> {
    match kind(name) {
        Kind::Compute => vec![
            name.to_string(),
            format!("{REQUESTS}{name}"),
            format!("{LIMITS}{name}"),
        ],
        Kind::Hugepages => vec![name.to_string(), format!("{REQUESTS}{name}")],
        Kind::Extended => vec![format!("{REQUESTS}{name}")],
        Kind::Other => Vec::new(),
    }
}

/// What an existing pod counts against quotas, as Kubernetes' pod evaluator
/// counts it: requests and limits summed over containers, or the largest init
/// container where that is more, plus the pod overhead. A container that states a
/// limit and no request counts the limit as its request, as the API server
/// defaults it. Finished pods count nothing; unreadable quantities count zero.
pub fn of_pod(pod: &Pod) -> Resources {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Resources::default();
    }
    let mut out = Resources::from_milli([("pods", ONE), ("count/pods", ONE)]);
    let Some(spec) = pod.spec.as_ref() else {
        return out;
    };
    let (mut requests, mut limits) = (BTreeMap::new(), BTreeMap::new());
    for c in &spec.containers {
        let (r, l) = container_amounts(c);
        merge(&mut requests, r, i64::saturating_add);
        merge(&mut limits, l, i64::saturating_add);
    }
    for c in spec.init_containers.iter().flatten() {
        let (r, l) = container_amounts(c);
        merge(&mut requests, r, i64::max);
        merge(&mut limits, l, i64::max);
    }
    // Overhead adds to every request, and to the limits the pod has (a resource
    // without a limit stays unlimited).
    let overhead = read(spec.overhead.as_ref());
    for (name, milli) in &overhead {
        if let Some(limit) = limits.get_mut(name) {
            *limit = i64::saturating_add(*limit, *milli);
        }
    }
    merge(&mut requests, overhead, i64::saturating_add);
    for (name, milli) in requests {
        for quota_name in names_of(&name) {
            if !quota_name.starts_with(LIMITS) {
                out.set(quota_name, milli);
            }
        }
    }
    for (name, milli) in limits {
        if matches!(kind(&name), Kind::Compute) {
            out.set(format!("{LIMITS}{name}"), milli);
        }
    }
    out.without_zeros()
}

fn read(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, i64> {
    list.into_iter()
        .flatten()
        .filter_map(|(name, q)| parse_milli(name, &q.0).ok().map(|v| (name.clone(), v)))
        .collect()
}

fn container_amounts(c: &Container) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let resources = c.resources.as_ref();
    let limits = read(resources.and_then(|r| r.limits.as_ref()));
    let mut requests = read(resources.and_then(|r| r.requests.as_ref()));
    for (name, milli) in &limits {
        requests.entry(name.clone()).or_insert(*milli);
    }
    (requests, limits)
}

fn merge(into: &mut BTreeMap<String, i64>, from: BTreeMap<String, i64>, f: fn(i64, i64) -> i64) {
    for (name, milli) in from {
        let slot = into.entry(name).or_insert(0);
        *slot = f(*slot, milli);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn names_pods_count_against_are_those_kubernetes_counts() {
        for counted in [
            "pods",
            "count/pods",
            "cpu",
            "requests.cpu",
            "limits.cpu",
            "memory",
            "limits.memory",
            "requests.ephemeral-storage",
            "hugepages-2Mi",
            "requests.hugepages-2Mi",
            "requests.nvidia.com/gpu",
            "requests.nvidia.com/gpumem",
        ] {
            assert!(counted_for_pods(counted), "{counted}");
        }
        for ignored in [
            "services",
            "requests.storage",
            "persistentvolumeclaims",
            "nvidia.com/gpu",
            "limits.nvidia.com/gpu",
            "limits.hugepages-2Mi",
            "count/deployments.apps",
        ] {
            assert!(!counted_for_pods(ignored), "{ignored}");
        }
    }

    #[test]
    fn a_minimum_counts_under_every_name_kubernetes_uses() {
        let min = Resources::from_json(&json!({
            "cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 8, "hugepages-2Mi": "1Gi"
        }))
        .unwrap();
        let usage = of_minimum(&min, 4);
        let want = Resources::from_json(&json!({
            "pods": 4, "count/pods": 4,
            "cpu": "4", "requests.cpu": "4", "limits.cpu": "4",
            "memory": "8Gi", "requests.memory": "8Gi", "limits.memory": "8Gi",
            "requests.nvidia.com/gpu": 8,
            "hugepages-2Mi": "1Gi", "requests.hugepages-2Mi": "1Gi",
        }))
        .unwrap();
        assert_eq!(usage, want);
    }

    #[test]
    fn a_volcano_minimum_with_quota_names_is_not_counted_twice() {
        // What Volcano's job controller writes: the pod quota usage, both spellings.
        let min = Resources::from_json(&json!({
            "cpu": "4", "requests.cpu": "4", "limits.cpu": "8",
            "nvidia.com/gpu": 2, "requests.nvidia.com/gpu": 2, "pods": 2
        }))
        .unwrap();
        let usage = of_minimum(&min, 2);
        assert_eq!(usage.get("requests.cpu"), 4000);
        assert_eq!(usage.get("limits.cpu"), 8000);
        assert_eq!(usage.get("requests.nvidia.com/gpu"), 2000);
        assert_eq!(usage.get("pods"), 2000);
        assert!(!usage.contains("nvidia.com/gpu"));
    }

    #[test]
    fn a_pod_counts_like_the_kubernetes_pod_evaluator() {
        let p = pod(json!({
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
            "containers": [
                {"name": "a", "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}}}
            ],
            "overhead": {"cpu": "100m"}
        }));
        let usage = of_pod(&p);
        let want = Resources::from_json(&json!({
            "pods": 1, "count/pods": 1,
            // max(1 + 0.5, 3) + 0.1 overhead
            "cpu": "3100m", "requests.cpu": "3100m", "limits.cpu": "2100m",
            "memory": "1Gi", "requests.memory": "1Gi", "limits.memory": "1Gi",
            // limits only: defaulted into requests, counted as requests only
            "requests.nvidia.com/gpu": 1, "requests.nvidia.com/gpumem": 4000,
        }))
        .unwrap();
        assert_eq!(usage, want);
    }

    #[test]
    fn a_finished_pod_counts_nothing() {
        let mut p =
            pod(json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}));
        p.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        assert!(of_pod(&p).is_empty());
    }
}
