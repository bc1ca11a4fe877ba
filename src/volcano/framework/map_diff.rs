//! The gangs whose entry differs between two versions of a map by gang (the
//! session's jobs, or its verdicts), worked out once for everyone who follows
//! them.
//!
//! Several figures follow the session's jobs from one session to the next
//! (drf's held shares, the queues' pod counts, the term holders, the unsettled
//! jobs), and several follow its verdicts from one cycle to the next (the
//! queues' counts by phase, the PodGroup statuses, the reasons members were
//! told); each keeps the map it last followed, so they ask for the difference
//! between the same two maps. A persistent map's diff skips shared subtrees
//! but still steps through every sibling of a changed path, which with
//! thousands of gangs is most of what following costs; asking once and handing
//! the answer to the others costs one walk. Two versions of the jobs are
//! compared by their logs instead (see `job_map`) wherever the logs meet,
//! which costs the changed gangs' lookups alone.
//!
//! Answers are kept by the identity of the two maps (their roots), and the
//! maps are kept with them: while a map is kept its root cannot be reused or
//! changed in place, so a map with the same root is the same map. The few last
//! answers are kept, in one place per kind of map shared by all planners of
//! the process (who ask the same questions one after the other); a question
//! about other maps only misses.

use super::job::{GangKey, JobInfo};
use super::outcome::{GangVerdict, Verdicts};
use imbl::OrdMap;
use imbl::ordmap::DiffItem;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

pub use super::job_map::Jobs;

/// A gang's entry before and after: `None` before for one added, after for one
/// gone.
pub type Change<V> = (GangKey, Option<V>, Option<V>);

/// The changes between two maps, in key order.
pub type Changes<V> = Arc<[Change<V>]>;

/// How many answers are kept of each kind: those asked as a session opens and
/// as it closes, and those asked while it runs.
const KEPT: usize = 4;

struct Answer<V: Clone> {
    from: OrdMap<GangKey, V>,
    to: OrdMap<GangKey, V>,
    changes: Changes<V>,
}

/// The last answers, oldest first.
struct Answers<V: Clone>(VecDeque<Answer<V>>);

impl<V: Clone> Answers<V> {
    const fn new() -> Self {
        Self(VecDeque::new())
    }

    fn kept(&self, from: &OrdMap<GangKey, V>, to: &OrdMap<GangKey, V>) -> Option<Changes<V>> {
        self.0
            .iter()
            .find(|a| a.from.ptr_eq(from) && a.to.ptr_eq(to))
            .map(|a| Arc::clone(&a.changes))
    }

    fn keep(&mut self, from: &OrdMap<GangKey, V>, to: &OrdMap<GangKey, V>, changes: &Changes<V>) {
        if self.0.len() == KEPT {
            self.0.pop_front();
        }
        self.0.push_back(Answer {
            from: from.clone(),
            to: to.clone(),
            changes: Arc::clone(changes),
        });
    }
}

static JOB_ANSWERS: Mutex<Answers<Arc<JobInfo>>> = Mutex::new(Answers::new());
static VERDICT_ANSWERS: Mutex<Answers<Arc<GangVerdict>>> = Mutex::new(Answers::new());

/// The jobs of `to` that are not the very ones of `from`, and those of `from`
/// gone from `to`: from the gangs their logs name since they parted, or by
/// the maps' diff when their logs do not meet.
pub fn job_changes(from: &Jobs, to: &Jobs) -> Changes<Arc<JobInfo>> {
    answered(&JOB_ANSWERS, from, to, || job_changes_unkept(from, to))
}

/// [`job_changes`] for a question no one else asks (a session's jobs as its
/// statements leave them): worked out without keeping the answer, which
/// would push out answers others will ask for.
pub fn job_changes_unkept(from: &Jobs, to: &Jobs) -> Changes<Arc<JobInfo>> {
    match to.gangs_changed_since(from) {
        Some(gangs) => gangs
            .into_iter()
            .filter_map(|gang| {
                let (before, after) = (from.get(&gang).cloned(), to.get(&gang).cloned());
                (before != after).then_some((gang, before, after))
            })
            .collect(),
        None => diff(from, to),
    }
}

/// The verdicts of `to` that differ from those of `from`, and those of `from`
/// gone from `to`.
pub fn verdict_changes(from: &Verdicts, to: &Verdicts) -> Changes<Arc<GangVerdict>> {
    changes_with(&VERDICT_ANSWERS, from, to)
}

fn changes_with<V: Clone + PartialEq>(
    answers: &Mutex<Answers<V>>,
    from: &OrdMap<GangKey, V>,
    to: &OrdMap<GangKey, V>,
) -> Changes<V> {
    answered(answers, from, to, || diff(from, to))
}

/// The answer kept for `from` and `to`, or the one `work_out` gives (then
/// kept).
fn answered<V: Clone>(
    answers: &Mutex<Answers<V>>,
    from: &OrdMap<GangKey, V>,
    to: &OrdMap<GangKey, V>,
    work_out: impl FnOnce() -> Changes<V>,
) -> Changes<V> {
    if from.ptr_eq(to) {
        return Arc::from(Vec::new());
    }
    if let Some(changes) = answers.lock().kept(from, to) {
        return changes;
    }
    // Worked out unlocked: planners asking about other maps do not wait on it.
    let changes = work_out();
    answers.lock().keep(from, to, &changes);
    changes
}

