//! Queue metrics in the spirit of Volcano's `volcano_queue_*`: allocated and
//! deserved resources, share, weight, overuse and PodGroups per phase, from the last
//! planning cycle (computed at scrape time, never stale beyond one cycle).

use super::view::GangView;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type FGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueResourceLabels {
    queue: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueuePhaseLabels {
    queue: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NativeGroupLabels {
    queue: String,
    phase: String,
    reason: String,
}

/// Registers the queue gauges of `view` into `r`.
pub fn register_queue_gauges(r: &mut Registry, view: &GangView) {
    let allocated = Family::<QueueResourceLabels, FGauge>::default();
    let deserved = Family::<QueueResourceLabels, FGauge>::default();
    let capability = Family::<QueueResourceLabels, FGauge>::default();
    let share = Family::<QueueLabels, FGauge>::default();
    let weight = Family::<QueueLabels, FGauge>::default();
    let overused = Family::<QueueLabels, FGauge>::default();
    let podgroups = Family::<QueuePhaseLabels, FGauge>::default();
    for q in &view.queues {
        let label = QueueLabels {
            queue: q.name.clone(),
        };
        share.get_or_create(&label).set(q.share);
        weight.get_or_create(&label).set(f64::from(q.weight));
        overused
            .get_or_create(&label)
            .set(if q.overused { 1.0 } else { 0.0 });
        let put = |family: &Family<QueueResourceLabels, FGauge>, r: &crate::volcano::Resources| {
            for (dim, milli) in r.iter() {
                family
                    .get_or_create(&QueueResourceLabels {
                        queue: q.name.clone(),
                        resource: dim.to_string(),
                    })
                    .set(milli as f64 / 1000.0);
            }
        };
        put(&allocated, &q.allocated);
        if let Some(d) = &q.deserved {
            put(&deserved, d);
        }
        if let Some(c) = &q.real_capability {
            put(&capability, c);
        }
    }
    for (queue, counts) in &view.gang_counts {
        for (phase, n) in [
            ("Pending", counts.pending),
            ("Inqueue", counts.inqueue),
            ("Running", counts.running),
            ("Completed", counts.completed),
        ] {
            podgroups
                .get_or_create(&QueuePhaseLabels {
                    queue: queue.clone(),
                    phase: phase.into(),
                })
                .set(n as f64);
        }
    }
    // Kubernetes' own PodGroups are not in `kubectl get pg`; this says how many
    // of a queue's gangs they are and why those wait (reasons are a small set).
    let native = Family::<NativeGroupLabels, FGauge>::default();
    for g in view.gangs.iter().filter(|g| g.api.is_some()) {
        native
            .get_or_create(&NativeGroupLabels {
                queue: g.queue.clone(),
                phase: g.phase.as_str().into(),
                reason: g.reason.unwrap_or_default().into(),
            })
            .inc();
    }
    r.register(
        "vgpu_scheduler_queue_native_podgroups",
        "Gangs of a queue declared by Kubernetes' own PodGroups (scheduling.k8s.io), by phase and the reason they wait",
        native,
    );
    let pipelined = Family::<QueueLabels, FGauge>::default();
    for plan in &view.pipelined {
        pipelined
            .get_or_create(&QueueLabels {
                queue: plan.queue.clone(),
            })
            .inc();
    }
    r.register(
        "vgpu_scheduler_queue_pipelined_pods",
        "Pods of a queue whose GPUs are promised on room still held by evicted pods",
        pipelined,
    );
    r.register(
        "vgpu_scheduler_queue_allocated",
        "Resources held by a queue's pods (cores, bytes, vGPUs, MiB, percent), by resource",
        allocated,
    );
    r.register(
        "vgpu_scheduler_queue_deserved",
        "A queue's deserved share (proportion or capacity plugin), by resource",
        deserved,
    );
    r.register(
        "vgpu_scheduler_queue_capability",
        "A queue's effective limit (real capability), by resource",
        capability,
    );
    r.register(
        "vgpu_scheduler_queue_share",
        "Dominant share: the largest allocated/deserved ratio over resources",
        share,
    );
    r.register("vgpu_scheduler_queue_weight", "Queue weight", weight);
    r.register(
        "vgpu_scheduler_queue_overused",
        "1 when the queue holds at least its deserved share and gets no more",
        overused,
    );
    r.register(
        "vgpu_scheduler_queue_podgroups",
        "Gangs (PodGroups and queue pods) of a queue by phase",
        podgroups,
    );
}
