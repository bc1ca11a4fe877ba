//! Prometheus metrics: HAMi's `hami_*` GPU and quota gauges (computed from the
//! ledger at scrape time, so they are never stale; optionally also under HAMi's
//! pre-v2.9 names) plus request latency histograms and filter/bind outcome counters.

use crate::ledger::Ledger;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

mod mig;

const MIB: f64 = 1_048_576.0;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// One eviction asked of the API server by preemption or reclaim.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    /// `preempt` or `reclaim`.
    pub action: String,
    /// The victim's queue (one that exists: see [`Metrics::forget_queue`]).
    pub queue: String,
    /// The victim's service type (`volcano.sh/service.type`): `inference`,
    /// `training`, or empty for none or any other value (the annotation is free
    /// text; the label must stay bounded).
    pub service_type: String,
    /// `evicted`, `gone` (already deleted), `refused` (a PodDisruptionBudget
    /// said no), `failed`.
    pub outcome: String,
}

/// How the cluster gauges are rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsOptions {
    /// `quota_name` of the GPU memory quota: the device config's memory resource
    /// name (`nvidia.com/gpumem`).
    pub quota_memory_resource: String,
    /// `quota_name` of the GPU compute quota: the device config's cores resource
    /// name (`nvidia.com/gpucores`).
    pub quota_cores_resource: String,
    /// Also render the gauges under HAMi's pre-v2.9 names (`--legacy-metrics`).
    pub legacy_names: bool,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        let nvidia = crate::device::device_config::NvidiaConfig::default();
        Self {
            quota_memory_resource: nvidia.resource_memory_name,
            quota_cores_resource: nvidia.resource_core_name,
            legacy_names: false,
        }
    }
}

/// Counters and histograms updated on the request path.
pub struct Metrics {
    registry: Registry,
    options: MetricsOptions,
    latency: Family<VerbLabels, Histogram>,
    filter: Family<OutcomeLabels, Counter>,
    bind: Family<OutcomeLabels, Counter>,
    /// Reservations released because no bind came in time.
    pub reservations_expired: Counter,
    /// Pods whose device annotations claim GPUs beyond their capacity; not booked.
    pub claim_conflicts: Counter,
    /// Gangs the planner placed and released to kube-scheduler.
    pub gangs_committed: Counter,
    /// Gangs evicted because they did not start within the gang timeout.
    pub gangs_timed_out: Counter,
    /// Node housekeeping passes begun. With `node_passes_completed` it tells
    /// whether a pass that was under way at some moment has finished since.
    pub node_passes_started: Counter,
    /// Node housekeeping passes finished over every node.
    pub node_passes_completed: Counter,
    resyncs: Family<OutcomeLabels, Counter>,
    planning_cycles: Family<OutcomeLabels, Counter>,
    election_rounds: Family<OutcomeLabels, Counter>,
    evictions: Family<EvictionLabels, Counter>,
    /// The eviction series counted so far, so a deleted queue's can be dropped.
    eviction_series: parking_lot::Mutex<std::collections::HashSet<EvictionLabels>>,
    /// Pipelined plans that lapsed because their victims did not leave in time.
    pub pipelined_plans_expired: Counter,
    /// Member tasks the gang planner built anew rather than kept from its last
    /// cycle: what a cycle cost in pod parses.
    pub planner_tasks_built: Counter,
    /// Jobs the gang planner assembled anew rather than kept from its last cycle.
    pub planner_jobs_built: Counter,
    /// Waiting jobs a cycle did not try again: nothing they wait for changed.
    pub planner_jobs_skipped: Counter,
    /// Trace events not written (`serve --record-trace`): the writer was behind,
    /// or too many pods were followed at once.
    pub trace_dropped: Counter,
    /// Gang and queue pods known only from `/filter`, now.
    pub filter_only_pods: Gauge,
    filter_only_dropped: Family<ReasonLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// Latency objectives (seconds) that get a histogram bound of their own.
const LATENCY_OBJECTIVES: [f64; 3] = [0.0003, 0.0005, 0.002];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers the request metrics; the gauges use the default resource names.
    pub fn new() -> Self {
        Self::with_options(MetricsOptions::default())
    }

