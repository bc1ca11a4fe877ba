//! How fast `/filter` sends pods to be bound. A node hands its lock on one pod
//! at a time, so when pods come faster than that (more than one per lock hold)
//! no node can bind them as they come, however quickly its device plugin
//! answers: the queue at the node binpack prefers only grows, and a burst
//! needs as many nodes side by side as its rate asks for (see
//! `scheduler::busy_nodes`). A trickle slower than one pod per hold finds the
//! node free again each time and keeps filling it.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Intervals between placements the pace is judged from: few, so that a burst
/// after a quiet spell is recognised within a few pods, and the middle one, so
/// that one long gap or two pods sent together do not decide it.
const INTERVALS_KEPT: usize = 5;

/// When pods were sent to be bound: the last few intervals between two.
#[derive(Debug, Default)]
pub struct Arrivals {
    pace: Mutex<Pace>,
}

#[derive(Debug, Default)]
struct Pace {
    last: Option<Instant>,
    intervals: VecDeque<Duration>,
}

impl Arrivals {
    /// A pod was sent to be bound at `now`.
    pub fn record(&self, now: Instant) {
        let mut pace = self.pace.lock();
        if let Some(last) = pace.last {
            if pace.intervals.len() == INTERVALS_KEPT {
                pace.intervals.pop_front();
            }
            pace.intervals
                .push_back(now.saturating_duration_since(last));
        }
        pace.last = Some(pace.last.map_or(now, |last| last.max(now)));
    }

    /// How long lately passes between two pods sent to be bound (the median
    /// of the last few intervals), or has passed since the last one if that is
    /// longer (a burst that ended is not still coming); `None` before two have
    /// been sent.
    pub fn interval(&self, now: Instant) -> Option<Duration> {
        let pace = self.pace.lock();
        let mut intervals: Vec<Duration> = pace.intervals.iter().copied().collect();
        intervals.sort_unstable();
        let median = *intervals.get(intervals.len() / 2)?;
        let since_last = pace
            .last
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        Some(median.max(since_last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_interval_is_known_from_the_second_pod_and_follows_the_last_few() {
        let arrivals = Arrivals::default();
        let t0 = Instant::now();
        assert_eq!(arrivals.interval(t0), None);
        arrivals.record(t0);
        assert_eq!(arrivals.interval(t0 + MS), None);
        arrivals.record(t0 + 10 * MS);
        assert_eq!(arrivals.interval(t0 + 10 * MS), Some(10 * MS));
        // Pods now every 2 ms: within a few pods that is the pace.
        let mut t = t0 + 10 * MS;
        for _ in 0..3 {
            t += 2 * MS;
            arrivals.record(t);
        }
        assert_eq!(arrivals.interval(t), Some(2 * MS));
    }

    #[test]
    fn a_burst_after_a_quiet_spell_is_recognised_within_a_few_pods() {
        let arrivals = Arrivals::default();
        let t0 = Instant::now();
        arrivals.record(t0);
        arrivals.record(t0 + 10_000 * MS);
        let mut t = t0 + 10_000 * MS;
        for _ in 0..2 {
            t += MS;
            arrivals.record(t);
        }
        assert_eq!(arrivals.interval(t), Some(MS));
    }

    #[test]
    fn a_burst_that_ended_is_not_taken_for_one_still_coming() {
        let arrivals = Arrivals::default();
        let t0 = Instant::now();
        for n in 0..10 {
            arrivals.record(t0 + n * MS);
        }
        assert_eq!(arrivals.interval(t0 + 9 * MS), Some(MS));
        // Half a second without a pod: the pace is a pod per half second at most.
        assert_eq!(arrivals.interval(t0 + 509 * MS), Some(500 * MS));
    }
}
