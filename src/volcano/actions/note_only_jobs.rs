//! Jobs whose turn in allocate changes nothing but what they are noted with,
//! kept apart from the jobs allocate tries: those its hints skip (still blocked
//! for the reason they waited with, see `AllocateHints`) and those with nothing
//! to place (every member already holds its place: a running queue pod is a job
//! of its own). With thousands of such jobs and a few new ones, a session then
//! orders and visits only the few it may place instead of passing over every job
//! in job order.
//!
//! Notes come out as from a pass over every job in job order. Such a job has its
//! turn (noted by the caller) when its turn would have come: before a job of its
//! queue that follows it in job order is tried, or, once its queue has nothing
//! left to try, when the queue is not overused (these turns change nothing, so
//! such a queue would still have reached it). One of an overused queue that was
//! never reached stays with the jobs allocate never reached.

use crate::volcano::framework::{GangKey, Session};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Note-only jobs by queue, in no particular order, whose turn has not come.
pub(super) struct NoteOnlyJobs {
    by_queue: BTreeMap<String, Vec<GangKey>>,
}

impl NoteOnlyJobs {
    /// Takes the jobs the session's hints skip, and those with nothing to place
    /// outside a network topology (placing within one is another path), out of
    /// `waiting`.
    pub fn take_from(session: &Session, waiting: &mut BTreeMap<String, Vec<GangKey>>) -> Self {
        let note_only = |key: &GangKey| {
            session.hints.skip.contains_key(key)
                || session.state.job(key).is_some_and(|job| {
                    job.network_topology.is_none()
                        && !job.tasks.iter().any(|t| session.state.plannable(t))
                })
        };
        let mut by_queue = BTreeMap::new();
        for (queue, jobs) in waiting.iter_mut() {
            let (note_only, tried): (Vec<GangKey>, Vec<GangKey>) =
                std::mem::take(jobs).into_iter().partition(note_only);
            *jobs = tried;
            if !note_only.is_empty() {
                by_queue.insert(queue.clone(), note_only);
            }
        }
        Self { by_queue }
    }

    /// `key`, a job of `queue`, takes its turn: the note-only jobs of the queue
    /// before it in job order have theirs first (`turn`).
    pub fn turn_of(
        &mut self,
        session: &mut Session,
        queue: &str,
        key: &GangKey,
        mut turn: impl FnMut(&mut Session, &GangKey),
    ) {
        let Some(jobs) = self.by_queue.get_mut(queue) else {
            return;
        };
        let mut before = Vec::new();
        jobs.retain(|job| {
            let first = session.job_order(job, key) == Ordering::Less;
            if first {
                before.push(job.clone());
            }
            !first
        });
        // A turn notes only its own job: the order of these turns is no matter.
        for job in before {
            turn(session, &job);
        }
    }

    /// Allocate has nothing left to try: the note-only jobs of queues with
    /// nothing left that are not overused have their turn (`turn`); the others
    /// join `waiting`, the jobs never reached.
    pub fn finish(
        self,
        session: &mut Session,
        waiting: &mut BTreeMap<String, Vec<GangKey>>,
        mut turn: impl FnMut(&mut Session, &GangKey),
    ) {
        for (queue, jobs) in self.by_queue {
            let tries_left = waiting.get(&queue).is_some_and(|j| !j.is_empty());
            if tries_left || session.overused(&queue) {
                waiting.entry(queue).or_default().extend(jobs);
            } else {
                for job in jobs {
                    turn(session, &job);
                }
            }
        }
    }
}
