//! Runs the planner: every period, and soon after gang pods, PodGroups or Queues
//! change; only on the leader and only once the ledger is built. Also reloads the
//! Volcano-format scheduler configuration when its file changes.

use crate::scheduler::Scheduler;
use crate::volcano::conf::SchedulerConf;
use futures::FutureExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::task::JoinHandle;

/// How often the configuration file is checked for changes.
const CONF_POLL: Duration = Duration::from_secs(2);
/// Events arriving together (a Job creating its pods) are planned together.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Reads a scheduler configuration file, with the file name in errors.
pub fn load_conf(path: &Path) -> anyhow::Result<SchedulerConf> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("read scheduler config {}: {e}", path.display()))?;
    crate::volcano::load_conf(&text)
        .map_err(|e| anyhow::anyhow!("scheduler config {}: {e}", path.display()))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Starts the planner loop (and the configuration watcher when a file is given).
pub fn start(
    scheduler: Arc<Scheduler>,
    period: Duration,
    conf_path: Option<PathBuf>,
    may_plan: Arc<dyn Fn() -> bool + Send + Sync>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let Some(path) = conf_path {
        let scheduler = scheduler.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = modified(&path);
            loop {
                tokio::time::sleep(CONF_POLL).await;
                let now = modified(&path);
                if now == seen {
                    continue;
                }
                seen = now;
                match load_conf(&path) {
                    Ok(conf) => {
                        tracing::info!(file = %path.display(), "scheduler config reloaded");
                        scheduler.set_gang_conf(conf);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "scheduler config not reloaded; keeping the previous one")
                    }
                }
            }
        }));
    }
    tasks.push(tokio::spawn(async move {
        let wake = scheduler.gang_wake();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = wake.notified() => tokio::time::sleep(DEBOUNCE).await,
            }
            // Changes told since the wake (during the debounce, or just before the
            // period ran out) are in the cycle about to run: they start no other.
            // Those told while the cycle runs leave one wake for the next.
            let _ = wake.notified().now_or_never();
            if may_plan() {
                scheduler.run_gang_cycle().await;
                scheduler.metrics().planning_cycle("run");
            } else {
                scheduler.metrics().planning_cycle("skipped");
            }
        }
    }));
    tasks
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
