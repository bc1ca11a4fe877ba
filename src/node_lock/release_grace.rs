//! How long a node lock whose holder the device plugin has answered for is
//! left for the device plugin to release before a bind takes it over.
//!
//! HAMi's device plugin writes the pod's bind phase (`success` or `failed`)
//! and then releases the lock itself, after reading the node once or twice.
//! Taking the lock over before that release lands only races it: the write
//! meets the node the release changed and is refused, one more API call for
//! nothing (and a call the API server serves in full before refusing it). How
//! long the release follows the answer depends on how busy the control plane
//! is: a few milliseconds on an idle one, hundreds when every call queues. So
//! the grace follows what the watches show: twice the running mean of the time
//! from a holder's answer to its lock's release, never less than the least
//! grace (the grace before any release was seen, room enough for a release on
//! an idle control plane) nor more than the most (a device plugin that
//! answered and then never released still hands the node on soon).

use parking_lot::Mutex;
use std::time::Duration;

/// The grace before any release has been seen, and the shortest there is.
pub const LEAST_RELEASE_GRACE: Duration = Duration::from_millis(100);

/// The longest grace, however slowly releases have lately followed answers.
pub const MOST_RELEASE_GRACE: Duration = Duration::from_secs(2);

/// Weight of the newest release in the running mean of release lags.
const LAG_WEIGHT: f64 = 0.2;

/// The running mean of how long releases followed their holder's answer.
#[derive(Debug, Default)]
pub struct ReleaseGrace {
    mean_lag: Mutex<Option<Duration>>,
}

impl ReleaseGrace {
    /// A lock was seen released `lag` after the device plugin was seen
    /// answering for its holder. A release later than the most grace is not
    /// the device plugin's own, which follows its answer: a lock nobody waited
    /// for, cleared by housekeeping once its holder was done. Counting it would
    /// make every bind wait the longest grace for a device plugin that does
    /// not release.
    pub fn released_after(&self, lag: Duration) {
        if lag > MOST_RELEASE_GRACE {
            return;
        }
        let mut mean = self.mean_lag.lock();
        *mean = Some(match *mean {
            None => lag,
            Some(m) => m.mul_f64(1.0 - LAG_WEIGHT) + lag.mul_f64(LAG_WEIGHT),
        });
    }

    /// How long after an answer its holder's lock is left to the device
    /// plugin now.
    pub fn current(&self) -> Duration {
        self.mean_lag.lock().map_or(LEAST_RELEASE_GRACE, |mean| {
            mean.saturating_mul(2)
                .clamp(LEAST_RELEASE_GRACE, MOST_RELEASE_GRACE)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn before_any_release_the_grace_is_the_least() {
        assert_eq!(ReleaseGrace::default().current(), LEAST_RELEASE_GRACE);
    }

    #[test]
    fn the_grace_is_twice_the_mean_lag_of_releases_behind_answers() {
        let grace = ReleaseGrace::default();
        grace.released_after(300 * MS);
        assert_eq!(grace.current(), 600 * MS);
        // The mean moves a fifth of the way towards each new lag.
        grace.released_after(800 * MS);
        assert_eq!(grace.current(), 800 * MS);
    }

    #[test]
    fn quick_releases_keep_the_least_grace_and_slow_ones_stop_at_the_most() {
        let quick = ReleaseGrace::default();
        quick.released_after(5 * MS);
        assert_eq!(quick.current(), LEAST_RELEASE_GRACE);
        let slow = ReleaseGrace::default();
        slow.released_after(Duration::from_millis(1_900));
        assert_eq!(slow.current(), MOST_RELEASE_GRACE);
    }

    #[test]
    fn a_release_later_than_the_most_grace_is_not_the_device_plugins_and_not_counted() {
        let grace = ReleaseGrace::default();
        grace.released_after(Duration::from_secs(30));
        assert_eq!(grace.current(), LEAST_RELEASE_GRACE);
        grace.released_after(300 * MS);
        grace.released_after(Duration::from_secs(30));
        assert_eq!(grace.current(), 600 * MS);
    }
}
