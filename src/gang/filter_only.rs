//! Gang and queue pods the server knows only because `/filter` named them.
//!
//! A cluster file has no watch: a pod kube-scheduler asks about is learned from
//! the request alone, and in a live cluster a pod `/filter` names is a phantom
//! until the watch shows it. Anyone who can reach `/filter` can name pods that
//! never existed, and every one of them would otherwise stay in the gang book (and
//! be planned again by every later `/filter`) until a resync, or for good in
//! cluster-file mode. So what `/filter` alone taught the server is kept only
//! while it is asked about again within a time, and only up to a number: beyond
//! it, the pods seen longest ago go first. Pods that hold GPUs are never dropped
//! here (the caller says which): their reservation ends on its own clock.

use foldhash::HashMap;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Default of `--max-filter-only-pods`.
pub const DEFAULT_MAX: usize = 2000;

/// Default of `--filter-only-pod-ttl`: longer than kube-scheduler's longest wait
/// before it retries an unschedulable pod (5 minutes), so a member waiting for
/// the rest of its gang is asked about again before it would be forgotten.
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);

/// How much of what `/filter` alone taught is kept, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterOnlyLimits {
    /// At most this many pods (those holding GPUs may exceed it).
    pub max: usize,
    /// Dropped when not asked about for this long.
    pub ttl: Duration,
}

impl Default for FilterOnlyLimits {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX,
            ttl: DEFAULT_TTL,
        }
    }
}

/// Why a pod was let go of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Not asked about within the time to live.
    Expired,
    /// More pods than the limit: the one seen longest ago went.
    OverLimit,
}

impl DropReason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            DropReason::Expired => "expired",
            DropReason::OverLimit => "over-limit",
        }
    }
}

/// A pod to let go of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Why.
    pub reason: DropReason,
}

#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    order: u64,
    namespace: String,
    name: String,
}

/// The pods known only from `/filter`, by when each was last asked about.
#[derive(Debug, Default)]
pub struct FilterOnlyPods {
    by_uid: HashMap<String, Seen>,
    /// (last seen, arrival order, UID), oldest first.
    by_age: BTreeSet<(Instant, u64, String)>,
    arrivals: u64,
}

impl FilterOnlyPods {
    /// `/filter` named the pod at `now`.
    pub fn saw(&mut self, uid: &str, namespace: &str, name: &str, now: Instant) {
        self.forget(uid);
        self.arrivals += 1;
        let seen = Seen {
            at: now,
            order: self.arrivals,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        self.by_age.insert((now, seen.order, uid.to_string()));
        self.by_uid.insert(uid.to_string(), seen);
    }

    /// The pod is known from elsewhere now (the watch, the cluster file, a bind),
    /// or gone: it is no longer tracked here.
    pub fn forget(&mut self, uid: &str) {
        if let Some(seen) = self.by_uid.remove(uid) {
            self.by_age.remove(&(seen.at, seen.order, uid.to_string()));
        }
    }

    /// Keeps only the pods `keep` says (after a resync dropped members).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self.by_uid.keys().filter(|u| !keep(u)).cloned().collect();
        for uid in gone {
            self.forget(&uid);
        }
    }

    /// Whether the pod is known only from `/filter`.
    pub fn contains(&self, uid: &str) -> bool {
        self.by_uid.contains_key(uid)
    }

    /// How many pods are known only from `/filter`.
    pub fn len(&self) -> usize {
        self.by_uid.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_uid.is_empty()
    }

    /// Takes out the pods to let go of at `now`: those not asked about within the
    /// time to live, then the oldest beyond the limit. `holds` says which pods hold
    /// GPUs (or a plan); those stay whatever their age.
    pub fn take_stale(
        &mut self,
        now: Instant,
        limits: FilterOnlyLimits,
        holds: impl Fn(&str) -> bool,
    ) -> Vec<Dropped> {
        let mut kept = self.by_uid.len();
        let mut dropped = Vec::new();
        for (at, _, uid) in &self.by_age {
            let reason = if now.saturating_duration_since(*at) >= limits.ttl {
                DropReason::Expired
            } else if kept > limits.max {
                DropReason::OverLimit
            } else {
                // Younger ones are neither expired nor, with this many kept, over
                // the limit.
                break;
            };
            if holds(uid) {
                continue;
            }
            kept -= 1;
            let seen = &self.by_uid[uid];
            dropped.push(Dropped {
                uid: uid.clone(),
                namespace: seen.namespace.clone(),
                name: seen.name.clone(),
                reason,
            });
        }
        for d in &dropped {
            self.forget(&d.uid);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, ttl_secs: u64) -> FilterOnlyLimits {
        FilterOnlyLimits {
            max,
            ttl: Duration::from_secs(ttl_secs),
        }
    }

    fn uids(dropped: &[Dropped]) -> Vec<(&str, DropReason)> {
        dropped.iter().map(|d| (d.uid.as_str(), d.reason)).collect()
    }

    #[test]
    fn the_oldest_go_first_beyond_the_limit() {
        let t0 = Instant::now();
        let mut pods = FilterOnlyPods::default();
        for (i, uid) in ["a", "b", "c", "d"].iter().enumerate() {
            pods.saw(uid, "ns", uid, t0 + Duration::from_secs(i as u64));
        }
        // Asked about again: "a" is now the youngest.
        pods.saw("a", "ns", "a", t0 + Duration::from_secs(10));
        let dropped = pods.take_stale(t0 + Duration::from_secs(11), limits(2, 600), |_| false);
        assert_eq!(
            uids(&dropped),
            [("b", DropReason::OverLimit), ("c", DropReason::OverLimit)]
        );
        assert_eq!(pods.len(), 2);
        assert!(pods.contains("a") && pods.contains("d"));
    }

    #[test]
    fn pods_not_asked_about_expire_and_holders_stay() {
        let t0 = Instant::now();
        let mut pods = FilterOnlyPods::default();
        pods.saw("idle", "ns", "idle", t0);
        pods.saw("holder", "ns", "holder", t0);
        pods.saw("recent", "ns", "recent", t0 + Duration::from_secs(50));
        let at = t0 + Duration::from_secs(60);
        let dropped = pods.take_stale(at, limits(10, 60), |uid| uid == "holder");
        assert_eq!(uids(&dropped), [("idle", DropReason::Expired)]);
        assert!(pods.contains("holder") && pods.contains("recent"));
        // A holder beyond the limit stays too; the next oldest goes instead.
        let dropped = pods.take_stale(at, limits(1, 60), |uid| uid == "holder");
        assert_eq!(uids(&dropped), [("recent", DropReason::OverLimit)]);
    }

    #[test]
    fn a_pod_known_from_elsewhere_is_no_longer_tracked() {
        let t0 = Instant::now();
        let mut pods = FilterOnlyPods::default();
        pods.saw("a", "ns", "a", t0);
        pods.forget("a");
        assert!(pods.is_empty());
        assert!(
            pods.take_stale(t0 + Duration::from_secs(3600), limits(0, 1), |_| false)
                .is_empty()
        );
    }
}
