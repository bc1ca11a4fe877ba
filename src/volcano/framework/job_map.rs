//! The session's jobs by gang, with a log of which gangs each change touched.
//!
//! Figures follow the jobs from one version of the map to the next (drf's
//! held shares, the queues' pod counts, the unsettled jobs, the verdicts...).
//! A persistent map's own diff skips the subtrees two versions share but
//! steps through every sibling entry of each changed path: with thousands of
//! gangs, several thousand instructions per changed job, paid by every
//! follower of every session. Each version here also holds a log of the
//! gangs changed on its way, shared with the versions it was made from: the
//! difference between two versions of one history is found by walking both
//! logs back to where they meet, at the cost of the changes themselves.
//!
//! Every change to the map goes through [`Jobs`]' own methods (it hands out
//! the map only to read), so a version's log names every gang in which it
//! differs from any version it was made from. A log is begun anew every
//! [`LOG_REACH`] changes, so that a version holds a bounded history; versions
//! whose logs do not meet are compared by the map's diff.

use super::job::{GangKey, JobInfo};
use imbl::OrdMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// The jobs' persistent map.
pub type JobTree = OrdMap<GangKey, Arc<JobInfo>>;

/// How many changes one log holds before it is begun anew.
const LOG_REACH: u32 = 4096;

/// One change in a log (or a log's beginning, which names no gang).
struct Logged {
    gang: Option<GangKey>,
    before: Option<Arc<Logged>>,
    /// Changes since the log began.
    depth: u32,
}

/// A log is dropped change by change, not by recursion through its history.
impl Drop for Logged {
    fn drop(&mut self) {
        let mut next = self.before.take();
        while let Some(entry) = next {
            match Arc::try_unwrap(entry) {
                Ok(mut only) => next = only.before.take(),
                Err(_) => break,
            }
        }
    }
}

fn new_log() -> Arc<Logged> {
    Arc::new(Logged {
        gang: None,
        before: None,
        depth: 0,
    })
}

/// Jobs by gang, and the log of the gangs changed on the way to them.
#[derive(Clone)]
pub struct Jobs {
    tree: JobTree,
    log: Arc<Logged>,
}

impl Default for Jobs {
    fn default() -> Self {
        JobTree::new().into()
    }
}

impl From<JobTree> for Jobs {
    fn from(tree: JobTree) -> Self {
        Self {
            tree,
            log: new_log(),
        }
    }
}

impl FromIterator<(GangKey, Arc<JobInfo>)> for Jobs {
    fn from_iter<I: IntoIterator<Item = (GangKey, Arc<JobInfo>)>>(jobs: I) -> Self {
        jobs.into_iter().collect::<JobTree>().into()
    }
}

/// Read as the map it holds.
impl Deref for Jobs {
    type Target = JobTree;

    fn deref(&self) -> &JobTree {
        &self.tree
    }
}

impl<'a> IntoIterator for &'a Jobs {
    type Item = (&'a GangKey, &'a Arc<JobInfo>);
    type IntoIter =
        imbl::ordmap::Iter<'a, GangKey, Arc<JobInfo>, imbl::shared_ptr::DefaultSharedPtr>;

    fn into_iter(self) -> Self::IntoIter {
        self.tree.iter()
    }
}

/// Equal when the jobs are (the logs are how they came to be).
impl PartialEq for Jobs {
    fn eq(&self, other: &Self) -> bool {
        self.tree == other.tree
    }
}

impl fmt::Debug for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.tree.fmt(f)
    }
}

impl Jobs {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    fn note(&mut self, gang: &GangKey) {
        let depth = self.log.depth + 1;
        self.log = if depth > LOG_REACH {
            new_log()
        } else {
            Arc::new(Logged {
                gang: Some(gang.clone()),
                before: Some(Arc::clone(&self.log)),
                depth,
            })
        };
    }

    /// Puts a gang's job, returning the one it replaces.
    pub fn insert(&mut self, gang: GangKey, job: Arc<JobInfo>) -> Option<Arc<JobInfo>> {
        self.note(&gang);
        self.tree.insert(gang, job)
    }

