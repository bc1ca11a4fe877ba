//! Queue metrics in the spirit of Volcano's `volcano_queue_*`: allocated and
//! deserved resources, share, weight, overuse and PodGroups per phase, from the last
//! planning cycle (computed at scrape time, never stale beyond one cycle).

use super::membership::DEFAULT_QUEUE;
use super::view::GangView;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;
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
struct PhaseLabels {
    phase: String,
}

/// The queues a series may name: the cluster's Queue objects as the last cycle
/// saw them, and the default queue. A pod may name any queue in an annotation;
/// labelling by those names would let pods add series without bound.
pub fn queues_with_series(view: &GangView) -> BTreeSet<&str> {
    view.queues
        .iter()
        .map(|q| q.name.as_str())
        .chain([DEFAULT_QUEUE])
        .collect()
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
    let existing = queues_with_series(view);
    let missing = Family::<PhaseLabels, FGauge>::default();
    for (queue, counts) in &view.gang_counts {
        for (phase, n) in [
            ("Pending", counts.pending),
            ("Inqueue", counts.inqueue),
            ("Running", counts.running),
            ("Completed", counts.completed),
        ] {
            if existing.contains(queue.as_str()) {
                podgroups
                    .get_or_create(&QueuePhaseLabels {
                        queue: queue.clone(),
                        phase: phase.into(),
                    })
                    .set(n as f64);
            } else {
                missing
                    .get_or_create(&PhaseLabels {
                        phase: phase.into(),
                    })
                    .inc_by(n as f64);
            }
        }
    }
    // Kubernetes' own PodGroups are not in `kubectl get pg`; this says how many
    // of a queue's gangs they are and why those wait (reasons are a small set).
    let native = Family::<NativeGroupLabels, FGauge>::default();
    for g in view.gangs.iter().filter(|g| g.api.is_some()) {
        native
            .get_or_create(&NativeGroupLabels {
                // A queue no Queue object declares is not a label value (see
                // `queues_with_series`): such gangs count under an empty queue.
                queue: if existing.contains(g.queue.as_str()) {
                    g.queue.clone()
                } else {
                    String::new()
                },
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
    for plan in view
        .pipelined
        .iter()
        .filter(|p| existing.contains(p.queue.as_str()))
    {
        pipelined
            .get_or_create(&QueueLabels {
                queue: plan.queue.clone(),
            })
            .inc();
    }
    r.register(
        "vgpu_scheduler_podgroups_in_missing_queues",
        "Gangs (PodGroups and queue pods) naming a queue that does not exist, by phase",
        missing,
    );
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
