//! The jobs allocate skips (still blocked for the reason they waited with, see
//! `AllocateHints`), kept apart from the jobs it tries: with thousands of blocked
//! gangs and a few new ones, a session then orders and visits only the few it may
//! place instead of passing over every blocked one in job order.
//!
//! Notes come out as from a pass over every job in job order. A skipped job is
//! noted with the message it waited with when its turn would have come: before a
//! job of its queue that follows it in job order is tried, or, once its queue has
//! nothing left to try, when the queue is not overused (skipping changes nothing,
//! so such a queue would still have reached it). A skipped job of an overused
//! queue that was never reached stays with the jobs allocate never reached.

use crate::volcano::framework::{GangKey, Session};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Skipped jobs by queue, in no particular order, not yet noted.
pub(super) struct SkippedJobs {
    by_queue: BTreeMap<String, Vec<GangKey>>,
}

impl SkippedJobs {
    /// Takes the jobs the session's hints skip out of `waiting`.
    pub fn take_from(session: &Session, waiting: &mut BTreeMap<String, Vec<GangKey>>) -> Self {
        let mut by_queue = BTreeMap::new();
        if session.hints.skip.is_empty() {
            return Self { by_queue };
        }
        for (queue, jobs) in waiting.iter_mut() {
            let (skipped, tried): (Vec<GangKey>, Vec<GangKey>) = std::mem::take(jobs)
                .into_iter()
                .partition(|key| session.hints.skip.contains_key(key));
            *jobs = tried;
            if !skipped.is_empty() {
                by_queue.insert(queue.clone(), skipped);
            }
        }
        Self { by_queue }
    }

    /// `key`, a job of `queue`, takes its turn: the skipped jobs of the queue
    /// before it in job order had theirs.
    pub fn turn_of(&mut self, session: &mut Session, queue: &str, key: &GangKey) {
        let Some(jobs) = self.by_queue.get_mut(queue) else {
            return;
        };
        let mut passed = Vec::new();
        jobs.retain(|skipped| {
            let before = session.job_order(skipped, key) == Ordering::Less;
            if before {
                passed.push(skipped.clone());
            }
            !before
        });
        for skipped in passed {
            note(session, &skipped);
        }
    }

    /// Allocate has nothing left to try: the skipped jobs of queues with nothing
    /// left that are not overused had their turn; the others join `waiting`, the
    /// jobs never reached.
    pub fn finish(self, session: &mut Session, waiting: &mut BTreeMap<String, Vec<GangKey>>) {
        for (queue, jobs) in self.by_queue {
            let tries_left = waiting.get(&queue).is_some_and(|j| !j.is_empty());
            if tries_left || session.overused(&queue) {
                waiting.entry(queue).or_default().extend(jobs);
            } else {
                for skipped in jobs {
                    note(session, &skipped);
                }
            }
        }
    }
}

/// Notes a skipped job with the message it waited with.
fn note(session: &mut Session, key: &GangKey) {
    if let Some(message) = session.hints.skip.get(key).cloned() {
        session.note_job(key, None, "NotEnoughResources", message);
    }
}
