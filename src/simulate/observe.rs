//! What a replay measures of the cluster at one moment: how much of the GPUs is
//! handed out, and how fragmented what is left is.

use crate::ledger::Ledger;
use serde::Serialize;

/// The cluster at one moment of a replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// Seconds since the replay started.
    pub seconds: f64,
    /// GPU memory handed out, percent of all.
    pub memory_percent: f64,
    /// GPU compute handed out, percent of all.
    pub compute_percent: f64,
    /// Cards with something on them and memory left: neither idle nor full.
    pub partly_used_cards: u64,
    /// Cards with nothing on them.
    pub idle_cards: u64,
    /// The most whole cards one pod could still get (idle cards on one node).
    pub largest_whole_card_request: u64,
    /// The most memory one vGPU could still get on a single card, MiB.
    pub largest_slice_mib: u64,
    /// Pods waiting for a node (gated gang members included).
    pub pending_pods: u64,
}

/// Measures the GPUs in the ledger; `pending_pods` is the caller's.
pub fn measure(ledger: &Ledger, seconds: f64, pending_pods: u64) -> Sample {
    let (mut mem, mut mem_total, mut cores, mut cores_total) = (0u64, 0u64, 0u64, 0u64);
    let mut sample = Sample {
        seconds,
        pending_pods,
        ..Sample::default()
    };
    for (_, entry) in ledger.nodes() {
        let mut idle_here = 0u64;
        for (device, usage) in entry.devices.iter().zip(&entry.usage) {
            let used_mem = usage.usedmem.min(device.devmem);
            mem += used_mem;
            mem_total += device.devmem;
            cores += u64::from(usage.usedcores.min(device.devcore));
            cores_total += u64::from(device.devcore);
            let idle = usage.used == 0;
            if idle {
                sample.idle_cards += 1;
                idle_here += 1;
            } else if used_mem < device.devmem && usage.used < device.count {
                sample.partly_used_cards += 1;
            }
            if usage.used < device.count && usage.usedcores < device.devcore {
                sample.largest_slice_mib = sample.largest_slice_mib.max(device.devmem - used_mem);
            }
        }
        sample.largest_whole_card_request = sample.largest_whole_card_request.max(idle_here);
    }
    let percent = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    sample.memory_percent = percent(mem, mem_total);
    sample.compute_percent = percent(cores, cores_total);
    sample
}

/// One queue at one moment, as the last planning cycle saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueSample {
    /// Seconds since the replay started.
    pub seconds: f64,
    /// The queue.
    pub queue: String,
    /// vGPUs (`nvidia.com/gpu`) its jobs hold.
    pub allocated_gpus: f64,
    /// vGPUs it deserves (`None` without a plugin that computes it).
    pub deserved_gpus: Option<f64>,
    /// Its dominant share of what it deserves.
    pub share: f64,
}

/// The queues of the last planning cycle's report.
pub fn measure_queues(view: &crate::gang::view::GangView, seconds: f64) -> Vec<QueueSample> {
    let gpus = |r: &crate::resources::Resources| r.get("nvidia.com/gpu") as f64 / 1000.0;
    view.queues
        .iter()
        .filter(|q| q.leaf)
        .map(|q| QueueSample {
            seconds,
            queue: q.name.clone(),
            allocated_gpus: gpus(&q.allocated),
            deserved_gpus: q.deserved.as_ref().map(gpus),
            share: q.share,
        })
        .collect()
}

/// One GPU model at one moment: how full its cards are and the largest block
/// still free, which is what a job asking for that model can get.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelSample {
    /// Seconds since the replay started.
    pub seconds: f64,
    /// The model, as the device plugin registered it.
    pub model: String,
    /// Its cards.
    pub cards: u64,
    /// Its cards with nothing on them.
    pub idle_cards: u64,
    /// Its memory handed out, percent.
    pub memory_percent: f64,
    /// Its compute handed out, percent.
    pub compute_percent: f64,
    /// The most idle cards of this model on one node.
    pub largest_free_block: u64,
}

/// Every GPU model in the ledger, in name order.
pub fn measure_models(ledger: &Ledger, seconds: f64) -> Vec<ModelSample> {
    // (cards, idle, memory used, memory, cores used, cores, largest block)
    let mut models: std::collections::BTreeMap<&str, [u64; 7]> = Default::default();
    for (_, entry) in ledger.nodes() {
        let mut idle_here: std::collections::BTreeMap<&str, u64> = Default::default();
        for (device, usage) in entry.devices.iter().zip(&entry.usage) {
            let m = models.entry(device.model.as_str()).or_default();
            m[0] += 1;
            m[2] += usage.usedmem.min(device.devmem);
            m[3] += device.devmem;
            m[4] += u64::from(usage.usedcores.min(device.devcore));
            m[5] += u64::from(device.devcore);
            let idle = idle_here.entry(device.model.as_str()).or_default();
            if usage.used == 0 {
                m[1] += 1;
                *idle += 1;
            }
        }
        for (model, idle) in idle_here {
            if let Some(m) = models.get_mut(model) {
                m[6] = m[6].max(idle);
            }
        }
    }
    let percent = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    models
        .into_iter()
        .map(|(model, m)| ModelSample {
            seconds,
            model: model.to_string(),
            cards: m[0],
            idle_cards: m[1],
            memory_percent: percent(m[2], m[3]),
            compute_percent: percent(m[4], m[5]),
            largest_free_block: m[6],
        })
        .collect()
}
