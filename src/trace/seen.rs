//! What the recorder has written of each pod and PodGroup, so that each is
//! recorded once per kind of event however often the watch repeats it. The
//! book lives as long as the server: one started again on the same file
//! records what it finds anew, and the reader merges the repeats.
//!
//! Only pods whose first sight was recorded are kept, and a pod is forgotten
//! once recorded gone (or found missing from a full list), so the book holds
//! about as many pods as are waiting or running. Past `capacity` the pod that
//! has waited longest without a bind is let go of to make room (pods `/filter`
//! named that never bind, e.g. with a cluster file, which has no watch to say
//! they went, would otherwise fill the book and stop the recording for good);
//! only when every pod followed is bound are new pods not recorded (and counted
//! as dropped), rather than let a trace of a very large cluster grow the
//! scheduler's memory without end.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Where a recorded pod stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Waiting,
    Bound,
}

#[derive(Debug)]
struct SeenPod {
    /// `namespace/name`, for the lines that only know the UID.
    key: String,
    stage: Stage,
    /// Its place in the order of first sights.
    order: u64,
    /// When it was first seen.
    seen_at: DateTime<Utc>,
}

/// Pods and PodGroups recorded so far.
#[derive(Debug)]
pub struct SeenBook {
    pods: HashMap<String, SeenPod>,
    /// The UIDs of pods waiting (not bound), by first sight, oldest first.
    waiting: BTreeMap<u64, String>,
    next_order: u64,
    groups: HashSet<String>,
    capacity: usize,
}

/// The answer to a pod's first sight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstSight {
    /// Record it.
    New,
    /// Recorded before.
    Known,
    /// The book is full: not recorded.
    Full,
}

impl SeenBook {
    /// A book for up to `capacity` pods and as many PodGroups.
    pub fn new(capacity: usize) -> Self {
        Self {
            pods: HashMap::new(),
            waiting: BTreeMap::new(),
            next_order: 0,
            groups: HashSet::new(),
            capacity,
        }
    }

    /// Notes a pod seen waiting at `at`; `key` names it (`namespace/name`),
    /// made only for a pod not seen before.
    pub fn pod(
        &mut self,
        uid: &str,
        at: DateTime<Utc>,
        key: impl FnOnce() -> String,
    ) -> FirstSight {
        if self.pods.contains_key(uid) {
            return FirstSight::Known;
        }
        if self.pods.len() >= self.capacity {
            match self.waiting.pop_first() {
                Some((_, longest_waiting)) => {
                    self.pods.remove(&longest_waiting);
                }
                None => return FirstSight::Full,
            }
        }
        let order = self.next_order;
        self.next_order += 1;
        self.waiting.insert(order, uid.to_string());
        self.pods.insert(
            uid.to_string(),
            SeenPod {
                key: key(),
                stage: Stage::Waiting,
                order,
                seen_at: at,
            },
        );
        FirstSight::New
    }

    /// Notes a pod seen bound; its key when this is the first time for a pod
    /// recorded waiting.
    pub fn bound(&mut self, uid: &str) -> Option<String> {
        let pod = self.pods.get_mut(uid)?;
        if pod.stage == Stage::Bound {
            return None;
        }
        pod.stage = Stage::Bound;
        self.waiting.remove(&pod.order);
        Some(pod.key.clone())
    }

    /// Notes a pod gone; its key when it was recorded and not gone before.
    pub fn gone(&mut self, uid: &str) -> Option<String> {
        let pod = self.pods.remove(uid)?;
        self.waiting.remove(&pod.order);
        Some(pod.key)
    }

    /// The UIDs of pods first seen before `before` that `exists` says are no
    /// more: gone while no watch told of it.
    pub fn missing(&self, before: DateTime<Utc>, exists: impl Fn(&str) -> bool) -> Vec<String> {
        let mut missing: Vec<(u64, String)> = self
            .pods
            .iter()
            .filter(|(uid, pod)| pod.seen_at < before && !exists(uid))
            .map(|(uid, pod)| (pod.order, uid.clone()))
            .collect();
        missing.sort();
        missing.into_iter().map(|(_, uid)| uid).collect()
    }

    /// Notes a PodGroup seen, by `namespace/name` (its deletion, which lets one
    /// created again under the name be recorded anew, is known by name only);
    /// whether it is the first time.
    pub fn group(&mut self, id: &str) -> bool {
        if self.groups.contains(id) || self.groups.len() >= self.capacity {
            return false;
        }
        self.groups.insert(id.to_string())
    }

    /// Forgets a deleted PodGroup.
    pub fn forget_group(&mut self, id: &str) {
        self.groups.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_750_000_000 + seconds, 0).unwrap()
    }

    #[test]
    fn each_pod_is_noted_once_per_stage_and_only_if_seen_waiting() {
        let mut book = SeenBook::new(10);
        assert_eq!(book.bound("u0"), None, "never seen waiting");
        assert_eq!(book.pod("u1", t(0), || "ml/a".into()), FirstSight::New);
        assert_eq!(book.pod("u1", t(1), || "ml/a".into()), FirstSight::Known);
        assert_eq!(book.bound("u1").as_deref(), Some("ml/a"));
        assert_eq!(book.bound("u1"), None);
        assert_eq!(book.gone("u1").as_deref(), Some("ml/a"));
        assert_eq!(book.gone("u1"), None);
    }

    #[test]
    fn a_book_full_of_bound_pods_takes_no_new_pod_until_one_goes() {
        let mut book = SeenBook::new(1);
        assert_eq!(book.pod("u1", t(0), || "ml/a".into()), FirstSight::New);
        book.bound("u1");
        assert_eq!(book.pod("u2", t(1), || "ml/b".into()), FirstSight::Full);
        book.gone("u1");
        assert_eq!(book.pod("u2", t(2), || "ml/b".into()), FirstSight::New);
    }

    #[test]
    fn a_full_book_lets_go_of_the_pod_waiting_longest_for_a_new_one() {
        let mut book = SeenBook::new(3);
        for (i, uid) in ["u1", "u2", "u3"].into_iter().enumerate() {
            assert_eq!(book.pod(uid, t(i as i64), || uid.into()), FirstSight::New);
        }
        book.bound("u1");
        assert_eq!(book.pod("u4", t(4), || "u4".into()), FirstSight::New);
        assert_eq!(book.bound("u2"), None, "u2 waited longest: let go of");
        assert_eq!(book.pod("u5", t(5), || "u5".into()), FirstSight::New);
        assert_eq!(book.bound("u3"), None, "then u3");
        assert_eq!(book.gone("u1").as_deref(), Some("u1"), "bound pods stay");
        assert_eq!(book.bound("u4").as_deref(), Some("u4"));
    }

    #[test]
    fn pods_first_seen_before_a_list_that_lacks_them_are_missing() {
        let mut book = SeenBook::new(10);
        book.pod("u1", t(0), || "ml/a".into());
        book.pod("u2", t(1), || "ml/b".into());
        book.pod("u3", t(5), || "ml/c".into());
        assert_eq!(book.missing(t(3), |uid| uid == "u2"), vec!["u1"]);
    }

    #[test]
    fn podgroups_are_noted_once() {
        let mut book = SeenBook::new(10);
        assert!(book.group("g-1"));
        assert!(!book.group("g-1"));
        book.forget_group("g-1");
        assert!(book.group("g-1"));
    }
}
