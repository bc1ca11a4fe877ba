//! How long each stage of a planning cycle took. A cycle that costs what changed
//! depends on every stage staying small; when one does not, the debug log says
//! which (`RUST_LOG=vgpu_scheduler::gang::cycle_stages=debug`).

use std::time::{Duration, Instant};

/// The stages of one cycle timed so far.
pub struct CycleStages {
    started: Instant,
    last: Instant,
    stages: Vec<(&'static str, Duration)>,
}

impl Default for CycleStages {
    fn default() -> Self {
        let now = Instant::now();
        Self {
            started: now,
            last: now,
            stages: Vec::new(),
        }
    }
}

impl CycleStages {
    /// Ends the stage `name`: the time since the last stage ended is its own.
    pub fn done(&mut self, name: &'static str) {
        let now = Instant::now();
        self.stages.push((name, now - self.last));
        self.last = now;
    }

    /// Logs every stage's time in milliseconds, in the order they ran.
    pub fn log(&self) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|(name, took)| format!("{name}={:.2}", took.as_secs_f64() * 1000.0))
            .collect();
        tracing::debug!(
            total_ms = self.started.elapsed().as_secs_f64() * 1000.0,
            stages = %stages.join(" "),
            "planning cycle stages (ms)"
        );
    }
}
