//! HAMi's admission-time quota check: a vGPU pod whose declared memory or cores
//! would take its namespace over a ResourceQuota on `nvidia.com/gpumem` /
//! `nvidia.com/gpucores` is refused at creation, instead of waiting Pending forever.
//! Requests given as a percentage or a whole card have no MiB yet; `/filter`
//! checks those with the real card sizes.

use crate::device::device_config::NvidiaConfig;
use crate::device::request::{PodRequest, parse_pod_request};
use crate::fit::QuotaHeadroom;
use k8s_openapi::api::core::v1::Pod;

/// Where the webhook reads a namespace's quota headroom (the ledger).
pub trait QuotaLookup: Send + Sync {
    /// The namespace's vGPU memory/cores limits and what it uses.
    fn headroom(&self, namespace: &str) -> QuotaHeadroom;
}

/// No quotas known (tests, and callers without a ledger).
pub struct NoQuota;

impl QuotaLookup for NoQuota {
    fn headroom(&self, _namespace: &str) -> QuotaHeadroom {
        QuotaHeadroom::default()
    }
}

/// Memory (MiB) and cores the pod declares, counted as HAMi counts them: the sum
/// over regular containers or the largest init container, whichever is more.
pub fn declared_demand(request: &PodRequest) -> (u64, u64) {
    let of = |c: &crate::device::request::ContainerRequest| {
        let n = u64::from(c.nums);
        (
            c.memreq.saturating_mul(n),
            u64::from(c.cores()).saturating_mul(n),
        )
    };
    let app = request
        .app()
        .iter()
        .flatten()
        .map(of)
        .fold((0u64, 0u64), |a, b| {
            (a.0.saturating_add(b.0), a.1.saturating_add(b.1))
        });
    let init = request
        .init()
        .iter()
        .flatten()
        .map(of)
        .fold((0u64, 0u64), |a, b| (a.0.max(b.0), a.1.max(b.1)));
    (app.0.max(init.0), app.1.max(init.1))
}

/// `Err(message)` when the pod cannot fit its namespace's vGPU quota.
pub fn check(
    pod: &Pod,
    namespace: &str,
    nvidia: &NvidiaConfig,
    quota: &dyn QuotaLookup,
) -> Result<(), String> {
    let Ok(request) = parse_pod_request(pod, nvidia) else {
        return Ok(());
    };
    if request.is_empty() {
        return Ok(());
    }
    let headroom = quota.headroom(namespace);
    let (mem, cores) = declared_demand(&request);
    let over = |name: &str, limit: Option<(u64, u64)>, add: u64| {
        limit
            .filter(|(limit, used)| used.saturating_add(add) > *limit)
            .map(|(limit, used)| {
                format!(
                    "pod would exceed the vGPU quota of namespace {namespace}: {name} {add} requested, {used} in use, limit {limit}"
                )
            })
    };
    match over(&nvidia.resource_memory_name, headroom.memory, mem)
        .or_else(|| over(&nvidia.resource_core_name, headroom.cores, cores))
    {
        Some(message) => Err(message),
        None => Ok(()),
    }
}
