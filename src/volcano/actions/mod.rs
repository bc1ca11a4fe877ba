//! The actions a configuration can list, as values: `actions: "enqueue, allocate,
//! backfill"` runs these three, in that order, in every session.

mod alike_failures;
#[cfg(test)]
mod alike_failures_tests;
pub mod allocate;
mod allocate_in_topology;
#[cfg(test)]
mod allocate_in_topology_tests;
#[cfg(test)]
mod allocate_visits_tests;
pub mod backfill;
mod domain_room;
#[cfg(test)]
mod domain_room_tests;
pub mod enqueue;
pub(crate) mod eviction_domains;
pub mod gang_eviction;
pub mod gang_eviction_arguments;
#[cfg(test)]
mod gang_eviction_tests;
pub mod gang_preempt;
pub mod gang_reclaim;
mod make_room;
pub(crate) mod nomination_plan;
mod note_only_jobs;
#[cfg(test)]
mod note_only_jobs_tests;
#[cfg(test)]
mod plain_tasks_tests;
#[cfg(test)]
mod pod_affinity_tests;
pub mod preempt;
pub mod preempt_arguments;
#[cfg(test)]
mod preferred_pod_affinity_tests;
#[cfg(test)]
mod queue_limits_tests;
pub mod reclaim;
#[cfg(test)]
mod reclaim_tests;
#[cfg(test)]
mod settled_jobs_tests;
mod topology_aware_preempt;
#[cfg(test)]
mod topology_aware_preempt_tests;
mod victim_bundles;
#[cfg(test)]
mod victim_bundles_tests;

use super::conf::{Action as ActionName, SchedulerConf};
use super::framework::Action;
use gang_eviction_arguments::GangEvictionArguments;

/// The configured actions that run, in order. `shuffle` is accepted in the
/// configuration and does not run.
pub fn configured(conf: &SchedulerConf) -> Vec<Box<dyn Action>> {
    conf.actions
        .iter()
        .filter_map(|a| -> Option<Box<dyn Action>> {
            match a {
                ActionName::Enqueue => Some(Box::new(enqueue::Enqueue)),
                ActionName::Allocate => Some(Box::new(allocate::Allocate)),
                ActionName::Backfill => Some(Box::new(backfill::Backfill)),
                ActionName::Preempt => Some(preempt::Preempt::configured(&conf.configurations)),
                ActionName::Reclaim => Some(Box::new(reclaim::Reclaim)),
                ActionName::Shuffle => None,
                ActionName::GangPreempt => Some(Box::new(gang_preempt::GangPreempt::new(
                    GangEvictionArguments::of(&conf.configurations, a.as_str()),
                ))),
                ActionName::GangReclaim => Some(Box::new(gang_reclaim::GangReclaim::new(
                    GangEvictionArguments::of(&conf.configurations, a.as_str()),
                ))),
            }
        })
        .collect()
}

/// A job with its key.
type KeyedJob<'a> = (
    &'a super::framework::GangKey,
    &'a std::sync::Arc<super::framework::JobInfo>,
);

/// The jobs an action may have something to do for, in key order, within the
/// session's scope: those that may not be settled (see `UnsettledJobs`), and
/// those of `also`. No action does anything for a settled job: it has nothing
/// to admit, place or start, and no member to make room for.
fn with_work<'a>(
    session: &'a super::framework::Session,
    also: Option<&'a std::collections::BTreeMap<super::framework::GangKey, String>>,
) -> Box<dyn Iterator<Item = KeyedJob<'a>> + 'a> {
    use super::framework::unsettled_jobs::{Seen, SortedUnion};
    let state = &session.state;
    if let Some(only) = &state.only {
        return Box::new(state.jobs.get_key_value(only).into_iter());
    }
    let noted = session.noted_jobs().map(|key| (key, Seen::Unknown));
    let also = also
        .into_iter()
        .flat_map(|a| a.keys())
        .map(|key| (key, Seen::Unknown));
    let extra = SortedUnion::new(noted, also).map(|(key, _)| key);
    Box::new(session.unsettled_jobs().with(&state.jobs, extra))
}

/// The jobs an action may consider, grouped by queue, each queue's jobs in job
/// order: not completed, within the session's scope, with something to do,
/// passing `keep`. Jobs that cannot be scheduled at all are noted on the way
/// (once per session).
pub(crate) fn jobs_by_queue(
    session: &mut super::framework::Session,
    keep: impl Fn(&super::framework::JobInfo) -> bool,
) -> std::collections::BTreeMap<String, Vec<super::framework::GangKey>> {
    let mut by_queue: std::collections::BTreeMap<String, Vec<super::framework::GangKey>> =
        Default::default();
    visit_schedulable_jobs(session, None, |_, key, job| {
        if !keep(job) {
            return;
        }
        match by_queue.get_mut(&job.queue) {
            Some(jobs) => jobs.push(key.clone()),
            None => {
                by_queue.insert(job.queue.clone(), vec![key.clone()]);
            }
        }
    });
    in_job_order(session, by_queue)
}

