//! Work a replay delivered: what the bound pods held, for how long. Memory in
//! use at a moment says how full the cards were, not how much got done: a
//! policy that spreads half-idle pods over every card shows more memory in use
//! while running fewer jobs. So the report counts held GPUs over time, from each
//! pod's bind to its end (finished, evicted, or cut off by the horizon).

use crate::device::allocation_codec::decode_pod_devices;
use crate::ledger::Ledger;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::ops::AddAssign;

/// Amounts of GPU held over time, in hours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Work {
    /// vGPUs held × hours.
    pub vgpu_hours: f64,
    /// Whole-card equivalents × hours: each card held counts the larger of the
    /// shares of its memory and of its compute the pod was given.
    pub card_hours: f64,
    /// Compute × hours, in whole cards of compute: a vGPU without a compute
    /// limit counts the share of the card's memory it holds.
    pub compute_card_hours: f64,
    /// GPU memory × hours, GiB.
    pub memory_gib_hours: f64,
}

impl AddAssign for Work {
    fn add_assign(&mut self, other: Self) {
        self.vgpu_hours += other.vgpu_hours;
        self.card_hours += other.card_hours;
        self.compute_card_hours += other.compute_card_hours;
        self.memory_gib_hours += other.memory_gib_hours;
    }
}

impl Work {
    /// The same amounts held `hours` longer.
    fn times(self, hours: f64) -> Self {
        Self {
            vgpu_hours: self.vgpu_hours * hours,
            card_hours: self.card_hours * hours,
            compute_card_hours: self.compute_card_hours * hours,
            memory_gib_hours: self.memory_gib_hours * hours,
        }
    }
}

/// A card as registered: its model and size.
#[derive(Debug, Clone)]
struct Card {
    model: String,
    devmem: u64,
    devcore: u32,
}

/// What one bound pod holds, per GPU model (amounts per hour).
type Holding = BTreeMap<String, Work>;

/// The GPUs pods hold, and the work delivered so far, per job and per model.
#[derive(Debug, Default)]
pub struct WorkMeter {
    cards: HashMap<String, Card>,
    /// Pod key to (its job, bound since (seconds), what it holds).
    held: HashMap<String, (usize, f64, Holding)>,
    /// Work delivered, per job.
    pub by_job: BTreeMap<usize, Work>,
    /// Work delivered, per GPU model.
    pub by_model: BTreeMap<String, Work>,
}

impl WorkMeter {
    /// A meter for the cards registered in the ledger.
    pub fn new(ledger: &Ledger) -> Self {
        let mut cards = HashMap::new();
        for (_, entry) in ledger.nodes() {
            for d in &entry.devices {
                let card = Card {
                    model: d.model.clone(),
                    devmem: d.devmem,
                    devcore: d.devcore,
                };
                cards.insert(d.id.to_string(), card);
            }
        }
        Self {
            cards,
            ..Self::default()
        }
    }

    /// A pod of `job` was bound at `seconds` with the devices of its
    /// `hami.io/vgpu-devices-allocated` annotation (unreadable: it holds nothing
    /// the report can count).
    pub fn bound(&mut self, pod: &str, job: usize, seconds: f64, devices: &str) {
        let mut holding = Holding::new();
        for device in decode_pod_devices(devices)
            .unwrap_or_default()
            .iter()
            .flatten()
        {
            let Some(card) = self.cards.get(&*device.uuid) else {
                continue;
            };
            let memory = share(device.usedmem as f64, card.devmem as f64);
            let compute = if device.usedcores == 0 {
                memory
            } else {
                share(f64::from(device.usedcores), f64::from(card.devcore))
            };
            *holding.entry(card.model.clone()).or_default() += Work {
                vgpu_hours: 1.0,
                card_hours: memory.max(compute),
                compute_card_hours: compute,
                memory_gib_hours: device.usedmem as f64 / 1024.0,
            };
        }
        self.held.insert(pod.to_string(), (job, seconds, holding));
    }

    /// The pod is gone (finished, evicted, deleted) at `seconds`: what it held
    /// until then is delivered.
    pub fn released(&mut self, pod: &str, seconds: f64) {
        let Some((job, since, holding)) = self.held.remove(pod) else {
            return;
        };
        let hours = (seconds - since).max(0.0) / 3600.0;
        for (model, per_hour) in holding {
            let work = per_hour.times(hours);
            *self.by_job.entry(job).or_default() += work;
            *self.by_model.entry(model).or_default() += work;
        }
    }

    /// The replay ended at `seconds`: pods still bound delivered until then.
    pub fn end(&mut self, seconds: f64) {
        let mut pods: Vec<String> = self.held.keys().cloned().collect();
        // A fixed order, so that sums come out the same on every run.
        pods.sort();
        for pod in pods {
            self.released(&pod, seconds);
        }
    }
}

/// `part` of `whole`, at most all of it.
fn share(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        (part / whole).min(1.0)
    }
}