    /// Takes a gang's job out.
    pub fn remove(&mut self, gang: &GangKey) -> Option<Arc<JobInfo>> {
        let removed = self.tree.remove(gang);
        if removed.is_some() {
            self.note(gang);
        }
        removed
    }

    /// A gang's job, to change (logged as changed whether or not it is).
    pub fn get_mut(&mut self, gang: &GangKey) -> Option<&mut Arc<JobInfo>> {
        if !self.tree.contains_key(gang) {
            return None;
        }
        self.note(gang);
        self.tree.get_mut(gang)
    }

    /// Forgets every job.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// The gangs changed between `from` and this version, sorted and each
    /// once (some may be back to what they were), when both come from one
    /// log; `None` when they do not.
    pub fn gangs_changed_since(&self, from: &Jobs) -> Option<Vec<GangKey>> {
        let (mut here, mut there) = (&self.log, &from.log);
        let mut gangs = Vec::new();
        while !Arc::ptr_eq(here, there) {
            let step = if here.depth >= there.depth {
                &mut here
            } else {
                &mut there
            };
            gangs.push(step.gang.clone()?);
            *step = step.before.as_ref()?;
        }
        gangs.sort_unstable();
        gangs.dedup();
        Some(gangs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::testing::job;

    fn names(gangs: Option<Vec<GangKey>>) -> Option<Vec<String>> {
        gangs.map(|g| g.iter().map(|k| k.name.to_string()).collect())
    }

    fn one(name: &str) -> (GangKey, Arc<JobInfo>) {
        let j = job(name, "q", 1, Vec::new());
        (j.key.clone(), Arc::new(j))
    }

    #[test]
    fn the_gangs_changed_on_either_side_since_the_versions_parted() {
        let (a, b, c, d) = (one("a"), one("b"), one("c"), one("d"));
        let mut base = Jobs::new();
        base.insert(a.0.clone(), a.1.clone());
        base.insert(b.0.clone(), b.1.clone());
        let mut left = base.clone();
        left.insert(c.0.clone(), c.1.clone());
        left.remove(&a.0);
        let mut right = base.clone();
        right.get_mut(&b.0);
        right.insert(d.0.clone(), d.1.clone());
        right.insert(d.0.clone(), d.1.clone());
        assert_eq!(names(base.gangs_changed_since(&base.clone())), Some(vec![]));
        assert_eq!(
            names(left.gangs_changed_since(&base)),
            Some(vec!["a".into(), "c".into()])
        );
        assert_eq!(
            names(base.gangs_changed_since(&left)),
            Some(vec!["a".into(), "c".into()])
        );
        assert_eq!(
            names(right.gangs_changed_since(&left)),
            Some(vec!["a".into(), "b".into(), "c".into(), "d".into()])
        );
        // Nothing taken out, nothing to change: not logged.
        let mut same = base.clone();
        same.remove(&c.0);
        assert!(same.get_mut(&c.0).is_none());
        assert_eq!(names(same.gangs_changed_since(&base)), Some(vec![]));
    }

    #[test]
    fn maps_made_apart_or_a_log_begun_anew_do_not_meet() {
        let (a, b) = (one("a"), one("b"));
        let built: Jobs = [a.clone()].into_iter().collect();
        let other: Jobs = [a.clone()].into_iter().collect();
        assert_eq!(names(built.gangs_changed_since(&other)), None);
        assert!(built == other, "equal by their jobs");
        let mut long = built.clone();
        for _ in 0..LOG_REACH {
            long.insert(b.0.clone(), b.1.clone());
        }
        assert_eq!(
            names(long.gangs_changed_since(&built)),
            Some(vec!["b".into()])
        );
        long.insert(b.0.clone(), b.1.clone());
        assert_eq!(names(long.gangs_changed_since(&built)), None);
        let mut cleared = built.clone();
        cleared.clear();
        assert_eq!(names(cleared.gangs_changed_since(&built)), None);
    }
}
