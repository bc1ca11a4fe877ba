//! What a replay comes to, per variant: pending times by queue and by job size,
//! gang waits, jobs never placed and why, evictions, allocation and
//! fragmentation over the replay; and which variant wins on what. Everything is
//! computed in a fixed order from the replay's records, so the same replay gives
//! the same summary, byte for byte.

use super::observe::Sample;
use super::replay::ReplayResult;
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
    /// The same per job size (vGPUs asked, all pods together).
    pub pending_seconds_by_size: BTreeMap<String, Percentiles>,
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
}

/// The whole summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The seed the workload was expanded with.
    pub seed: u64,
    /// Every variant, in the order given.
    pub variants: Vec<VariantSummary>,
    /// For each measure, the variant that does best (ties: the first given).
    pub winners: BTreeMap<String, String>,
}

/// Job sizes as the report groups them.
fn size_class(gpus: u64) -> &'static str {
    match gpus {
        0..=1 => "1 vGPU",
        2..=8 => "2-8 vGPUs",
        9..=32 => "9-32 vGPUs",
        _ => "33+ vGPUs",
    }
}

/// Rounds to microseconds (or millionths of a percent): enough for any report,
/// and the same figures on every machine.
fn round(v: f64) -> f64 {
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
    let mut by_size = BTreeMap::new();
    for job in &replay.jobs {
        by_queue.entry(job.queue.clone()).or_insert(());
        by_size.entry(size_class(job.gpus)).or_insert(());
    }
    let mut never_placed = BTreeMap::new();
    for job in replay.jobs.iter().filter(|j| j.started.is_none()) {
        let reason = job
            .reason
            .clone()
            .unwrap_or_else(|| "still waiting when the replay ended".into());
        *never_placed.entry(reason).or_default() += 1;
    }
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
        pending_seconds_by_size: by_size
            .into_keys()
            .map(|s| (s.to_string(), waits(&|j| size_class(j.gpus) == s)))
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

/// The measures variants are compared on: name, value, whether higher is better.
type Measure = (&'static str, fn(&VariantSummary) -> f64, bool);

const MEASURES: [Measure; 7] = [
    ("most jobs placed", |v| v.placed as f64, true),
    (
        "shortest p95 pending time",
        |v| v.pending_seconds.p95,
        false,
    ),
    ("shortest p95 gang wait", |v| v.gang_wait_seconds.p95, false),
    (
        "most GPU memory in use (mean)",
        |v| v.memory_percent.mean,
        true,
    ),
    (
        "fewest partly used cards (mean)",
        |v| v.partly_used_cards.mean,
        false,
    ),
    (
        "largest whole-card request that fits (mean)",
        |v| v.largest_whole_card_request.mean,
        true,
    ),
    ("fewest evictions", |v| v.pod_evictions as f64, false),
];

/// The summary of every variant, with the winner of each measure.
pub fn compare(seed: u64, variants: Vec<VariantSummary>) -> Summary {
    let mut winners = BTreeMap::new();
    for (measure, value, higher) in MEASURES {
        let best = variants.iter().reduce(|best, v| {
            let (a, b) = (value(best), value(v));
            let better = if higher { b > a } else { b < a };
            if better { v } else { best }
        });
        if let Some(best) = best {
            winners.insert(measure.to_string(), best.name.clone());
        }
    }
    Summary {
        seed,
        variants,
        winners,
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
