//! Where a replay's outcome falls: per workload line (a queue's jobs of one
//! kind), per GPU model, and the jobs never placed, by name. Overall
//! percentiles hide a starved line behind thousands of jobs that started at
//! once; a line of its own does not.

use super::replay::{JobRecord, ReplayResult};
use super::summary::{Percentiles, round};
use super::work::Work;
use serde::Serialize;
use std::collections::BTreeMap;

/// A job counts as having waited once it waited longer than this: a planning
/// recheck, about the least a waiting gang takes.
pub const WAITED: f64 = 60.0;

/// One workload line over the replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LineFigures {
    /// The line's name.
    pub line: String,
    /// Its queue.
    pub queue: String,
    /// Jobs that arrived.
    pub jobs: usize,
    /// Jobs never placed.
    pub never_placed: usize,
    /// Seconds from arrival to start; a job never placed counts its wait until
    /// the replay ended.
    pub waits: Percentiles,
    /// Jobs that waited longer than [`WAITED`] (never-placed ones included).
    pub waited: usize,
    /// The shortest and the longest of those waits, seconds.
    pub waited_range: Option<(f64, f64)>,
    /// The reason most of those jobs were given while they waited.
    pub reason: Option<String>,
    /// What kept them all waiting, when the samples show it: no node of the
    /// card types they ask for had the whole cards one pod needs.
    pub explanation: Option<String>,
    /// What its jobs' pods held.
    pub work: Work,
    /// What its jobs asked: vGPUs × the time they would run within the replay.
    pub demand_vgpu_hours: f64,
}

/// One GPU model over the replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFigures {
    /// Its cards.
    pub cards: u64,
    /// Memory handed out, percent, mean over the samples.
    pub memory_percent: f64,
    /// Compute handed out, percent, mean over the samples.
    pub compute_percent: f64,
    /// The most idle cards of this model on one node: mean and least over the
    /// samples (the least is when a job asking that many cards had no room).
    pub largest_free_block_mean: f64,
    /// See `largest_free_block_mean`.
    pub largest_free_block_least: u64,
    /// What pods held on it.
    pub work: Work,
}

/// A job never placed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NeverPlaced {
    /// Its name.
    pub job: String,
    /// Its queue.
    pub queue: String,
    /// Seconds it waited, until the replay ended.
    pub waited: f64,
    /// Why, as last told.
    pub reason: String,
}

/// What a job never placed is told when nothing said why.
pub const STILL_WAITING: &str = "still waiting when the replay ended";

/// Seconds the job waited: until it started, or until the replay ended.
pub fn waited(job: &JobRecord, end: f64) -> f64 {
    job.started.unwrap_or(end.max(job.arrived)) - job.arrived
}

/// vGPU-hours the job asks within the replay: it cannot run past the end.
pub fn demand_vgpu_hours(job: &JobRecord, end: f64) -> f64 {
    job.gpus as f64 * job.duration.min((end - job.arrived).max(0.0)) / 3600.0
}

/// The workload lines, in the workload's order.
pub fn lines(replay: &ReplayResult) -> Vec<LineFigures> {
    let mut by_line: BTreeMap<usize, Vec<&JobRecord>> = BTreeMap::new();
    for job in &replay.jobs {
        by_line.entry(job.line).or_default().push(job);
    }
    by_line
        .into_values()
        .map(|jobs| {
            let end = replay.seconds;
            let waits: Vec<f64> = jobs.iter().map(|j| waited(j, end)).collect();
            let long: Vec<f64> = waits.iter().copied().filter(|w| *w > WAITED).collect();
            let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
            for job in jobs.iter().filter(|j| waited(j, end) > WAITED) {
                let reason = job.reason.as_deref().or(job.wait_reason.as_deref());
                *reasons.entry(reason.unwrap_or(STILL_WAITING)).or_default() += 1;
            }
            let reason = reasons
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(r, _)| (*r).to_string());
            let mut work = Work::default();
            for job in &jobs {
                work += job.work;
            }
            LineFigures {
                line: jobs
                    .first()
                    .map(|j| j.line_name.clone())
                    .unwrap_or_default(),
                queue: jobs.first().map(|j| j.queue.clone()).unwrap_or_default(),
                jobs: jobs.len(),
                never_placed: jobs.iter().filter(|j| j.started.is_none()).count(),
                waits: Percentiles::of(waits),
                waited: long.len(),
                waited_range: (!long.is_empty()).then(|| {
                    let low = long.iter().copied().fold(f64::MAX, f64::min);
                    let high = long.iter().copied().fold(0.0, f64::max);
                    (round(low), round(high))
                }),
                reason,
                explanation: no_room(replay, &jobs),
                work: rounded(work),
                demand_vgpu_hours: round(jobs.iter().map(|j| demand_vgpu_hours(j, end)).sum()),
            }
        })
        .collect()
}