    /// Registers the request metrics; the gauges are rendered as `options` say.
    pub fn with_options(options: MetricsOptions) -> Self {
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
        let claim_conflicts = Counter::default();
        registry.register(
            "vgpu_scheduler_claim_conflicts",
            "Pods whose device annotations claim more of a GPU than it registered; their claim is not booked",
            claim_conflicts.clone(),
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
        let node_passes_started = Counter::default();
        registry.register(
            "vgpu_scheduler_node_housekeeping_passes_started",
            "Node housekeeping passes begun (nodes re-judged; on the leader also handshakes written and stale node locks released)",
            node_passes_started.clone(),
        );
        let node_passes_completed = Counter::default();
        registry.register(
            "vgpu_scheduler_node_housekeeping_passes_completed",
            "Node housekeeping passes finished over every node",
            node_passes_completed.clone(),
        );
        let resyncs = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "vgpu_scheduler_resyncs",
            "Periodic full resyncs of the ledger with a list of all pods, by outcome (ok, failed)",
            resyncs.clone(),
        );
        let planning_cycles = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "vgpu_scheduler_planning_cycles",
            "Gang planner periods by outcome: run, or skipped (not the leader, or the ledger not built yet)",
            planning_cycles.clone(),
        );
        let election_rounds = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "vgpu_scheduler_leader_election_rounds",
            "Leader election rounds on the Lease by outcome (leading, following, failed)",
            election_rounds.clone(),
        );
        let evictions = Family::<EvictionLabels, Counter>::default();
        registry.register(
            "vgpu_scheduler_evictions",
            "Evictions asked of the API server by preemption and reclaim, by action, victim queue, victim service type and outcome",
            evictions.clone(),
        );
        let planner_tasks_built = Counter::default();
        registry.register(
            "vgpu_scheduler_planner_tasks_built",
            "Gang and queue member tasks the planner built anew because the pod, its holding or its node changed; the others are kept from the last cycle",
            planner_tasks_built.clone(),
        );
        let planner_jobs_built = Counter::default();
        registry.register(
            "vgpu_scheduler_planner_jobs_built",
            "Gang and queue jobs the planner assembled anew because a member's task, the member set, the PodGroup or its admission changed; the others are kept from the last cycle",
            planner_jobs_built.clone(),
        );
        let planner_jobs_skipped = Counter::default();
        registry.register(
            "vgpu_scheduler_planner_jobs_skipped",
            "Waiting gangs the planner did not try again because nothing that could let them in changed since they last failed (queueing hints)",
            planner_jobs_skipped.clone(),
        );
        let pipelined_plans_expired = Counter::default();
        registry.register(
            "vgpu_scheduler_pipelined_plans_expired",
            "Plans waiting for evicted pods to leave that lapsed because the pods did not leave within the gang timeout",
            pipelined_plans_expired.clone(),
        );
        let trace_dropped = Counter::default();
        registry.register(
            "vgpu_scheduler_trace_dropped",
            "Trace events not written (--record-trace) because the writer was behind or too many pods were followed at once",
            trace_dropped.clone(),
        );
        let filter_only_pods = Gauge::default();
        registry.register(
            "vgpu_scheduler_filter_only_pods",
            "Gang and queue pods known only from /filter (not shown by a watch or the cluster file), kept up to --max-filter-only-pods",
            filter_only_pods.clone(),
        );
        let filter_only_dropped = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "vgpu_scheduler_filter_only_pods_dropped",
            "Gang and queue pods known only from /filter that were forgotten, by reason (expired: not asked about within --filter-only-pod-ttl; over-limit: beyond --max-filter-only-pods)",
            filter_only_dropped.clone(),
        );
        Self {
            registry,
            options,
            latency,
            filter,
            bind,
            reservations_expired,
            claim_conflicts,
            gangs_committed,
            gangs_timed_out,
            node_passes_started,
            node_passes_completed,
            resyncs,
            planning_cycles,
            election_rounds,
            evictions,
            eviction_series: Default::default(),
            pipelined_plans_expired,
            planner_tasks_built,
            planner_jobs_built,
            planner_jobs_skipped,
            trace_dropped,
            filter_only_pods,
            filter_only_dropped,
        }
    }

    /// Counts one pod known only from `/filter` forgotten, for `reason`.
    pub fn filter_only_pod_dropped(&self, reason: &str) {
        self.filter_only_dropped
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Counts one eviction attempt.
    pub fn eviction(&self, labels: &EvictionLabels) {
        self.evictions.get_or_create(labels).inc();
        self.eviction_series.lock().insert(labels.clone());
    }

    /// Drops the series of a deleted Queue: queue names come and go with the
    /// cluster's Queue objects, and a series kept for each would grow without bound.
    pub fn forget_queue(&self, queue: &str) {
        self.eviction_series.lock().retain(|labels| {
            let keep = labels.queue != queue;
            if !keep {
                self.evictions.remove(labels);
            }
            keep
        });
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

    /// Counts a finished resync (`ok`) or one that failed.
    pub fn resync_outcome(&self, outcome: &str) {
        Self::count(&self.resyncs, outcome);
    }

    /// Counts a planner period: `run` once the cycle finished, or `skipped`.
    pub fn planning_cycle(&self, outcome: &str) {
        Self::count(&self.planning_cycles, outcome);
    }

    /// Counts a leader election round: `leading`, `following` or `failed`.
    pub fn election_round(&self, outcome: &str) {
        Self::count(&self.election_rounds, outcome);
    }

    fn count(family: &Family<OutcomeLabels, Counter>, outcome: &str) {
        family
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Prometheus text: request metrics, then the GPU/quota gauges of `ledger`
    /// and the queue gauges of the last planning cycle.
    pub fn render(&self, ledger: &Ledger, gangs: &crate::gang::GangView) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        // `encode` ends with "# EOF"; the gauges follow in a second registry, so
        // keep only one terminator at the very end.
        if let Some(stripped) = out.strip_suffix("# EOF\n") {
            out.truncate(stripped.len());
        }
        let mut gauges = Registry::default();
        register_build_info(&mut gauges);
        let mut samples = collect_ledger_gauges(ledger, &self.options);
        samples.extend(mig::collect(ledger, self.options.legacy_names));
        register_gauges(&mut gauges, &samples, self.options.legacy_names);
        crate::gang::queue_metrics::register_queue_gauges(&mut gauges, gangs);
        let _ = encode(&mut out, &gauges);
        out
    }
}

/// One of HAMi's cluster gauges: its name, help and label names, and the name and
/// label names it had before HAMi v2.9 (rendered too with `--legacy-metrics`; they
/// name the first values, as some old names carried fewer labels). Every one also
/// carries `zone="vGPU"` first, as HAMi's do.
struct GaugeSpec {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    legacy_name: &'static str,
    legacy_labels: &'static [&'static str],
}

