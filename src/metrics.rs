//! Prometheus metrics: HAMi's `hami_*` GPU and quota gauges (computed from the
//! ledger at scrape time, so they are never stale) plus request latency histograms
//! and filter/bind outcome counters.

use crate::ledger::Ledger;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

const MIB: f64 = 1_048_576.0;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// Counters and histograms updated on the request path.
pub struct Metrics {
    registry: Registry,
    latency: Family<VerbLabels, Histogram>,
    filter: Family<OutcomeLabels, Counter>,
    bind: Family<OutcomeLabels, Counter>,
    /// Reservations released because no bind came in time.
    pub reservations_expired: Counter,
    /// Gangs the planner placed and released to kube-scheduler.
    pub gangs_committed: Counter,
    /// Gangs evicted because they did not start within the gang timeout.
    pub gangs_timed_out: Counter,
}

/// Latency objectives (seconds) that get a histogram bound of their own.
const LATENCY_OBJECTIVES: [f64; 3] = [0.0003, 0.0005, 0.002];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers the request metrics.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        // 20 µs to ~10 s in steps of 25%, so a quantile read off the buckets (the
        // upper bound of the bucket it falls in) is at most 25% above the true value;
        // plus bounds at the latency objectives (0.3 ms and 2 ms for /filter, 0.5 ms
        // for /mutate), so whether one is met is read off exactly.
        let latency = Family::<VerbLabels, Histogram>::new_with_constructor(|| {
            let mut bounds: Vec<f64> = exponential_buckets(0.00002, 1.25, 60)
                .chain(LATENCY_OBJECTIVES)
                .collect();
            bounds.sort_by(f64::total_cmp);
            Histogram::new(bounds)
        });
        registry.register(
            "vgpu_scheduler_request_duration_seconds",
            "Time to answer an extender or webhook request, by verb",
            latency.clone(),
        );
        let filter = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "vgpu_scheduler_filter",
            "Filter calls by outcome (fit, nofit, passthrough, error)",
            filter.clone(),
        );
        let bind = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "vgpu_scheduler_bind",
            "Bind calls by outcome (bound, failed)",
            bind.clone(),
        );
        let reservations_expired = Counter::default();
        registry.register(
            "vgpu_scheduler_reservations_expired",
            "Filter reservations released because no bind came before the TTL",
            reservations_expired.clone(),
        );
        let gangs_committed = Counter::default();
        registry.register(
            "vgpu_scheduler_gangs_committed",
            "Gangs placed whole by the planner and released to kube-scheduler",
            gangs_committed.clone(),
        );
        let gangs_timed_out = Counter::default();
        registry.register(
            "vgpu_scheduler_gangs_timed_out",
            "Gangs whose started members were evicted because the gang did not start in time",
            gangs_timed_out.clone(),
        );
        Self {
            registry,
            latency,
            filter,
            bind,
            reservations_expired,
            gangs_committed,
            gangs_timed_out,
        }
    }

    /// Records one request's duration.
    pub fn observe(&self, verb: &str, seconds: f64) {
        self.latency
            .get_or_create(&VerbLabels { verb: verb.into() })
            .observe(seconds);
    }

    /// Counts a filter outcome.
    pub fn filter_outcome(&self, outcome: &str) {
        self.filter
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Counts a bind outcome.
    pub fn bind_outcome(&self, outcome: &str) {
        self.bind
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Prometheus text: request metrics, then the GPU/quota gauges of `ledger`
    /// and the queue gauges of the last planning cycle.
    pub fn render(&self, ledger: &Ledger, gangs: &crate::scheduler::GangView) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        // `encode` ends with "# EOF"; the gauges follow in a second registry, so
        // keep only one terminator at the very end.
        if let Some(stripped) = out.strip_suffix("# EOF\n") {
            out.truncate(stripped.len());
        }
        let mut gauges = Registry::default();
        register_ledger_gauges(&mut gauges, ledger);
        crate::gang::queue_metrics::register_queue_gauges(&mut gauges, gangs);
        let _ = encode(&mut out, &gauges);
        out
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    zone: String,
    node: String,
    device_uuid: String,
    device_index: String,
    device_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AllocatedLabels {
    zone: String,
    node: String,
    device_uuid: String,
    device_index: String,
    device_cores: String,
    device_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OverviewLabels {
    zone: String,
    node: String,
    device_uuid: String,
    device_index: String,
    device_cores: String,
    device_memory_limit: String,
    device_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodDeviceLabels {
    zone: String,
    namespace: String,
    node: String,
    pod: String,
    container_index: String,
    device_uuid: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabels {
    zone: String,
    namespace: String,
    quota_name: String,
    limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLimitLabels {
    zone: String,
    namespace: String,
    quota_name: String,
}

type FGauge = Gauge<f64, AtomicU64>;

fn register_ledger_gauges(r: &mut Registry, ledger: &Ledger) {
    let zone = || "vGPU".to_string();
    let mem_limit = Family::<DeviceLabels, FGauge>::default();
    let core_limit = Family::<DeviceLabels, FGauge>::default();
    let mem_alloc = Family::<AllocatedLabels, FGauge>::default();
    let shared = Family::<DeviceLabels, FGauge>::default();
    let core_alloc = Family::<DeviceLabels, FGauge>::default();
    let mem_ratio = Family::<DeviceLabels, FGauge>::default();
    let overview = Family::<OverviewLabels, FGauge>::default();
    let build = Family::<BuildLabels, FGauge>::default();
    build
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION").to_string(),
        })
        .set(1.0);
    for (name, entry) in ledger.nodes() {
        let usage = entry.usage.iter().copied();
        for (d, u) in entry.devices.iter().zip(usage) {
            let l = DeviceLabels {
                zone: zone(),
                node: name.clone(),
                device_uuid: d.id.to_string(),
                device_index: d.index.to_string(),
                device_type: d.model.clone(),
            };
            mem_limit.get_or_create(&l).set(d.devmem as f64 * MIB);
            core_limit.get_or_create(&l).set(f64::from(d.devcore));
            shared.get_or_create(&l).set(f64::from(u.used));
            core_alloc.get_or_create(&l).set(f64::from(u.usedcores));
            if d.devmem > 0 {
                mem_ratio
                    .get_or_create(&l)
                    .set(u.usedmem as f64 / d.devmem as f64);
            }
            overview
                .get_or_create(&OverviewLabels {
                    zone: zone(),
                    node: name.clone(),
                    device_uuid: d.id.to_string(),
                    device_index: d.index.to_string(),
                    device_cores: d.devcore.to_string(),
                    device_memory_limit: (d.devmem as f64 * MIB).to_string(),
                    device_type: d.model.clone(),
                })
                .set(u.usedmem as f64 * MIB);
            mem_alloc
                .get_or_create(&AllocatedLabels {
                    zone: zone(),
                    node: name.clone(),
                    device_uuid: d.id.to_string(),
                    device_index: d.index.to_string(),
                    device_cores: d.devcore.to_string(),
                    device_type: d.model.clone(),
                })
                .set(u.usedmem as f64 * MIB);
        }
    }
    let pod_mem = Family::<PodDeviceLabels, FGauge>::default();
    let pod_cores = Family::<PodDeviceLabels, FGauge>::default();
    for p in ledger.pods() {
        for (uuid, u) in &p.usage {
            let l = PodDeviceLabels {
                zone: zone(),
                namespace: p.namespace.clone(),
                node: p.node.clone(),
                pod: p.name.clone(),
                container_index: "0".into(),
                device_uuid: uuid.to_string(),
            };
            pod_mem.get_or_create(&l).set(u.usedmem as f64 * MIB);
            pod_cores.get_or_create(&l).set(f64::from(u.usedcores));
        }
    }
    let quota_used = Family::<QuotaLabels, FGauge>::default();
    let quota_limit = Family::<QuotaLimitLabels, FGauge>::default();
    for (ns, limits, (mem, cores)) in ledger.quota_report() {
        for (resource, limit, used) in [
            ("memory", limits.memory, mem),
            ("cores", limits.cores, cores),
        ] {
            quota_used
                .get_or_create(&QuotaLabels {
                    zone: zone(),
                    namespace: ns.clone(),
                    quota_name: resource.into(),
                    limit: limit.map(|l| l.to_string()).unwrap_or_default(),
                })
                .set(used as f64);
            if let Some(limit) = limit {
                quota_limit
                    .get_or_create(&QuotaLimitLabels {
                        zone: zone(),
                        namespace: ns.clone(),
                        quota_name: resource.into(),
                    })
                    .set(limit as f64);
            }
        }
    }
    r.register("hami_build_info", "Build information", build);
    r.register(
        "hami_node_gpu_overview",
        "GPU memory allocated, bytes, with the card's limits as labels",
        overview,
    );
    r.register(
        "hami_gpu_memory_limit_bytes",
        "GPU memory registered, bytes",
        mem_limit,
    );
    r.register(
        "hami_gpu_core_limit_ratio",
        "GPU compute registered, percent",
        core_limit,
    );
    r.register(
        "hami_gpu_memory_allocated_bytes",
        "GPU memory allocated, bytes",
        mem_alloc,
    );
    r.register(
        "hami_gpu_shared_count",
        "vGPU tasks sharing the GPU",
        shared,
    );
    r.register(
        "hami_gpu_core_allocated_ratio",
        "GPU compute allocated, percent",
        core_alloc,
    );
    r.register(
        "hami_node_gpu_memory_allocated_ratio",
        "GPU memory allocated over registered",
        mem_ratio,
    );
    r.register(
        "hami_vgpu_memory_allocated_bytes",
        "GPU memory a pod holds, bytes",
        pod_mem,
    );
    r.register(
        "hami_vgpu_core_allocated_ratio",
        "GPU compute a pod holds, percent",
        pod_cores,
    );
    r.register(
        "hami_resource_quota_used",
        "vGPU quota used per namespace",
        quota_used,
    );
    r.register(
        "hami_resource_quota_limit",
        "vGPU quota limit per namespace",
        quota_limit,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The latency objectives are bucket bounds of their own: a filter answered in
    /// 0.29 ms counts under 0.3 ms, not under the next 25% step (0.364 ms).
    #[test]
    fn latency_objectives_are_bucket_bounds() {
        let metrics = Metrics::new();
        metrics.observe("filter", 0.00029);
        metrics.observe("filter", 0.0019);
        let text = metrics.render(&Ledger::default(), &crate::scheduler::GangView::default());
        let bucket = |le: &str| {
            text.lines()
                .find(|l| {
                    l.starts_with("vgpu_scheduler_request_duration_seconds_bucket")
                        && l.contains("verb=\"filter\"")
                        && l.contains(&format!("le=\"{le}\""))
                })
                .and_then(|l| l.rsplit(' ').next())
                .map(str::to_string)
        };
        assert_eq!(bucket("0.0003").as_deref(), Some("1"), "{text}");
        assert_eq!(bucket("0.002").as_deref(), Some("2"), "{text}");
        assert!(bucket("0.0005").is_some(), "{text}");
    }
}