/// `no H100 node had 8 free cards`: when every job of the line that waited
/// asked whole cards and, at every sample while it waited, no node of the
/// models it may use had that many idle.
fn no_room(replay: &ReplayResult, jobs: &[&JobRecord]) -> Option<String> {
    let end = replay.seconds;
    let samples = &replay.model_samples;
    let mut said = None;
    for job in jobs.iter().filter(|j| waited(j, end) > WAITED) {
        let cards = u64::from(job.whole_cards?);
        let allowed = |model: &str| {
            job.gpu_types.is_empty()
                || job
                    .gpu_types
                    .iter()
                    .any(|t| model.to_lowercase().contains(&t.to_lowercase()))
        };
        let until = job.started.unwrap_or(end);
        let from = samples.partition_point(|s| s.seconds < job.arrived);
        let window = samples[from..]
            .iter()
            .take_while(|s| s.seconds < until)
            .filter(|s| allowed(&s.model));
        let most = window.map(|s| s.largest_free_block).max()?;
        if most >= cards {
            return None;
        }
        let kind = if job.gpu_types.is_empty() {
            String::new()
        } else {
            format!("{} ", job.gpu_types.join(" or "))
        };
        let plural = if cards == 1 { "" } else { "s" };
        said = Some(format!("no {kind}node had {cards} free card{plural}"));
    }
    said
}

/// The GPU models, in name order.
pub fn models(replay: &ReplayResult) -> BTreeMap<String, ModelFigures> {
    let mut by_model: BTreeMap<&str, Vec<&super::observe::ModelSample>> = BTreeMap::new();
    for s in &replay.model_samples {
        by_model.entry(s.model.as_str()).or_default().push(s);
    }
    by_model
        .into_iter()
        .map(|(model, samples)| {
            let n = samples.len().max(1) as f64;
            let mean = |f: fn(&super::observe::ModelSample) -> f64| {
                round(samples.iter().map(|s| f(s)).sum::<f64>() / n)
            };
            let figures = ModelFigures {
                cards: samples.first().map_or(0, |s| s.cards),
                memory_percent: mean(|s| s.memory_percent),
                compute_percent: mean(|s| s.compute_percent),
                largest_free_block_mean: mean(|s| s.largest_free_block as f64),
                largest_free_block_least: samples
                    .iter()
                    .map(|s| s.largest_free_block)
                    .min()
                    .unwrap_or(0),
                work: rounded(replay.work_by_model.get(model).copied().unwrap_or_default()),
            };
            (model.to_string(), figures)
        })
        .collect()
}

/// Every job never placed, in arrival order.
pub fn never_placed(replay: &ReplayResult) -> Vec<NeverPlaced> {
    replay
        .jobs
        .iter()
        .filter(|j| j.started.is_none())
        .map(|j| NeverPlaced {
            job: j.name.clone(),
            queue: j.queue.clone(),
            waited: round(waited(j, replay.seconds)),
            reason: j.reason.clone().unwrap_or_else(|| STILL_WAITING.into()),
        })
        .collect()
}

/// The same work, rounded for the report.
pub fn rounded(w: Work) -> Work {
    Work {
        vgpu_hours: round(w.vgpu_hours),
        card_hours: round(w.card_hours),
        compute_card_hours: round(w.compute_card_hours),
        memory_gib_hours: round(w.memory_gib_hours),
    }
}