const DEVICE: &[&str] = &["node", "device_uuid", "device_index", "device_type"];
const LEGACY_DEVICE: &[&str] = &["nodeid", "deviceuuid", "deviceidx", "devicetype"];
const POD_DEVICE: &[&str] = &["namespace", "node", "pod", "container_index", "device_uuid"];
const LEGACY_POD_DEVICE: &[&str] = &[
    "podnamespace",
    "nodename",
    "podname",
    "containeridx",
    "deviceuuid",
];

const NODE_GPU_OVERVIEW: GaugeSpec = GaugeSpec {
    name: "hami_node_gpu_overview",
    help: "GPU memory allocated, bytes, with the card's limits as labels",
    labels: &[
        "node",
        "device_uuid",
        "device_index",
        "device_cores",
        "device_memory_limit",
        "device_type",
    ],
    legacy_name: "nodeGPUOverview",
    legacy_labels: &[
        "nodeid",
        "deviceuuid",
        "deviceidx",
        "devicecores",
        "devicememorylimit",
        "devicetype",
    ],
};
const GPU_MEMORY_LIMIT: GaugeSpec = GaugeSpec {
    name: "hami_gpu_memory_limit_bytes",
    help: "GPU memory registered, bytes",
    labels: DEVICE,
    legacy_name: "GPUDeviceMemoryLimit",
    legacy_labels: LEGACY_DEVICE,
};
const GPU_CORE_LIMIT: GaugeSpec = GaugeSpec {
    name: "hami_gpu_core_limit_ratio",
    help: "GPU compute registered, percent",
    labels: DEVICE,
    legacy_name: "GPUDeviceCoreLimit",
    legacy_labels: LEGACY_DEVICE,
};
const GPU_MEMORY_ALLOCATED: GaugeSpec = GaugeSpec {
    name: "hami_gpu_memory_allocated_bytes",
    help: "GPU memory allocated, bytes",
    labels: &[
        "node",
        "device_uuid",
        "device_index",
        "device_cores",
        "device_type",
    ],
    legacy_name: "GPUDeviceMemoryAllocated",
    legacy_labels: &[
        "nodeid",
        "deviceuuid",
        "deviceidx",
        "devicecores",
        "devicetype",
    ],
};
const GPU_SHARED_COUNT: GaugeSpec = GaugeSpec {
    name: "hami_gpu_shared_count",
    help: "vGPU tasks sharing the GPU",
    labels: DEVICE,
    legacy_name: "GPUDeviceSharedNum",
    legacy_labels: LEGACY_DEVICE,
};
/// Not one of HAMi's: HAMi exports the tasks on a GPU (`hami_gpu_shared_count`)
/// but not how many it may hold, so a dashboard could not tell a full card from a
/// partly used one by slots.
const GPU_SLOTS: GaugeSpec = GaugeSpec {
    name: "vgpu_scheduler_gpu_slots",
    help: "vGPU slots the GPU registered: how many tasks may share it (hami_gpu_shared_count holds the ones in use)",
    labels: DEVICE,
    legacy_name: "",
    legacy_labels: &[],
};
const GPU_CORE_ALLOCATED: GaugeSpec = GaugeSpec {
    name: "hami_gpu_core_allocated_ratio",
    help: "GPU compute allocated, percent",
    labels: DEVICE,
    legacy_name: "GPUDeviceCoreAllocated",
    legacy_labels: LEGACY_DEVICE,
};
const NODE_GPU_MEMORY_RATIO: GaugeSpec = GaugeSpec {
    name: "hami_node_gpu_memory_allocated_ratio",
    help: "GPU memory allocated over registered",
    labels: DEVICE,
    legacy_name: "nodeGPUMemoryPercentage",
    legacy_labels: &["nodeid", "deviceuuid", "deviceidx"],
};
const VGPU_MEMORY_ALLOCATED: GaugeSpec = GaugeSpec {
    name: "hami_vgpu_memory_allocated_bytes",
    help: "GPU memory a pod holds, bytes",
    labels: POD_DEVICE,
    legacy_name: "vGPUMemoryAllocated",
    legacy_labels: LEGACY_POD_DEVICE,
};
const VGPU_CORE_ALLOCATED: GaugeSpec = GaugeSpec {
    name: "hami_vgpu_core_allocated_ratio",
    help: "GPU compute a pod holds, percent",
    labels: POD_DEVICE,
    legacy_name: "vGPUCoreAllocated",
    legacy_labels: LEGACY_POD_DEVICE,
};
const RESOURCE_QUOTA_USED: GaugeSpec = GaugeSpec {
    name: "hami_resource_quota_used",
    help: "vGPU quota used per namespace and resource",
    labels: &["namespace", "quota_name", "limit"],
    legacy_name: "QuotaUsed",
    legacy_labels: &["quotanamespace", "quotaName", "limit"],
};
/// HAMi had no legacy name for the limit; its legacy rendering is left out.
const RESOURCE_QUOTA_LIMIT: GaugeSpec = GaugeSpec {
    name: "hami_resource_quota_limit",
    help: "vGPU quota limit per namespace and resource",
    labels: &["namespace", "quota_name"],
    legacy_name: "",
    legacy_labels: &[],
};