/// The maps' own diff, with the entries it names.
fn diff<V: Clone + PartialEq>(from: &OrdMap<GangKey, V>, to: &OrdMap<GangKey, V>) -> Changes<V> {
    from.diff(to)
        .map(|item| match item {
            DiffItem::Add(key, after) => (key.clone(), None, Some(after.clone())),
            DiffItem::Update {
                old: (_, before),
                new: (key, after),
            } => (key.clone(), Some(before.clone()), Some(after.clone())),
            DiffItem::Remove(key, before) => (key.clone(), Some(before.clone()), None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::testing::{job, jobs_map as jobs};

    fn names(changes: &[Change<Arc<JobInfo>>]) -> Vec<(String, bool, bool)> {
        changes
            .iter()
            .map(|(key, before, after)| (key.name.to_string(), before.is_some(), after.is_some()))
            .collect()
    }

    #[test]
    fn changes_name_the_jobs_added_replaced_and_gone_and_nothing_else() {
        let a = Arc::new(job("a", "q", 1, Vec::new()));
        let b = Arc::new(job("b", "q", 1, Vec::new()));
        let c = Arc::new(job("c", "q", 1, Vec::new()));
        let before = jobs(&[&a, &b]);
        let mut after = before.clone();
        after.remove(&a.key);
        after.insert(c.key.clone(), Arc::clone(&c));
        // A job built again the same is the same job.
        after.insert(b.key.clone(), Arc::new((*b).clone()));
        assert_eq!(
            names(&job_changes(&before, &after)),
            [("a".to_owned(), true, false), ("c".to_owned(), false, true)]
        );
        let mut b2 = (*b).clone();
        b2.min_member = 2;
        after.insert(b.key.clone(), Arc::new(b2));
        assert_eq!(
            names(&job_changes(&before, &after)),
            [
                ("a".to_owned(), true, false),
                ("b".to_owned(), true, true),
                ("c".to_owned(), false, true)
            ]
        );
        assert!(job_changes(&after, &after.clone()).is_empty());
    }

    /// Two versions grown apart from one base by random changes (and, for
    /// some, each built anew from its entries, so that their logs do not
    /// meet): the changes found from the logs are the maps' diff.
    mod logs_give_the_diff {
        use super::*;
        use proptest::prelude::*;

        /// A change: put gang `n`'s job (with a minimum of `m`, so that the
        /// same minimum builds an equal job), take it out, or touch it.
        fn changes() -> impl Strategy<Value = Vec<(u8, u8, usize)>> {
            proptest::collection::vec((0u8..3, 0u8..12, 1usize..3), 0..24)
        }

        fn grow(jobs: &mut Jobs, changes: &[(u8, u8, usize)]) {
            for &(op, n, m) in changes {
                let j = job(&format!("g{n}"), "q", m, Vec::new());
                match op {
                    0 => {
                        jobs.insert(j.key.clone(), Arc::new(j));
                    }
                    1 => {
                        jobs.remove(&j.key);
                    }
                    _ => {
                        if let Some(kept) = jobs.get_mut(&j.key) {
                            Arc::make_mut(kept).min_member = m;
                        }
                    }
                }
            }
        }

        /// Each change by gang name, with the minimum before and after.
        fn named(changes: &[Change<Arc<JobInfo>>]) -> Vec<(String, Option<usize>, Option<usize>)> {
            changes
                .iter()
                .map(|(key, before, after)| {
                    (
                        key.name.to_string(),
                        before.as_ref().map(|j| j.min_member),
                        after.as_ref().map(|j| j.min_member),
                    )
                })
                .collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn from_either_side(
                base in changes(),
                left in changes(),
                right in changes(),
                rebuilt in 0u8..3,
            ) {
                let mut start = Jobs::new();
                grow(&mut start, &base);
                let (mut a, mut b) = (start.clone(), start.clone());
                grow(&mut a, &left);
                grow(&mut b, &right);
                if rebuilt == 1 {
                    a = a.iter().map(|(k, j)| (k.clone(), Arc::clone(j))).collect();
                }
                for (from, to) in [(&start, &a), (&a, &start), (&a, &b), (&b, &a), (&start, &b)] {
                    prop_assert_eq!(
                        named(&job_changes(from, to)),
                        named(&super::super::diff(from, to))
                    );
                    prop_assert_eq!(
                        job_changes_unkept(from, to).len(),
                        job_changes(from, to).len()
                    );
                }
            }
        }
    }

    #[test]
    fn the_same_question_is_answered_once_and_a_map_changed_since_is_asked_anew() {
        let a = Arc::new(job("a", "q", 1, Vec::new()));
        let b = Arc::new(job("b", "q", 1, Vec::new()));
        let before = jobs(&[&a]);
        let mut after = before.clone();
        after.insert(b.key.clone(), Arc::clone(&b));
        let answers = Mutex::new(Answers::new());
        let first = changes_with(&answers, &before, &after);
        let again = changes_with(&answers, &before.clone(), &after.clone());
        assert!(Arc::ptr_eq(&first, &again), "answered from what was kept");
        // The later map changed since: another map, another answer.
        after.remove(&b.key);
        assert!(changes_with(&answers, &before, &after).is_empty());
        // Answers beyond the few kept push out the oldest.
        let mut maps = vec![before.clone()];
        for i in 0..KEPT {
            let mut next = maps[i].clone();
            next.insert(b.key.clone(), Arc::new(job("b", "q", i + 2, Vec::new())));
            maps.push(next);
        }
        for pair in maps.windows(2) {
            changes_with(&answers, &pair[0], &pair[1]);
        }
        assert!(answers.lock().kept(&before, &after).is_none());
        assert!(answers.lock().kept(&maps[KEPT - 1], &maps[KEPT]).is_some());
    }
}
