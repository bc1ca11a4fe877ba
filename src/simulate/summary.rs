//! What a replay comes to, per variant: pending times by queue and by job size,
//! gang waits, jobs never placed and why, evictions, allocation and
//! fragmentation over the replay; work delivered and demand met; breakdowns
//! by workload line and GPU model; and the verdict. Everything is
//! computed in a fixed order from the replay's records, so the same replay gives
//! the same summary, byte for byte.

use super::breakdown::{self, LineFigures, ModelFigures, NeverPlaced};
use super::observe::Sample;
use super::replay::ReplayResult;
use super::verdict::Standing;
use super::work::Work;
use serde::Serialize;
use std::collections::BTreeMap;

/// Percentiles of a set of durations, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values`.
    pub fn of(mut values: Vec<f64>) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let i = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
            round(values[i - 1])
        };
        Self {
            count: values.len(),
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
        }
    }
}

/// Mean and peak of a quantity over the samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OverTime {
    /// Mean over the samples.
    pub mean: f64,
    /// Highest sample.
    pub peak: f64,
}

impl OverTime {
    fn of(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let values: Vec<f64> = samples.iter().map(f).collect();
        Self {
            mean: round(values.iter().sum::<f64>() / values.len() as f64),
            peak: round(values.iter().copied().fold(f64::MIN, f64::max)),
        }
    }
}

/// A queue over the replay: what it held against what it deserved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueFigures {
    /// vGPUs held, mean over the samples.
    pub allocated_gpus: f64,
    /// vGPUs deserved, mean over the samples where a plugin computed it.
    pub deserved_gpus: Option<f64>,
    /// Dominant share of what it deserves, mean and peak.
    pub share: OverTime,
}

/// One variant's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VariantSummary {
    /// Its name.
    pub name: String,
    /// Its flags.
    pub flags: String,
    /// Jobs that arrived.
    pub jobs: usize,
    /// Jobs whose minimum was placed.
    pub placed: usize,
    /// Jobs never placed, by the last reason they were given.
    pub never_placed: BTreeMap<String, usize>,
    /// Seconds from arrival to start, over placed jobs.
    pub pending_seconds: Percentiles,
    /// The same per queue.
    pub pending_seconds_by_queue: BTreeMap<String, Percentiles>,
    /// The same per job size (vGPUs asked, all pods together), smallest first.
    pub pending_seconds_by_size: Vec<SizeGroup>,
    /// The same for gangs only.
    pub gang_wait_seconds: Percentiles,
    /// Jobs evicted (each time counted).
    pub job_evictions: u64,
    /// Pods evicted.
    pub pod_evictions: u64,
    /// GPU memory handed out, percent.
    pub memory_percent: OverTime,
    /// GPU compute handed out, percent.
    pub compute_percent: OverTime,
    /// Cards neither idle nor full.
    pub partly_used_cards: OverTime,
    /// Most whole cards one pod could still get.
    pub largest_whole_card_request: OverTime,
    /// Each queue's holdings against what it deserves.
    pub queues: BTreeMap<String, QueueFigures>,
    /// Seconds replayed.
    pub seconds: f64,
    /// What the pods held over the replay.
    pub work: Work,
    /// vGPU-hours delivered against those asked (each job's vGPUs × the time
    /// it would run within the replay), percent; a job run again after an
    /// eviction counts once.
    pub demand_met_percent: f64,
    /// Each workload line, in the workload's order.
    pub lines: Vec<LineFigures>,
    /// The line that fared worst (longest p95 wait), if any job waited.
    pub worst_off: Option<LineFigures>,
    /// Each GPU model.
    pub models: BTreeMap<String, ModelFigures>,
    /// Every job never placed, by name, with its reason.
    pub never_placed_jobs: Vec<NeverPlaced>,
}

/// What a report is of: the cluster, the workload, how long, by which version.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inputs {
    /// Where the cluster came from, and its nodes, cards by model and queues.
    pub cluster: String,
    /// The workload file, its lines and jobs.
    pub workload: String,
    /// Time replayed: the horizon, or until nothing moved.
    pub horizon: String,
    /// Virtual time between samples.
    pub sample_every: String,
    /// This program's version.
    pub version: String,
}

/// Pending times of one job-size group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeGroup {
    /// `1 vGPU`, `2-8 vGPUs`, ...
    pub size: String,
    /// Its pending times.
    #[serde(flatten)]
    pub pending: Percentiles,
}

/// The whole summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The seed the workload was expanded with.
    pub seed: u64,
    /// What was replayed.
    pub inputs: Inputs,
    /// Every variant, in the order given.
    pub variants: Vec<VariantSummary>,
    /// Which variant to choose, in one paragraph.
    pub verdict: String,
    /// Each measure: the best variant(s), ties named, and the margin.
    pub standings: Vec<Standing>,
}

/// Job sizes as the report groups them, smallest first.
const SIZE_CLASSES: [&str; 4] = ["1 vGPU", "2-8 vGPUs", "9-32 vGPUs", "33+ vGPUs"];

/// The size group of a job of `gpus` vGPUs.
fn size_class(gpus: u64) -> &'static str {
    match gpus {
        0..=1 => SIZE_CLASSES[0],
        2..=8 => SIZE_CLASSES[1],
        9..=32 => SIZE_CLASSES[2],
        _ => SIZE_CLASSES[3],
    }
}