/// One gauge's samples, collected once: label values in the order of the spec's
/// names, and the value.
struct Samples {
    spec: &'static GaugeSpec,
    rows: Vec<(Vec<String>, f64)>,
}

impl Samples {
    fn new(spec: &'static GaugeSpec) -> Self {
        Self {
            spec,
            rows: Vec::new(),
        }
    }

    fn push(&mut self, values: Vec<String>, value: f64) {
        debug_assert_eq!(values.len(), self.spec.labels.len(), "{}", self.spec.name);
        self.rows.push((values, value));
    }
}

type FGauge = Gauge<f64, AtomicU64>;
type NamedLabels = Vec<(&'static str, String)>;

const ZONE: &str = "vGPU";

/// Reads the cluster gauges off the ledger once.
fn collect_ledger_gauges(ledger: &Ledger, options: &MetricsOptions) -> Vec<Samples> {
    let mut overview = Samples::new(&NODE_GPU_OVERVIEW);
    let mut mem_limit = Samples::new(&GPU_MEMORY_LIMIT);
    let mut core_limit = Samples::new(&GPU_CORE_LIMIT);
    let mut mem_alloc = Samples::new(&GPU_MEMORY_ALLOCATED);
    let mut shared = Samples::new(&GPU_SHARED_COUNT);
    let mut slots = Samples::new(&GPU_SLOTS);
    let mut core_alloc = Samples::new(&GPU_CORE_ALLOCATED);
    let mut mem_ratio = Samples::new(&NODE_GPU_MEMORY_RATIO);
    for (name, entry) in ledger.nodes() {
        let usage = entry.usage.iter().copied();
        for (d, u) in entry.devices.iter().zip(usage) {
            let device = || {
                vec![
                    name.clone(),
                    d.id.to_string(),
                    d.index.to_string(),
                    d.model.clone(),
                ]
            };
            mem_limit.push(device(), d.devmem as f64 * MIB);
            core_limit.push(device(), f64::from(d.devcore));
            shared.push(device(), f64::from(u.used));
            slots.push(device(), f64::from(d.count));
            core_alloc.push(device(), f64::from(u.usedcores));
            if d.devmem > 0 {
                mem_ratio.push(device(), u.usedmem as f64 / d.devmem as f64);
            }
            overview.push(
                vec![
                    name.clone(),
                    d.id.to_string(),
                    d.index.to_string(),
                    d.devcore.to_string(),
                    // HAMi writes the card's memory in MiB into this label (the
                    // value is in bytes).
                    d.devmem.to_string(),
                    d.model.clone(),
                ],
                u.usedmem as f64 * MIB,
            );
            mem_alloc.push(
                vec![
                    name.clone(),
                    d.id.to_string(),
                    d.index.to_string(),
                    d.devcore.to_string(),
                    d.model.clone(),
                ],
                u.usedmem as f64 * MIB,
            );
        }
    }
    let mut pod_mem = Samples::new(&VGPU_MEMORY_ALLOCATED);
    let mut pod_cores = Samples::new(&VGPU_CORE_ALLOCATED);
    for p in ledger.pods() {
        for (uuid, u) in &p.usage {
            let labels = || {
                vec![
                    p.namespace.clone(),
                    p.node.clone(),
                    p.name.clone(),
                    "0".to_string(),
                    uuid.to_string(),
                ]
            };
            pod_mem.push(labels(), u.usedmem as f64 * MIB);
            pod_cores.push(labels(), f64::from(u.usedcores));
        }
    }
    let mut quota_used = Samples::new(&RESOURCE_QUOTA_USED);
    let mut quota_limit = Samples::new(&RESOURCE_QUOTA_LIMIT);
    for (ns, limits, (mem, cores)) in ledger.quota_report() {
        for (resource, limit, used) in [
            (&options.quota_memory_resource, limits.memory, mem),
            (&options.quota_cores_resource, limits.cores, cores),
        ] {
            quota_used.push(
                vec![
                    ns.clone(),
                    resource.clone(),
                    limit.map(|l| l.to_string()).unwrap_or_default(),
                ],
                used as f64,
            );
            if let Some(limit) = limit {
                quota_limit.push(vec![ns.clone(), resource.clone()], limit as f64);
            }
        }
    }
    vec![
        overview,
        mem_limit,
        core_limit,
        mem_alloc,
        shared,
        slots,
        core_alloc,
        mem_ratio,
        pod_mem,
        pod_cores,
        quota_used,
        quota_limit,
    ]
}

/// Registers `samples` under their names and, with `legacy`, a second time under
/// HAMi's pre-v2.9 names and label names: one collection, two renderings.
fn register_gauges(r: &mut Registry, samples: &[Samples], legacy: bool) {
    let family = |names: &'static [&'static str], rows: &[(Vec<String>, f64)]| {
        let family = Family::<NamedLabels, FGauge>::default();
        for (values, value) in rows {
            let mut labels: NamedLabels = Vec::with_capacity(names.len() + 1);
            labels.push(("zone", ZONE.to_string()));
            labels.extend(names.iter().copied().zip(values.iter().cloned()));
            family.get_or_create(&labels).set(*value);
        }
        family
    };
    for s in samples {
        r.register(s.spec.name, s.spec.help, family(s.spec.labels, &s.rows));
    }
    if legacy {
        for s in samples.iter().filter(|s| !s.spec.legacy_name.is_empty()) {
            r.register(
                s.spec.legacy_name,
                s.spec.help,
                family(s.spec.legacy_labels, &s.rows),
            );
        }
    }
}

