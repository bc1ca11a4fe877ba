//! Figures derived from each job, kept from one session to the next. The planner
//! hands every session the same `Arc` for a job nothing changed, in a
//! persistent map whose unchanged subtrees are shared with the map of the last
//! cycle: keeping the map the figures were derived from (a clone costs nothing)
//! and following only the difference between it and the next one (which skips
//! the shared subtrees) makes opening and closing a session cost what changed
//! rather than what waits. The figures themselves are kept in a persistent map
//! too, so that handing them on (the verdicts to the outcome) copies nothing.
//! Figures following the same jobs share one difference (`map_diff`).

use super::job::{GangKey, JobInfo};
pub use super::map_diff::Jobs;
use super::map_diff::job_changes;
use imbl::OrdMap;
use std::fmt;

/// A figure per job, with the jobs they were derived from.
#[derive(Clone)]
pub struct KeptPerJob<T: Clone> {
    /// The jobs as the figures were last brought up to them.
    followed: Jobs,
    figures: OrdMap<GangKey, T>,
}

/// Each job's figure by key: figures derived anew from the same jobs read the
/// same (the jobs themselves are left out).
impl<T: Clone + fmt::Debug> fmt::Debug for KeptPerJob<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<T: Clone> Default for KeptPerJob<T> {
    fn default() -> Self {
        Self {
            followed: Jobs::new(),
            figures: OrdMap::new(),
        }
    }
}

/// How a kept figure changed while following the jobs: the figure before (none
/// for a job new to it) and after (none for a job gone).
pub type FigureChange<'a, T> = (Option<&'a T>, Option<&'a T>);

impl<T: Clone> KeptPerJob<T> {
    /// Brings the figures up to `jobs`: derives them again for every job that
    /// differs from the one they were derived from, and for the jobs named in
    /// `again` (a figure that depends on more than its job: a verdict on the
    /// job's note), and forgets jobs no longer there. `changed` hears of every
    /// figure replaced, added or forgotten, with its job's key (to keep sums
    /// over them). Only the parts of the two maps that are not shared are
    /// walked: a job whose `Arc` is the one followed last is not looked at.
    pub fn follow<'k>(
        &mut self,
        jobs: &Jobs,
        again: impl IntoIterator<Item = &'k GangKey>,
        mut derive: impl FnMut(&JobInfo) -> T,
        mut changed: impl FnMut(&GangKey, FigureChange<'_, T>),
    ) {
        let Self { followed, figures } = self;
        for (key, _, job) in job_changes(followed, jobs).iter() {
            match job {
                Some(job) => put(figures, key, derive(job), &mut changed),
                None => {
                    if let Some(gone) = figures.remove(key) {
                        changed(key, (Some(&gone), None));
                    }
                }
            }
        }
        for key in again {
            if let Some(job) = jobs.get(key) {
                put(figures, key, derive(job), &mut changed);
            }
        }
        *followed = jobs.clone();
    }

    /// The figure kept for a job.
    pub fn get(&self, key: &GangKey) -> Option<&T> {
        self.figures.get(key)
    }

    /// Every job's figure, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&GangKey, &T)> {
        self.figures.iter()
    }

    /// Every job's figure by key, shared (a clone copies nothing).
    pub fn figures(&self) -> &OrdMap<GangKey, T> {
        &self.figures
    }

    /// Derives every figure again from what it holds (not from the job): for
    /// what every figure depends on besides its job, when that changes.
    pub fn rework_all(&mut self, mut rework: impl FnMut(&mut T)) {
        let keys: Vec<GangKey> = self.figures.keys().cloned().collect();
        for key in &keys {
            if let Some(figure) = self.figures.get_mut(key) {
                rework(figure);
            }
        }
    }
}

