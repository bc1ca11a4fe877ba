//! Which events about pods reach the API server. Every Event is a write the API
//! server and etcd pay for, on top of the pod's create, its Binding and kube-
//! scheduler's own `Scheduled` event; at the burst rates kube-scheduler reaches,
//! two success events of ours per pod cost more than the rest of the extender's
//! writes together. So success events are opt-in (`--placement-events=all`, what
//! HAMi does), and an outcome repeated about the same pod (a pod kube-scheduler
//! retries every few seconds while nothing fits) is recorded once per window:
//! at most one Event per pod and outcome (reason) in ten minutes, whatever its
//! message says.
//!
//! client-go's recorder folds the same repeats into one Event too, but keeps
//! writing: each repeat is a PATCH of the Event's `count` and `lastTimestamp`,
//! and events differing only in their message are combined into one after a
//! few. Here a repeat writes nothing at all. kube-scheduler already records
//! every failed attempt itself (`FailedScheduling`, aggregated by its own
//! recorder, with our reasons in it), so a count on our Event would say again
//! what its Event says, at the cost of one write per retry: exactly the kind of
//! write this scheduler avoids. The first Event of each outcome stays, with the
//! message of its first occurrence.

use super::Scheduler;
use crate::cluster::api::{EventType, SchedulerEvent};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// `--placement-events`: which of HAMi's placement events (`FilteringSucceed`,
/// `BindingSucceed`, `FilteringFailed`, `BindingFailed`) are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PlacementEvents {
    /// Successes and failures, as HAMi records them.
    All,
    /// Only failures: a placed pod costs no event of ours (kube-scheduler
    /// records `Scheduled` for it anyway).
    #[default]
    Failures,
    /// None of them.
    None,
}

/// Reasons of HAMi's placement events that report a success.
const SUCCESS_REASONS: [&str; 2] = ["FilteringSucceed", "BindingSucceed"];
/// Reasons of HAMi's placement events that report a failure.
const FAILURE_REASONS: [&str; 2] = ["FilteringFailed", "BindingFailed"];

impl PlacementEvents {
    /// Whether an event with `reason` is recorded. Events other than the four
    /// placement events (gang waits, evictions) are not this flag's to turn off.
    fn records(self, reason: &str) -> bool {
        let success = SUCCESS_REASONS.contains(&reason);
        let failure = FAILURE_REASONS.contains(&reason);
        match self {
            Self::All => true,
            Self::Failures => !success,
            Self::None => !success && !failure,
        }
    }
}

/// How long an event is not repeated for the same pod and reason: client-go's
/// recorder folds repeats within ten minutes into one Event.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(600);

/// Distinct recent events kept at most; past it, the oldest window's entries go
/// first and, if all are recent, a repeat may be recorded again.
const RECENT_EVENTS_MAX: usize = 50_000;

/// Events recorded lately, by pod UID (or namespace/name) and reason.
#[derive(Debug, Default)]
pub(crate) struct RecentEvents {
    seen: Mutex<HashMap<(String, String), Instant>>,
}

impl RecentEvents {
    /// Whether the event is new at `now` (and then remembers it): not the same
    /// pod and reason (outcome) as one recorded within [`REPEAT_WINDOW`].
    fn first_in_window(&self, pod: &str, reason: &str, now: Instant) -> bool {
        let mut seen = self.seen.lock();
        let key = (pod.to_string(), reason.to_string());
        if seen
            .get(&key)
            .is_some_and(|at| now.saturating_duration_since(*at) < REPEAT_WINDOW)
        {
            return false;
        }
        if seen.len() >= RECENT_EVENTS_MAX {
            seen.retain(|_, at| now.saturating_duration_since(*at) < REPEAT_WINDOW);
            if seen.len() >= RECENT_EVENTS_MAX {
                seen.clear();
            }
        }
        seen.insert(key, now);
        true
    }
}

impl Scheduler {
    /// Records an event about a pod, unless `--placement-events` leaves it out or
    /// an event of the same reason about the same pod was recorded within
    /// [`REPEAT_WINDOW`].
    pub(super) async fn event(
        &self,
        (ns, pod, uid): (&str, &str, &str),
        kind: EventType,
        reason: &str,
        message: String,
    ) {
        if !self.config.placement_events.records(reason) {
            return;
        }
        let who = if uid.is_empty() {
            format!("{ns}/{pod}")
        } else {
            uid.to_string()
        };
        if !self
            .recent_events
            .first_in_window(&who, reason, self.clock.now())
        {
            return;
        }
        self.api
            .record_event(SchedulerEvent {
                namespace: ns.to_string(),
                pod: pod.to_string(),
                uid: uid.to_string(),
                event_type: kind,
                reason: reason.to_string(),
                message,
                time: self.clock.wall(),
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_is_recorded_once_per_pod_in_the_window_whatever_its_message() {
        let recent = RecentEvents::default();
        let t0 = Instant::now();
        assert!(recent.first_in_window("uid-a", "FilteringFailed", t0));
        let soon = t0 + Duration::from_secs(5);
        assert!(!recent.first_in_window("uid-a", "FilteringFailed", soon));
        // Another outcome or pod is another event.
        assert!(recent.first_in_window("uid-a", "BindingFailed", soon));
        assert!(recent.first_in_window("uid-b", "FilteringFailed", soon));
        let later = t0 + REPEAT_WINDOW;
        assert!(recent.first_in_window("uid-a", "FilteringFailed", later));
    }

    #[test]
    fn the_flag_chooses_between_successes_failures_and_nothing() {
        use PlacementEvents::*;
        assert!(All.records("FilteringSucceed") && All.records("BindingFailed"));
        assert!(!Failures.records("BindingSucceed") && Failures.records("FilteringFailed"));
        assert!(!None.records("BindingFailed") && !None.records("FilteringSucceed"));
        // Not a placement event: the flag leaves it alone.
        assert!(None.records("GangWaiting"));
    }
}
