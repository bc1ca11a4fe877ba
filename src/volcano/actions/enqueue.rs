//! Enqueue: admits PodGroups to their queues (Pending → Inqueue) while the queue's
//! plugins allow it, queue by queue in queue order and job by job in job order. A
//! job admitted reserves its minimum resources against its queue, so two gangs
//! cannot both be admitted on the same room. A PodGroup is admitted before its
//! pods exist, even before the first one is created, as Volcano admits it.

use super::{admittable_by_queue, next_job};
use crate::volcano::framework::{Action, GangPhase, Session};

/// The enqueue action.
#[derive(Debug, Clone, Copy)]
pub struct Enqueue;

impl Action for Enqueue {
    fn name(&self) -> &'static str {
        "enqueue"
    }

    fn execute(&self, session: &mut Session) {
        // A job with anything placed is admitted already. Most jobs are admitted
        // already: their tasks are not counted.
        let mut waiting = admittable_by_queue(session, |job| {
            !job.inqueue && !job.tasks.iter().any(|t| t.status.is_ready())
        });
        while let Some(key) = next_job(session, &mut waiting, false) {
            let Some(job) = session.state.job(&key) else {
                continue;
            };
            // Like Volcano, a PodGroup without minResources (and no card request) is
            // admitted at once: the allocate simulation is the real check.
            if job.min_request().is_none() && job.card_request.is_empty() {
                session.enqueue(&key);
                continue;
            }
            match session.job_enqueueable(&key) {
                Ok(()) => session.enqueue(&key),
                Err(rejection) => session.note_job(
                    &key,
                    Some(GangPhase::Pending),
                    "NotEnoughResources",
                    format!("queue admission: {rejection}"),
                ),
            }
        }
    }
}