/// Shows `visit` every job an action may consider, in key order: not
/// completed, within the session's scope, valid, and with something to do or
/// in `also`. Jobs that
/// cannot be scheduled at all are noted instead (once every job was looked
/// at: the jobs are borrowed meanwhile, so only what `visit` keeps is copied).
pub(crate) fn visit_schedulable_jobs(
    session: &mut super::framework::Session,
    also: Option<&std::collections::BTreeMap<super::framework::GangKey, String>>,
    mut visit: impl FnMut(
        &super::framework::Session,
        &super::framework::GangKey,
        &std::sync::Arc<super::framework::JobInfo>,
    ),
) {
    use super::framework::GangPhase;
    let mut invalid = Vec::new();
    for (key, job) in with_work(session, also) {
        if job.is_completed() {
            continue;
        }
        if let Err(reason) = session.job_valid(job) {
            // As Volcano's job status: a job that cannot be scheduled yet keeps
            // the Inqueue its admission gave it (a Volcano Job's controller creates
            // the pods only once its PodGroup reads Inqueue).
            let phase = if job.is_ready() && !job.group_missing {
                GangPhase::Running
            } else if job.inqueue && !job.group_missing {
                GangPhase::Inqueue
            } else {
                GangPhase::Pending
            };
            invalid.push((key.clone(), phase, reason));
            continue;
        }
        visit(session, key, job);
    }
    for (key, phase, reason) in invalid {
        // A job enqueue refused keeps that reason: admission is what it waits
        // for first.
        if phase != GangPhase::Pending || !session.has_note(&key) {
            session.note_job(&key, Some(phase), reason.reason, reason.message);
        }
    }
}

/// Every queue's jobs sorted in job order.
pub(crate) fn in_job_order(
    session: &super::framework::Session,
    mut by_queue: std::collections::BTreeMap<String, Vec<super::framework::GangKey>>,
) -> std::collections::BTreeMap<String, Vec<super::framework::GangKey>> {
    for jobs in by_queue.values_mut() {
        jobs.sort_by(|a, b| session.job_order(a, b));
    }
    by_queue
}

/// The jobs enqueue may admit, grouped by queue in job order: those passing
/// `keep`, within the session's scope, whose PodGroup and queue exist. Unlike the
/// other actions, enqueue does not ask whether enough pods exist: Volcano admits a
/// PodGroup before its pods are created (a Volcano Job's controller creates them
/// only once the PodGroup is Inqueue).
pub(crate) fn admittable_by_queue(
    session: &super::framework::Session,
    keep: impl Fn(&super::framework::JobInfo) -> bool,
) -> std::collections::BTreeMap<String, Vec<super::framework::GangKey>> {
    let state = &session.state;
    let mut by_queue: std::collections::BTreeMap<String, Vec<super::framework::GangKey>> =
        Default::default();
    // A settled job is admitted already.
    for (key, job) in with_work(session, None) {
        if !job.is_completed()
            && !job.group_missing
            && state.queue(&job.queue).is_some()
            && keep(job)
        {
            by_queue
                .entry(job.queue.clone())
                .or_default()
                .push(key.clone());
        }
    }
    in_job_order(session, by_queue)
}

/// Ends a statement that made room for job `key`: commits it (and says where the
/// job's tasks wait) when the job is now pipelined and keeps its network-topology
/// constraint, discards it otherwise. Whether it was committed.
pub(crate) fn commit_if_pipelined(
    session: &mut super::framework::Session,
    key: &super::framework::GangKey,
    statement: super::framework::Statement,
    pipelined: &[(String, usize)],
) -> bool {
    if !statement.is_empty()
        && session.job_pipelined(key)
        && allocate_in_topology::keeps_constraint(session, key)
    {
        statement.commit(session);
        note_pipelined(session, key, pipelined);
        true
    } else {
        statement.discard(session);
        false
    }
}

/// Says where a job's pipelined tasks wait and for how many evictions.
pub(crate) fn note_pipelined(
    session: &mut super::framework::Session,
    key: &super::framework::GangKey,
    pipelined: &[(String, usize)],
) {
    if pipelined.is_empty() {
        session.clear_note(key);
        return;
    }
    let victims: usize = pipelined.iter().map(|(_, v)| *v).sum();
    let mut nodes: Vec<&str> = pipelined.iter().map(|(n, _)| n.as_str()).collect();
    nodes.dedup();
    // Room freed by pods evicted for another job (or earlier) counts no victims
    // of this job's own.
    let waiting_for = match victims {
        0 => "pods already being evicted".to_string(),
        n => format!("{n} evicted pods"),
    };
    session.note_job(
        key,
        None,
        "Pipelined",
        format!(
            "{} tasks pipelined onto {} node(s); waiting for {waiting_for} to leave",
            pipelined.len(),
            nodes.len()
        ),
    );
}

/// The first queue in queue order that still has jobs (and, for allocation, is not
/// overused), with its next job taken off.
pub(crate) fn next_job(
    session: &super::framework::Session,
    waiting: &mut std::collections::BTreeMap<String, Vec<super::framework::GangKey>>,
    skip_overused: bool,
) -> Option<super::framework::GangKey> {
    let queue = session.first_queue(|q| {
        waiting.get(q).is_some_and(|j| !j.is_empty()) && !(skip_overused && session.overused(q))
    })?;
    let jobs = waiting.get_mut(&queue)?;
    (!jobs.is_empty()).then(|| jobs.remove(0))
}