/// Puts a job's figure derived again, telling `changed` what it replaces.
fn put<T: Clone>(
    figures: &mut OrdMap<GangKey, T>,
    key: &GangKey,
    fresh: T,
    changed: &mut impl FnMut(&GangKey, FigureChange<'_, T>),
) {
    // One change to the map: a persistent map copies the path to the entry at
    // every change while an earlier version of it is still shared.
    let before = figures.insert(key.clone(), fresh);
    changed(key, (before.as_ref(), figures.get(key)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::testing::{gang_key, job, jobs_map as jobs};
    use std::sync::Arc;

    #[test]
    fn figures_are_derived_again_only_for_jobs_that_changed_and_forgotten_when_gone() {
        let a = Arc::new(job("a", "q", 1, Vec::new()));
        let b = Arc::new(job("b", "q", 1, Vec::new()));
        let c = Arc::new(job("c", "q", 1, Vec::new()));
        let mut kept: KeptPerJob<String> = KeptPerJob::default();
        let mut derived = Vec::new();
        let mut sum = 0i64;
        let mut follow = |kept: &mut KeptPerJob<String>, now: &Jobs| {
            derived.clear();
            kept.follow(
                now,
                [],
                |j| {
                    derived.push(j.key.name.to_string());
                    j.key.name.to_string()
                },
                |_, (before, after)| {
                    sum += i64::from(after.is_some()) - i64::from(before.is_some())
                },
            );
            derived.clone()
        };
        let first = jobs(&[&a, &c]);
        assert_eq!(follow(&mut kept, &first), ["a", "c"]);
        assert_eq!(follow(&mut kept, &first.clone()), Vec::<String>::new());
        // b is new and sorts between the kept ones; c changed (its min
        // member), in a map that keeps a as it was.
        let mut c2 = (*c).clone();
        c2.min_member = 2;
        let mut second = first.clone();
        second.insert(b.key.clone(), Arc::clone(&b));
        second.insert(c.key.clone(), Arc::new(c2));
        assert_eq!(follow(&mut kept, &second), ["b", "c"]);
        assert_eq!(kept.iter().count(), 3);
        // a is gone.
        let mut third = second.clone();
        third.remove(&a.key);
        assert_eq!(follow(&mut kept, &third), Vec::<String>::new());
        let names: Vec<&str> = kept.iter().map(|(k, _)| &*k.name).collect();
        assert_eq!(names, ["b", "c"]);
        assert_eq!(follow(&mut kept, &Jobs::new()), Vec::<String>::new());
        assert_eq!(kept.iter().count(), 0);
        assert_eq!(
            sum, 0,
            "the change callback saw every figure added and forgotten"
        );
    }

    #[test]
    fn a_job_named_again_has_its_figure_derived_again_though_it_did_not_change() {
        let a = Arc::new(job("a", "q", 1, Vec::new()));
        let b = Arc::new(job("b", "q", 1, Vec::new()));
        let now = jobs(&[&a, &b]);
        let mut kept: KeptPerJob<u32> = KeptPerJob::default();
        kept.follow(&now, [], |_| 1, |_, _| {});
        let mut told = Vec::new();
        kept.follow(
            &now,
            [&a.key, &gang_key("not-there")],
            |_| 2,
            |key, change| told.push((key.name.to_string(), change.0.copied(), change.1.copied())),
        );
        assert_eq!(kept.get(&a.key), Some(&2));
        assert_eq!(kept.get(&b.key), Some(&1));
        assert_eq!(told, [("a".to_string(), Some(1), Some(2))]);
    }

    #[test]
    fn a_job_built_again_the_same_keeps_its_figure() {
        let a = Arc::new(job("a", "q", 1, Vec::new()));
        let mut kept: KeptPerJob<u32> = KeptPerJob::default();
        kept.follow(&jobs(&[&a]), [], |_| 1, |_, _| {});
        let rebuilt = Arc::new((*a).clone());
        kept.follow(&jobs(&[&rebuilt]), [], |_| 2, |_, _| {});
        assert_eq!(kept.get(&a.key), Some(&1));
    }
}