/// Rounds to microseconds (or millionths of a percent): enough for any report,
/// and the same figures on every machine.
pub fn round(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// Summarises one replay.
pub fn summarise(name: &str, flags: &str, replay: &ReplayResult) -> VariantSummary {
    let waits = |keep: &dyn Fn(&super::replay::JobRecord) -> bool| {
        Percentiles::of(
            replay
                .jobs
                .iter()
                .filter(|j| keep(j))
                .filter_map(|j| j.started.map(|s| s - j.arrived))
                .collect(),
        )
    };
    let mut by_queue = BTreeMap::new();
    for job in &replay.jobs {
        by_queue.entry(job.queue.clone()).or_insert(());
    }
    let mut never_placed = BTreeMap::new();
    for job in replay.jobs.iter().filter(|j| j.started.is_none()) {
        let reason = job
            .reason
            .clone()
            .unwrap_or_else(|| breakdown::STILL_WAITING.into());
        *never_placed.entry(reason).or_default() += 1;
    }
    let mut work = Work::default();
    for job in &replay.jobs {
        work += job.work;
    }
    let demand: f64 = replay
        .jobs
        .iter()
        .map(|j| breakdown::demand_vgpu_hours(j, replay.seconds))
        .sum();
    let met: f64 = replay
        .jobs
        .iter()
        .map(|j| {
            j.work
                .vgpu_hours
                .min(breakdown::demand_vgpu_hours(j, replay.seconds))
        })
        .sum();
    let lines = breakdown::lines(replay);
    let worst_off = super::verdict::worst_off(&lines).cloned();
    VariantSummary {
        name: name.to_string(),
        flags: flags.to_string(),
        jobs: replay.jobs.len(),
        placed: replay.jobs.iter().filter(|j| j.started.is_some()).count(),
        never_placed,
        pending_seconds: waits(&|_| true),
        pending_seconds_by_queue: by_queue
            .into_keys()
            .map(|q| {
                let p = waits(&|j| j.queue == q);
                (q, p)
            })
            .collect(),
        pending_seconds_by_size: SIZE_CLASSES
            .iter()
            .filter(|s| replay.jobs.iter().any(|j| size_class(j.gpus) == **s))
            .map(|s| SizeGroup {
                size: s.to_string(),
                pending: waits(&|j| size_class(j.gpus) == *s),
            })
            .collect(),
        gang_wait_seconds: waits(&|j| j.gang),
        job_evictions: replay.jobs.iter().map(|j| u64::from(j.evictions)).sum(),
        pod_evictions: replay.evicted_pods,
        memory_percent: OverTime::of(&replay.samples, |s| s.memory_percent),
        compute_percent: OverTime::of(&replay.samples, |s| s.compute_percent),
        partly_used_cards: OverTime::of(&replay.samples, |s| s.partly_used_cards as f64),
        largest_whole_card_request: OverTime::of(&replay.samples, |s| {
            s.largest_whole_card_request as f64
        }),
        queues: queue_figures(replay),
        seconds: round(replay.seconds),
        work: breakdown::rounded(work),
        demand_met_percent: if demand > 0.0 {
            round(100.0 * met / demand)
        } else {
            0.0
        },
        lines,
        worst_off,
        models: breakdown::models(replay),
        never_placed_jobs: breakdown::never_placed(replay),
    }
}

fn queue_figures(replay: &ReplayResult) -> BTreeMap<String, QueueFigures> {
    let mut by_queue: BTreeMap<&str, Vec<&super::observe::QueueSample>> = BTreeMap::new();
    for q in &replay.queue_samples {
        by_queue.entry(q.queue.as_str()).or_default().push(q);
    }
    by_queue
        .into_iter()
        .map(|(name, samples)| {
            let n = samples.len().max(1) as f64;
            let deserved: Vec<f64> = samples.iter().filter_map(|q| q.deserved_gpus).collect();
            let shares: Vec<f64> = samples.iter().map(|q| q.share).collect();
            let figures = QueueFigures {
                allocated_gpus: round(samples.iter().map(|q| q.allocated_gpus).sum::<f64>() / n),
                deserved_gpus: (!deserved.is_empty())
                    .then(|| round(deserved.iter().sum::<f64>() / deserved.len() as f64)),
                share: OverTime {
                    mean: round(shares.iter().sum::<f64>() / n),
                    peak: round(shares.iter().copied().fold(0.0, f64::max)),
                },
            };
            (name.to_string(), figures)
        })
        .collect()
}

/// The summary of every variant, with the verdict and each measure's standing.
pub fn compare(seed: u64, inputs: Inputs, variants: Vec<VariantSummary>) -> Summary {
    Summary {
        seed,
        inputs,
        verdict: super::verdict::verdict(&variants),
        standings: super::verdict::standings(&variants),
        variants,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!((p.count, p.p50, p.p95, p.p99), (100, 50.0, 95.0, 99.0));
        assert_eq!(Percentiles::of(vec![]).count, 0);
        assert_eq!(Percentiles::of(vec![7.0]).p99, 7.0);
    }

    #[test]
    fn sizes_group_as_the_report_shows_them() {
        assert_eq!(size_class(1), "1 vGPU");
        assert_eq!(size_class(8), "2-8 vGPUs");
        assert_eq!(size_class(32), "9-32 vGPUs");
        assert_eq!(size_class(64), "33+ vGPUs");
    }
}
