//! Figures derived from each job, kept from one session to the next. The planner
//! hands every session the same `Arc` for a job nothing changed, so a figure
//! derived from a job stays right for as long as the job's `Arc` is the same:
//! with thousands of jobs waiting and almost none changing between cycles,
//! deriving again only for the jobs whose `Arc` is new makes opening and
//! closing a session cost what changed. Holding the `Arc` keeps it alive, so
//! its address cannot be reused by another job, and a session that changes a
//! job copies it first (`Arc::make_mut` on a shared `Arc`), giving it a new one.

use super::job::{GangKey, JobInfo};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A figure per job, with the job it was derived from.
#[derive(Clone)]
pub struct KeptPerJob<T> {
    entries: BTreeMap<GangKey, (Arc<JobInfo>, T)>,
}

/// Each job's figure by key: figures derived anew from the same jobs read the
/// same (the jobs themselves are left out).
impl<T: fmt::Debug> fmt::Debug for KeptPerJob<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<T> Default for KeptPerJob<T> {
    fn default() -> Self {
        Self {
            entries: BTreeMap::new(),
        }
    }
}

/// How a kept figure changed while following the jobs: the figure before (none
/// for a job new to it) and after (none for a job gone).
pub type FigureChange<'a, T> = (Option<&'a T>, Option<&'a T>);

impl<T> KeptPerJob<T> {
    /// Brings the figures up to `jobs`: derives them again for every job whose
    /// `Arc` is not the one they were derived from, or whose kept figure
    /// `stale` rejects, and forgets jobs no longer there. `changed` hears of
    /// every figure replaced, added or forgotten (to keep sums over them).
    pub fn follow<'j>(
        &mut self,
        jobs: impl IntoIterator<Item = (&'j GangKey, &'j Arc<JobInfo>)>,
        mut derive: impl FnMut(&JobInfo) -> T,
        mut stale: impl FnMut(&JobInfo, &T) -> bool,
        mut changed: impl FnMut(FigureChange<'_, T>),
    ) {
        // Both maps are in key order: one pass over the two finds what is new,
        // what changed and what is gone, without looking any key up.
        let mut added: Vec<(&GangKey, &Arc<JobInfo>)> = Vec::new();
        let mut gone: Vec<GangKey> = Vec::new();
        let mut now = jobs.into_iter().peekable();
        for (key, (kept_job, figure)) in self.entries.iter_mut() {
            while let Some((k, job)) = now.next_if(|(k, _)| *k < key) {
                added.push((k, job));
            }
            match now.next_if(|(k, _)| *k == key) {
                Some((_, job)) => {
                    if !Arc::ptr_eq(kept_job, job) || stale(job, figure) {
                        let fresh = derive(job);
                        changed((Some(&*figure), Some(&fresh)));
                        *figure = fresh;
                        *kept_job = job.clone();
                    }
                }
                None => {
                    changed((Some(&*figure), None));
                    gone.push(key.clone());
                }
            }
        }
        added.extend(now);
        for key in &gone {
            self.entries.remove(key);
        }
        for (key, job) in added {
            let fresh = derive(job);
            changed((None, Some(&fresh)));
            self.entries.insert(key.clone(), (job.clone(), fresh));
        }
    }

    /// The figure kept for a job.
    pub fn get(&self, key: &GangKey) -> Option<&T> {
        self.entries.get(key).map(|(_, figure)| figure)
    }

    /// Every job's figure, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&GangKey, &T)> {
        self.entries.iter().map(|(key, (_, figure))| (key, figure))
    }

    /// Every figure, to derive them again from what they hold (not from the
    /// job).
    pub fn figures_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries.values_mut().map(|(_, figure)| figure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::testing::job;

    fn jobs(list: &[&Arc<JobInfo>]) -> BTreeMap<GangKey, Arc<JobInfo>> {
        list.iter()
            .map(|j| (j.key.clone(), Arc::clone(j)))
            .collect()
    }

    #[test]
    fn figures_are_derived_again_only_for_jobs_whose_arc_changed_and_forgotten_when_gone() {
        let a = Arc::new(job("a", "q", 1, Vec::new()));
        let b = Arc::new(job("b", "q", 1, Vec::new()));
        let c = Arc::new(job("c", "q", 1, Vec::new()));
        let mut kept: KeptPerJob<String> = KeptPerJob::default();
        let mut derived = Vec::new();
        let mut sum = 0i64;
        let mut follow = |kept: &mut KeptPerJob<String>, now: &[&Arc<JobInfo>]| {
            derived.clear();
            kept.follow(
                &jobs(now),
                |j| {
                    derived.push(j.key.name.clone());
                    j.key.name.clone()
                },
                |_, _| false,
                |(before, after)| sum += i64::from(after.is_some()) - i64::from(before.is_some()),
            );
            derived.clone()
        };
        assert_eq!(follow(&mut kept, &[&a, &c]), ["a", "c"]);
        assert_eq!(follow(&mut kept, &[&a, &c]), Vec::<String>::new());
        // b is new and sorts between the kept ones; c changed (a new Arc).
        let c2 = Arc::new((*c).clone());
        assert_eq!(follow(&mut kept, &[&a, &b, &c2]), ["c", "b"]);
        assert_eq!(kept.iter().count(), 3);
        // a is gone.
        assert_eq!(follow(&mut kept, &[&b, &c2]), Vec::<String>::new());
        let names: Vec<&str> = kept.iter().map(|(k, _)| k.name.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
        assert_eq!(follow(&mut kept, &[]), Vec::<String>::new());
        assert_eq!(kept.iter().count(), 0);
        assert_eq!(
            sum, 0,
            "the change callback saw every figure added and forgotten"
        );
    }

    #[test]
    fn a_figure_its_check_finds_stale_is_derived_again_for_the_same_job() {
        let a = Arc::new(job("a", "q", 1, Vec::new()));
        let mut kept: KeptPerJob<u32> = KeptPerJob::default();
        kept.follow(&jobs(&[&a]), |_| 1, |_, _| false, |_| {});
        kept.follow(&jobs(&[&a]), |_| 2, |_, figure| *figure == 1, |_| {});
        assert_eq!(kept.get(&a.key), Some(&2));
        kept.follow(&jobs(&[&a]), |_| 3, |_, figure| *figure == 1, |_| {});
        assert_eq!(kept.get(&a.key), Some(&2));
    }
}
