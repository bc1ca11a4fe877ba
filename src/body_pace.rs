//! How fast a request body must arrive to be read on.
//!
//! A body is held in memory, and charged to its route's body budget, while it is
//! read; a peer that sends part of one and then dawdles would keep that share from
//! everyone else until the request time limit (60 s). So a body is cut when no byte
//! of it arrived for [`BODY_STALL`], or when it falls behind a minimum rate: it may
//! take [`BODY_GRACE`] plus one second per [`BODY_MIN_RATE`] bytes received (the rule
//! of Apache's `mod_reqtimeout`, `body=5,MinRate=1048576`). kube-scheduler and the
//! API server send a whole body at once, far faster than this; a 32 MiB `/filter`
//! still has 37 s. Time spent waiting for the body budget is the server's, not the
//! peer's, and does not count.

use std::time::Duration;
use tokio::time::Instant;

/// Longest pause between two pieces of a body (or before its first one).
pub const BODY_STALL: Duration = Duration::from_secs(5);
/// What a body may take regardless of its size.
pub const BODY_GRACE: Duration = Duration::from_secs(5);
/// Bytes per second a body must keep up on average, beyond [`BODY_GRACE`].
pub const BODY_MIN_RATE: u64 = 1 << 20;

/// Why a body was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaceFault {
    /// Nothing arrived for [`BODY_STALL`].
    Stalled,
    /// The body fell behind [`BODY_MIN_RATE`].
    TooSlow,
}

/// The pace of one body being read.
#[derive(Debug, Clone, Copy)]
pub struct BodyPace {
    started: Instant,
    last_arrival: Instant,
    received: u64,
    /// Time spent waiting for the body budget, which the peer is not charged for.
    waited: Duration,
}

impl BodyPace {
    /// A body whose reading starts at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            started: now,
            last_arrival: now,
            received: 0,
            waited: Duration::ZERO,
        }
    }

    /// `bytes` arrived, then the server waited `waited` for budget to keep them;
    /// `now` is when that wait ended.
    pub fn arrived(&mut self, bytes: usize, waited: Duration, now: Instant) {
        self.received = self.received.saturating_add(bytes as u64);
        self.waited += waited;
        self.last_arrival = now;
    }

    fn stall_deadline(&self) -> Instant {
        self.last_arrival + BODY_STALL
    }

    fn rate_deadline(&self) -> Instant {
        let earned = Duration::from_secs_f64(self.received as f64 / BODY_MIN_RATE as f64);
        self.started + self.waited + BODY_GRACE + earned
    }

    /// When the next piece must have arrived.
    pub fn deadline(&self) -> Instant {
        self.stall_deadline().min(self.rate_deadline())
    }

    /// Which limit the body broke once [`Self::deadline`] passed.
    pub fn fault(&self) -> PaceFault {
        if self.stall_deadline() <= self.rate_deadline() {
            PaceFault::Stalled
        } else {
            PaceFault::TooSlow
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_sends_nothing_is_cut_as_stalled() {
        let start = Instant::now();
        let pace = BodyPace::new(start);
        assert_eq!(pace.deadline(), start + BODY_STALL);
        assert_eq!(pace.fault(), PaceFault::Stalled);
    }

    #[test]
    fn a_trickle_is_cut_once_behind_the_minimum_rate() {
        let start = Instant::now();
        let mut pace = BodyPace::new(start);
        // One byte every four seconds never stalls, but earns almost nothing.
        pace.arrived(1, Duration::ZERO, start + Duration::from_secs(4));
        assert_eq!(pace.fault(), PaceFault::TooSlow);
        assert!(pace.deadline() < start + BODY_GRACE + Duration::from_millis(1));
    }

    #[test]
    fn received_bytes_and_budget_waits_extend_the_deadline() {
        let start = Instant::now();
        let mut pace = BodyPace::new(start);
        pace.arrived(
            4 << 20,
            Duration::from_secs(3),
            start + Duration::from_secs(3),
        );
        // Four seconds earned, three spent waiting: the stall limit comes first.
        assert_eq!(pace.deadline(), start + Duration::from_secs(3) + BODY_STALL);
        assert_eq!(pace.fault(), PaceFault::Stalled);
    }
}
