//! How long each stage of a planning cycle took. A cycle that costs what changed
//! depends on every stage staying small; when one does not, the debug log says
//! which (`RUST_LOG=vgpu_scheduler::gang::cycle_stages=debug`). Stages are timed
//! in CPU time of the planning thread, so that other work on the machine does not
//! show as the planner's; the whole cycle is also given in wall time. That clock
//! is a system call, not a read of memory: with the log off, no stage is timed
//! (about ten readings a cycle were 3% of a queue replay).

use std::time::{Duration, Instant};

/// Stages a cycle times, at most.
const STAGES: usize = 32;

/// The stages of one cycle timed so far.
pub struct CycleStages {
    /// Whether the stages are timed: only when their log would be written.
    timed: bool,
    started: Instant,
    last: Duration,
    stages: Vec<(&'static str, Duration)>,
}

impl Default for CycleStages {
    fn default() -> Self {
        Self::new(tracing::enabled!(tracing::Level::DEBUG))
    }
}

impl CycleStages {
    /// Times the stages if `timed`; else keeps nothing and reads no clock.
    fn new(timed: bool) -> Self {
        Self {
            timed,
            started: Instant::now(),
            last: if timed {
                thread_cpu_time()
            } else {
                Duration::ZERO
            },
            // Room for every stage: growing the list inside `done` would charge
            // the allocator's work (which may sort out everything freed so far)
            // to the stage that follows.
            stages: Vec::with_capacity(if timed { STAGES } else { 0 }),
        }
    }
}

/// CPU time this thread has used (zero where the clock cannot be read).
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call to fill.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if read != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

impl CycleStages {
    /// Ends the stage `name`: the CPU time since the last stage ended is its own.
    pub fn done(&mut self, name: &'static str) {
        if !self.timed {
            return;
        }
        let now = thread_cpu_time();
        self.stages.push((name, now.saturating_sub(self.last)));
        self.last = now;
    }

    /// Logs every stage's time in milliseconds, in the order they ran.
    pub fn log(&self) {
        if !self.timed || !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|(name, took)| format!("{name}={:.2}", took.as_secs_f64() * 1000.0))
            .collect();
        let cpu: Duration = self.stages.iter().map(|(_, took)| *took).sum();
        tracing::debug!(
            wall_ms = self.started.elapsed().as_secs_f64() * 1000.0,
            cpu_ms = cpu.as_secs_f64() * 1000.0,
            stages = %stages.join(" "),
            "planning cycle stages (CPU ms)"
        );
    }
}

#[cfg(test)]
#[path = "cycle_stages_tests.rs"]
mod tests;
