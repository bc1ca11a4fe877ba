//! Variants replayed side by side, one thread each (as many at once as there
//! are CPUs): each replay has its own scheduler, cluster and virtual clock and
//! shares nothing with the others but the read-only inputs, so running them
//! together changes no result, only the wait. Each variant's progress bar
//! shows its jobs, time taken and the time left.

use super::replay::{self, ReplayInput, ReplayResult, VariantSetup};
use super::workload::{Job, Workload};
use crate::cluster::file::ClusterObject;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// What every variant replays.
pub struct Shared<'a> {
    /// The cluster file's objects.
    pub cluster: &'a [ClusterObject],
    /// The workload.
    pub workload: &'a Workload,
    /// Its jobs, in arrival order.
    pub jobs: &'a [Job],
    /// Time between samples.
    pub sample_every: Duration,
}

/// Replays every variant; results in the order of `setups`.
pub fn replay_all(
    setups: &[VariantSetup],
    shared: &Shared<'_>,
    progress: bool,
    threads: usize,
) -> Vec<Result<ReplayResult, String>> {
    let bars = MultiProgress::with_draw_target(if progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template(
        "{prefix:>12} [{bar:40}] {pos}/{len} jobs {elapsed} (about {eta} left)",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    let bars: Vec<ProgressBar> = setups
        .iter()
        .map(|s| {
            let bar = bars.add(ProgressBar::new(shared.jobs.len() as u64));
            bar.set_style(style.clone());
            bar.set_prefix(s.name.clone());
            bar
        })
        .collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<ReplayResult, String>>>> =
        Mutex::new(setups.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, setups.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(setup) = setups.get(i) else {
                        break;
                    };
                    let result = replay_one(setup, shared, &bars[i]);
                    bars[i].finish();
                    if let Ok(mut results) = results.lock() {
                        results[i] = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("the replay did not finish".into())))
        .collect()
}

/// One replay on a runtime of its own thread.
fn replay_one(
    setup: &VariantSetup,
    shared: &Shared<'_>,
    bar: &ProgressBar,
) -> Result<ReplayResult, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("start a runtime for the replay: {e}"))?;
    let tick = || bar.inc(1);
    let input = ReplayInput {
        cluster: shared.cluster,
        workload: shared.workload,
        jobs: shared.jobs,
        sample_every: shared.sample_every,
        on_arrival: &tick,
    };
    runtime.block_on(replay::replay(setup, &input))
}

/// Threads to replay with: one per CPU.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
