//! What the recorder has written of each pod and PodGroup, so that each is
//! recorded once per kind of event however often the watch repeats it. The
//! book lives as long as the server: one started again on the same file
//! records what it finds anew, and the reader merges the repeats.
//!
//! Only pods whose first sight was recorded are kept, and a pod is forgotten
//! once recorded gone, so the book holds about as many pods as are waiting or
//! running; past `capacity` new pods are not recorded (and counted as dropped)
//! rather than let a trace of a very large cluster grow the scheduler's memory
//! without end.

use std::collections::{HashMap, HashSet};

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
}

/// Pods and PodGroups recorded so far.
#[derive(Debug)]
pub struct SeenBook {
    pods: HashMap<String, SeenPod>,
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
            groups: HashSet::new(),
            capacity,
        }
    }

    /// Notes a pod seen waiting; `key` names it (`namespace/name`), made only
    /// for a pod not seen before.
    pub fn pod(&mut self, uid: &str, key: impl FnOnce() -> String) -> FirstSight {
        if self.pods.contains_key(uid) {
            return FirstSight::Known;
        }
        if self.pods.len() >= self.capacity {
            return FirstSight::Full;
        }
        self.pods.insert(
            uid.to_string(),
            SeenPod {
                key: key(),
                stage: Stage::Waiting,
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
        Some(pod.key.clone())
    }

    /// Notes a pod gone; its key when it was recorded and not gone before.
    pub fn gone(&mut self, uid: &str) -> Option<String> {
        self.pods.remove(uid).map(|p| p.key)
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

    #[test]
    fn each_pod_is_noted_once_per_stage_and_only_if_seen_waiting() {
        let mut book = SeenBook::new(10);
        assert_eq!(book.bound("u0"), None, "never seen waiting");
        assert_eq!(book.pod("u1", || "ml/a".into()), FirstSight::New);
        assert_eq!(book.pod("u1", || "ml/a".into()), FirstSight::Known);
        assert_eq!(book.bound("u1").as_deref(), Some("ml/a"));
        assert_eq!(book.bound("u1"), None);
        assert_eq!(book.gone("u1").as_deref(), Some("ml/a"));
        assert_eq!(book.gone("u1"), None);
    }

    #[test]
    fn a_full_book_takes_no_new_pod_until_one_goes() {
        let mut book = SeenBook::new(1);
        assert_eq!(book.pod("u1", || "ml/a".into()), FirstSight::New);
        assert_eq!(book.pod("u2", || "ml/b".into()), FirstSight::Full);
        book.gone("u1");
        assert_eq!(book.pod("u2", || "ml/b".into()), FirstSight::New);
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