/// `hami_build_info`'s labels, as HAMi names them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    revision: String,
    build_date: String,
    go_version: String,
    compiler: String,
    platform: String,
}

impl BuildLabels {
    fn of_this_build() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION").to_string(),
            revision: env!("VGPU_SCHEDULER_REVISION").to_string(),
            build_date: env!("VGPU_SCHEDULER_BUILD_DATE").to_string(),
            go_version: env!("VGPU_SCHEDULER_RUSTC_VERSION").to_string(),
            compiler: "rustc".to_string(),
            platform: go_platform(std::env::consts::OS, std::env::consts::ARCH),
        }
    }
}

/// `os/arch` in Go's spelling (`linux/amd64`, `linux/arm64`), as HAMi's
/// `platform` label has it.
fn go_platform(os: &str, arch: &str) -> String {
    let arch = match arch {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "loongarch64" => "loong64",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        other => other,
    };
    format!("{os}/{arch}")
}

fn register_build_info(r: &mut Registry) {
    let build = Family::<BuildLabels, FGauge>::default();
    build.get_or_create(&BuildLabels::of_this_build()).set(1.0);
    r.register(
        "hami_build_info",
        "Build information: version, source revision, build date, compiler, platform",
        build,
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
        let text = metrics.render(&Ledger::default(), &crate::gang::GangView::default());
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

    fn quota_ledger() -> Ledger {
        let mut ledger = Ledger::default();
        ledger.upsert_quota(
            "team-a",
            "gpu-quota",
            crate::ledger::QuotaLimits {
                memory: Some(40000),
                cores: Some(150),
            },
        );
        ledger
    }

    fn render(options: MetricsOptions, ledger: &Ledger) -> String {
        Metrics::with_options(options).render(ledger, &crate::gang::GangView::default())
    }

    /// The samples of `name`, sorted (the exposition's order is not specified).
    fn lines<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        let mut lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .collect();
        lines.sort_unstable();
        lines
    }

    /// HAMi's `quota_name` is the resource name from the device config.
    #[test]
    fn quota_gauges_are_named_after_the_resources() {
        let text = render(MetricsOptions::default(), &quota_ledger());
        assert_eq!(
            lines(&text, "hami_resource_quota_limit"),
            [
                r#"hami_resource_quota_limit{zone="vGPU",namespace="team-a",quota_name="nvidia.com/gpucores"} 150.0"#,
                r#"hami_resource_quota_limit{zone="vGPU",namespace="team-a",quota_name="nvidia.com/gpumem"} 40000.0"#,
            ],
            "{text}"
        );
        let used = lines(&text, "hami_resource_quota_used");
        assert_eq!(used.len(), 2, "{text}");
        assert!(
            used.contains(
                &r#"hami_resource_quota_used{zone="vGPU",namespace="team-a",quota_name="nvidia.com/gpumem",limit="40000"} 0.0"#
            ),
            "{text}"
        );
        assert!(!text.contains(r#"quota_name="memory""#), "{text}");

        let custom = render(
            MetricsOptions {
                quota_memory_resource: "example.com/vram".into(),
                quota_cores_resource: "example.com/vcores".into(),
                legacy_names: false,
            },
            &quota_ledger(),
        );
        assert!(
            custom.contains(r#"quota_name="example.com/vram",limit="40000"} 0.0"#),
            "{custom}"
        );
        assert!(
            custom.contains(r#"quota_name="example.com/vcores",limit="150"} 0.0"#),
            "{custom}"
        );
    }

    /// `--legacy-metrics` renders the same samples a second time under HAMi's old
    /// names and label names; without it they are absent.
    #[test]
    fn legacy_names_render_the_same_samples() {
        let plain = render(MetricsOptions::default(), &quota_ledger());
        assert!(!plain.contains("QuotaUsed"), "{plain}");
        let legacy = render(
            MetricsOptions {
                legacy_names: true,
                ..MetricsOptions::default()
            },
            &quota_ledger(),
        );
        assert!(
            legacy.contains(
                r#"QuotaUsed{zone="vGPU",quotanamespace="team-a",quotaName="nvidia.com/gpumem",limit="40000"} 0.0"#
            ),
            "{legacy}"
        );
        assert!(legacy.contains("# TYPE QuotaUsed gauge"), "{legacy}");
        assert_eq!(lines(&legacy, "hami_resource_quota_used").len(), 2);
        assert_eq!(legacy.matches("# EOF").count(), 1, "{legacy}");
    }

    /// Next to the tasks on each GPU (`hami_gpu_shared_count`), the slots it
    /// registered: a card holding 1 of 10 is partly used, one holding 4 of 4 is full.
    #[test]
    fn slots_are_rendered_next_to_the_tasks_sharing_each_gpu() {
        use crate::device::model::{ContainerDevice, NVIDIA_VENDOR, vendor_word};
        use crate::device::register_codec::decode_register_annotation;
        use crate::ledger::{NodeEntry, PodEntry, PodPhase};
        const H100: &str = "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc";
        const RTX: &str = "GPU-5e6f7081-92a3-b4c5-d6e7-f8091a2b3c4d";
        let mut ledger = Ledger::default();
        for (node, register) in [
            (
                "gpu-h100-a",
                format!(
                    r#"[{{"id":"{H100}","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true,"index":0,"mode":"hami-core"}}]"#
                ),
            ),
            (
                "gpu-4090-c",
                format!(
                    r#"[{{"id":"{RTX}","count":4,"devmem":24564,"devcore":100,"type":"NVIDIA GeForce RTX 4090","health":true,"index":0,"mode":"hami-core"}}]"#
                ),
            ),
        ] {
            ledger.upsert_node(
                node,
                NodeEntry {
                    devices: decode_register_annotation(&register).unwrap(),
                    ..NodeEntry::default()
                },
            );
        }
        let holding = |uuid: &str| {
            vec![vec![ContainerDevice {
                uuid: uuid.into(),
                vendor: vendor_word(NVIDIA_VENDOR),
                usedmem: 4000,
                usedcores: 10,
                mig: None,
            }]]
        };
        let mut pods = vec![("h100-pod", "gpu-h100-a", H100)];
        pods.extend(["rtx-0", "rtx-1", "rtx-2", "rtx-3"].map(|name| (name, "gpu-4090-c", RTX)));
        for (name, node, uuid) in pods {
            ledger.add_pod(PodEntry::new(
                format!("uid-{name}"),
                "team-a".into(),
                name.into(),
                node.into(),
                holding(uuid),
                0,
                PodPhase::Bound,
            ));
        }
        let text = render(MetricsOptions::default(), &ledger);
        assert_eq!(
            lines(&text, "vgpu_scheduler_gpu_slots"),
            [
                format!(
                    r#"vgpu_scheduler_gpu_slots{{zone="vGPU",node="gpu-4090-c",device_uuid="{RTX}",device_index="0",device_type="NVIDIA GeForce RTX 4090"}} 4.0"#
                ),
                format!(
                    r#"vgpu_scheduler_gpu_slots{{zone="vGPU",node="gpu-h100-a",device_uuid="{H100}",device_index="0",device_type="NVIDIA H100 80GB HBM3"}} 10.0"#
                ),
            ],
            "{text}"
        );
        assert_eq!(
            lines(&text, "hami_gpu_shared_count"),
            [
                format!(
                    r#"hami_gpu_shared_count{{zone="vGPU",node="gpu-4090-c",device_uuid="{RTX}",device_index="0",device_type="NVIDIA GeForce RTX 4090"}} 4.0"#
                ),
                format!(
                    r#"hami_gpu_shared_count{{zone="vGPU",node="gpu-h100-a",device_uuid="{H100}",device_index="0",device_type="NVIDIA H100 80GB HBM3"}} 1.0"#
                ),
            ],
            "{text}"
        );
        assert!(
            text.contains("# TYPE vgpu_scheduler_gpu_slots gauge"),
            "{text}"
        );
    }

    #[test]
    fn build_info_has_hami_labels() {
        let text = render(MetricsOptions::default(), &Ledger::default());
        let line = lines(&text, "hami_build_info");
        assert_eq!(line.len(), 1, "{text}");
        let line = line[0];
        assert!(line.ends_with(" 1.0"), "{line}");
        let expected = format!(
            r#"hami_build_info{{version="{}",revision="#,
            env!("CARGO_PKG_VERSION")
        );
        assert!(line.starts_with(&expected), "{line}");
        for label in ["revision=", "build_date=", "go_version=\"rustc "] {
            assert!(line.contains(label), "{label} in {line}");
        }
        let platform = go_platform(std::env::consts::OS, std::env::consts::ARCH);
        assert!(
            line.contains(&format!(r#",compiler="rustc",platform="{platform}"}}"#)),
            "{line}"
        );
        assert!(!line.contains("zone="), "{line}");
    }

    #[test]
    fn platform_is_spelled_as_go_does() {
        assert_eq!(go_platform("linux", "x86_64"), "linux/amd64");
        assert_eq!(go_platform("linux", "aarch64"), "linux/arm64");
        assert_eq!(go_platform("windows", "x86"), "windows/386");
        assert_eq!(go_platform("linux", "s390x"), "linux/s390x");
    }
}
