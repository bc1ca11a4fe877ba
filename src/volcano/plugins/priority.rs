//! priority: jobs and tasks with a higher priority go first; a job may preempt
//! tasks of lower-priority jobs (and, inside a job, a task those of lower
//! priority); a job starves while some of its tasks wait.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::gang_eviction::{GangEviction, GangEvictionKind};
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{JobInfo, SessionState, TaskInfo};
use std::cmp::Ordering;

/// The priority plugin.
#[derive(Debug, Default)]
pub struct Priority;

/// Builds the plugin (it takes no arguments).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(Priority)))
}

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn job_order(&self, _: &SessionState, a: &JobInfo, b: &JobInfo) -> Ordering {
        b.priority.cmp(&a.priority)
    }

    fn task_order(&self, a: &TaskInfo, b: &TaskInfo) -> Ordering {
        b.priority.cmp(&a.priority)
    }

    fn preemptable(
        &self,
        state: &SessionState,
        preemptor: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        let priority = |t: &TaskInfo| state.job(&t.job).map_or(0, |j| j.priority);
        let mine = priority(preemptor);
        Some(
            candidates
                .iter()
                .filter(|c| {
                    if c.job == preemptor.job {
                        c.priority < preemptor.priority
                    } else {
                        priority(c) < mine
                    }
                })
                .map(|c| c.uid.clone())
                .collect(),
        )
    }

    /// For `gangpreempt`, tasks of jobs of lower priority than the preemptor's;
    /// for `gangreclaim`, every candidate (reclaim is about fair shares, not
    /// priority).
    fn gang_evictable(
        &self,
        state: &SessionState,
        eviction: &GangEviction<'_>,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        let lower = |t: &&&TaskInfo| match eviction.kind {
            GangEvictionKind::Reclaim => true,
            GangEvictionKind::Preempt => state
                .job(&t.job)
                .is_some_and(|j| j.priority < eviction.job.priority),
        };
        Some(
            candidates
                .iter()
                .filter(lower)
                .map(|t| t.uid.clone())
                .collect(),
        )
    }

    fn job_starving(&self, job: &JobInfo) -> Option<bool> {
        let c = job.counts();
        Some(c.ready + c.pipelined < c.valid)
    }
}
