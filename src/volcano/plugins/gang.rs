//! gang: a job runs whole or not at all. It is valid only when enough of its pods
//! exist to ever reach minMember (and each role's minTaskMember), ready once that
//! many hold resources, and jobs not yet ready are served before ready ones.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::gang_eviction::GangEviction;
use crate::volcano::framework::plugin::{JobInvalid, Plugin, Vote};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::victims::gang_safe;
use crate::volcano::framework::{JobInfo, Rejection, SessionState, TaskInfo};
use std::cmp::Ordering;

/// The gang plugin.
#[derive(Debug, Default)]
pub struct Gang;

/// Builds the plugin (it takes no arguments).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(Gang)))
}

impl Plugin for Gang {
    fn name(&self) -> &'static str {
        "gang"
    }

    fn job_valid(&self, _: &SessionState, job: &JobInfo) -> Result<(), JobInvalid> {
        let invalid = |message: String| JobInvalid {
            reason: "NotEnoughTasks",
            message,
        };
        // Every action asks this of every job: without role minimums a count
        // answers it.
        let valid = job.valid_count();
        if valid < job.min_member {
            return Err(invalid(format!(
                "{} of minMember {} pods exist; waiting for the rest",
                valid, job.min_member
            )));
        }
        if job.min_roles.is_empty() {
            return Ok(());
        }
        let c = job.counts();
        let role_sum: usize = job.min_roles.values().sum();
        if job.min_member >= role_sum {
            for (role, min) in &job.min_roles {
                let have = c.valid_roles.get(role).copied().unwrap_or(0);
                if have < *min {
                    return Err(invalid(format!(
                        "{have} of minTaskMember {min} pods of task {role:?} exist; waiting for the rest"
                    )));
                }
            }
        }
        Ok(())
    }

    fn job_ready(&self, job: &JobInfo) -> Option<bool> {
        Some(job.is_ready())
    }

    fn job_pipelined(&self, job: &JobInfo) -> Vote {
        let c = job.counts();
        let mut with_pipelined = c.ready_roles.clone();
        for (role, n) in &c.pipelined_roles {
            *with_pipelined.entry(role.clone()).or_default() += n;
        }
        if job.reaches_minimum(c.ready + c.pipelined, &with_pipelined) {
            Vote::Permit
        } else {
            Vote::Reject(Rejection {
                plugin: "gang",
                queue: job.queue.clone(),
                dimension: "minMember".into(),
                message: format!(
                    "{} of minMember {} tasks placed or pipelined",
                    c.ready + c.pipelined,
                    job.min_member
                ),
            })
        }
    }

    fn job_starving(&self, job: &JobInfo) -> Option<bool> {
        let c = job.counts();
        Some(c.ready + c.pipelined < job.min_member)
    }

    /// A victim only when its gang keeps its minimum without the victims, or goes
    /// whole.
    fn preemptable(
        &self,
        state: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        let uids: Vec<String> = candidates.iter().map(|t| t.uid.clone()).collect();
        Some(gang_safe(state, &uids))
    }

    fn reclaimable(
        &self,
        state: &SessionState,
        reclaimer: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        self.preemptable(state, reclaimer, candidates)
    }

    /// Every candidate: the gang eviction actions keep gangs whole themselves,
    /// evicting a job's members that would break it only all together.
    fn gang_evictable(
        &self,
        _: &SessionState,
        _: &GangEviction<'_>,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(candidates.iter().map(|t| t.uid.clone()).collect())
    }

    /// Jobs not yet ready first: finishing a gang's minimum frees nothing, but a
    /// gang stuck half-placed holds resources for nothing.
    fn job_order(&self, _: &SessionState, a: &JobInfo, b: &JobInfo) -> Ordering {
        a.is_ready().cmp(&b.is_ready())
    }
}
