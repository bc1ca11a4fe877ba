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
//!
//! A job that holds its minimum with nothing to place, and has no note, is not
//! kept at all: its turn would find it ready and clear a note it does not have,
//! and never reached it would not be noted either. Running jobs are most of the
//! jobs of a busy cluster, and each kept one costs an order comparison per job
//! tried in its queue.

use super::visit_schedulable_jobs;
use crate::volcano::framework::{GangKey, JobInfo, Session};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Note-only jobs by queue, in no particular order, whose turn has not come.
pub(super) struct NoteOnlyJobs {
    by_queue: BTreeMap<String, Vec<NoteOnly>>,
}

/// One note-only job. The job itself is held so that each comparison with a
/// job tried does not look it up again; its turn changes nothing in it.
pub(super) struct NoteOnly {
    pub key: GangKey,
    job: Arc<JobInfo>,
    /// The message a skipped job waited with; `None` for a job with nothing to
    /// place.
    pub skipped: Option<String>,
}

/// The admitted jobs allocate may try, by queue in no particular order, and the
/// note-only jobs set apart from them.
pub(super) fn sort_admitted(
    session: &mut Session,
) -> (BTreeMap<String, Vec<GangKey>>, NoteOnlyJobs) {
    // Jobs and skips are both in key order: one walk over each pairs them
    // without looking every job up among the skips.
    let skip = std::mem::take(&mut session.hints.skip);
    let mut skips = skip.iter().peekable();
    // A settled job has nothing to place; one skipped is noted even so.
    let mut tried: BTreeMap<String, Vec<GangKey>> = BTreeMap::new();
    let mut note_only: BTreeMap<String, Vec<NoteOnly>> = BTreeMap::new();
    visit_schedulable_jobs(session, Some(&skip), |session, key, job| {
        if !job.inqueue {
            return;
        }
        while skips.next_if(|(k, _)| *k < key).is_some() {}
        let skipped = skips.next_if(|(k, _)| *k == key).map(|(_, m)| m.clone());
        let nothing_to_place = skipped.is_none()
            && job.network_topology.is_none()
            && !job.tasks.iter().any(|t| session.state.plannable(t));
        if nothing_to_place
            && job.is_ready()
            && session.tiers().job_ready(job)
            && !session.has_note(key)
        {
            return;
        }
        if skipped.is_none() && !nothing_to_place {
            push(&mut tried, &job.queue, key.clone());
            return;
        }
        let entry = NoteOnly {
            key: key.clone(),
            job: Arc::clone(job),
            skipped,
        };
        push(&mut note_only, &job.queue, entry);
    });
    session.hints.skip = skip;
    (
        tried,
        NoteOnlyJobs {
            by_queue: note_only,
        },
    )
}

/// Adds `item` to `queue`'s list, copying the queue's name only for its first.
fn push<T>(by_queue: &mut BTreeMap<String, Vec<T>>, queue: &str, item: T) {
    match by_queue.get_mut(queue) {
        Some(items) => items.push(item),
        None => {
            by_queue.insert(queue.to_string(), vec![item]);
        }
    }
}

impl NoteOnlyJobs {
    /// `key`, a job of `queue`, takes its turn: the note-only jobs of the queue
    /// before it in job order have theirs first (`turn`).
    pub fn turn_of(
        &mut self,
        session: &mut Session,
        queue: &str,
        key: &GangKey,
        mut turn: impl FnMut(&mut Session, NoteOnly),
    ) {
        let Some(jobs) = self.by_queue.get_mut(queue) else {
            return;
        };
        let Some(tried) = session.state.jobs.get(key).cloned() else {
            return;
        };
        let (before, after): (Vec<NoteOnly>, Vec<NoteOnly>) = std::mem::take(jobs)
            .into_iter()
            .partition(|job| session.job_info_order(&job.job, &tried) == Ordering::Less);
        *jobs = after;
        // A turn notes only its own job: the order of these turns is no matter.
        for job in before {
            turn(session, job);
        }
    }

    /// Allocate has nothing left to try: the note-only jobs of queues with
    /// nothing left that are not overused have their turn (`turn`); the others
    /// join `waiting`, the jobs never reached.
    pub fn finish(
        self,
        session: &mut Session,
        waiting: &mut BTreeMap<String, Vec<GangKey>>,
        mut turn: impl FnMut(&mut Session, NoteOnly),
    ) {
        for (queue, jobs) in self.by_queue {
            let tries_left = waiting.get(&queue).is_some_and(|j| !j.is_empty());
            if tries_left || session.overused(&queue) {
                waiting
                    .entry(queue)
                    .or_default()
                    .extend(jobs.into_iter().map(|j| j.key));
            } else {
                for job in jobs {
                    turn(session, job);
                }
            }
        }
    }
}
