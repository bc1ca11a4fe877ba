//! Where time comes from. Every deadline the scheduler keeps (reservation TTLs,
//! gang plan deadlines, node lock ages, leases, event times) reads one injected
//! clock, so tests advance time instead of waiting for it.

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Monotonic time, for durations and deadlines in this process.
    fn now(&self) -> Instant;

    /// Wall-clock time, for what is written to the cluster and read back (plan
    /// deadlines, lock and lease times, events).
    fn wall(&self) -> DateTime<Utc>;
}

/// A shared clock.
pub type SharedClock = Arc<dyn Clock>;

/// The system's clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The system clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A wall-clock reading as the Kubernetes API types carry it.
pub fn timestamp(wall: DateTime<Utc>) -> k8s_openapi::jiff::Timestamp {
    let nanos = wall.timestamp_nanos_opt().unwrap_or_default();
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// A shared clock that defaults to the system's, for structures built with
/// `Default`.
#[derive(Debug, Clone)]
pub struct ClockHandle(pub SharedClock);

impl Default for ClockHandle {
    fn default() -> Self {
        Self(system())
    }
}

impl std::ops::Deref for ClockHandle {
    type Target = dyn Clock;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

/// A clock that moves only when told to; both readings move together.
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    start_wall: DateTime<Utc>,
    offset: Mutex<Duration>,
}

impl ManualClock {
    /// A clock standing at the current time.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            start_wall: Utc::now(),
            offset: Mutex::new(Duration::ZERO),
        })
    }

    /// A clock whose wall reading starts at `wall` (a replay that must give the
    /// same answers whenever it runs).
    pub fn starting_at(wall: DateTime<Utc>) -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            start_wall: wall,
            offset: Mutex::new(Duration::ZERO),
        })
    }

    /// Moves time forward.
    pub fn advance(&self, by: Duration) {
        *self.offset.lock() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + *self.offset.lock()
    }

    fn wall(&self) -> DateTime<Utc> {
        let offset = chrono::Duration::from_std(*self.offset.lock()).unwrap_or_default();
        self.start_wall + offset
    }
}

/// A clock that reads the async runtime's: in a test with tokio's time paused,
/// the scheduler's deadlines and the runtime's timers move together, the
/// runtime jumping to the next timer whenever every task waits.
#[cfg(test)]
#[derive(Debug)]
pub struct RuntimeClock {
    start: tokio::time::Instant,
    start_wall: DateTime<Utc>,
}

#[cfg(test)]
impl RuntimeClock {
    /// A clock standing at the runtime's current time.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            start: tokio::time::Instant::now(),
            start_wall: Utc::now(),
        })
    }
}

#[cfg(test)]
impl Clock for RuntimeClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn wall(&self) -> DateTime<Utc> {
        let elapsed = tokio::time::Instant::now().duration_since(self.start);
        self.start_wall + chrono::Duration::from_std(elapsed).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_both_readings_only_when_advanced() {
        let clock = ManualClock::new();
        let (t0, w0) = (clock.now(), clock.wall());
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.now() - t0, Duration::from_secs(90));
        assert_eq!((clock.wall() - w0).num_seconds(), 90);
    }
}
