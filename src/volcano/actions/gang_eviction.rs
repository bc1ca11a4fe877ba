//! What `gangpreempt` and `gangreclaim` share: for each starving gang, evict
//! whole victim bundles until its waiting tasks all fit inside one domain, or
//! nothing at all.
//!
//! Queues in queue order (`gangreclaim` skips overused ones), in each the
//! starving jobs (admitted, valid) in job order. For a job, its waiting tasks
//! (those asking for something; best-effort ones are backfill's) are what it
//! needs. In each candidate domain ([`super::eviction_domains`]) the running
//! tasks the action may take (its rules: which jobs, in which order) are split
//! into victim bundles ([`super::victim_bundles`]); the plugins say which may go
//! (Volcano's unified evictable hook); PodDisruptionBudgets drop the bundles they
//! forbid. A domain that could not hold the waiting tasks even with all of them
//! gone is passed over ([`super::domain_room`]). Bundles are then added one after
//! another, each time the plan is tried ([`super::nomination_plan`]): the first
//! that places every waiting task and gives the job its minimum is kept, and the
//! job's evictions commit. A job no domain works for evicts nothing.
//!
//! A job with a waiting task of `preemptionPolicy: Never` evicts nobody, as in
//! the other eviction actions (Volcano's gang actions do not read the policy;
//! Kubernetes promises such a pod never preempts).

use super::domain_room::could_hold;
use super::eviction_domains::{Domain, candidate_domains};
use super::gang_eviction_arguments::GangEvictionArguments;
use super::nomination_plan::{Plan, plan_in_domain};
use super::victim_bundles::{BundleKind, flatten, job_bundles, keep_allowed, sort_bundles};
use super::{commit_if_pipelined, jobs_by_queue};
use crate::resources::Resources;
use crate::volcano::framework::gang_eviction::{GangEviction, GangEvictionKind};
use crate::volcano::framework::victims::{Budgets, evictable};
use crate::volcano::framework::{
    Action, EvictAction, GangKey, GangPhase, JobInfo, Session, TaskInfo,
};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// A gang eviction action: its rules and its arguments from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct GangEvictionAction<R> {
    rules: R,
    args: GangEvictionArguments,
}

impl<R> GangEvictionAction<R> {
    /// The action of these rules with these arguments.
    pub fn with(rules: R, args: GangEvictionArguments) -> Self {
        Self { rules, args }
    }
}

impl<R: GangEvictionRules + std::fmt::Debug + Send + Sync> Action for GangEvictionAction<R> {
    fn name(&self) -> &'static str {
        self.rules.name()
    }

    fn execute(&self, session: &mut Session) {
        run(session, &self.rules, self.args);
    }
}

/// What tells `gangpreempt` and `gangreclaim` apart.
pub trait GangEvictionRules {
    /// The action's name in the configuration.
    fn name(&self) -> &'static str;

    /// Which action this is.
    fn kind(&self) -> GangEvictionKind;

    /// Whether the queue's starving jobs are served at all.
    fn serves_queue(&self, session: &Session, queue: &str) -> bool;

    /// Whether the job may evict for its waiting tasks at all (`Err`: why not).
    fn may_evict_for(
        &self,
        session: &Session,
        job: &JobInfo,
        pending: &[&TaskInfo],
    ) -> Result<(), String>;

    /// Whether tasks of `victim` may be taken for `preemptor`.
    fn takes_from(&self, session: &Session, preemptor: &JobInfo, victim: &JobInfo) -> bool;

    /// Which victim job's bundle goes first (`Less`: `a`'s), before their worth.
    fn victim_first(
        &self,
        session: &Session,
        preemptor: &JobInfo,
        a: &JobInfo,
        b: &JobInfo,
    ) -> Ordering;
}

/// Runs one gang eviction action over the session.
fn run(session: &mut Session, rules: &dyn GangEvictionRules, args: GangEvictionArguments) {
    let waiting = jobs_by_queue(session, |job| job.inqueue);
    for queue in session.ordered_queues() {
        if !rules.serves_queue(session, &queue) {
            continue;
        }
        for key in waiting.get(&queue).into_iter().flatten() {
            if !session.job_starving(key) {
                continue;
            }
            let mut effort = SearchEffort::default();
            let found = evict_for(session, rules, args, key, &mut effort);
            tracing::debug!(
                action = rules.name(),
                job = %key,
                trials = effort.trials,
                domains_without_room = effort.domains_without_room,
                "searched for room"
            );
            match found {
                Ok(Some(plan)) => {
                    commit_if_pipelined(session, key, plan.statement, &plan.pipelined);
                }
                Ok(None) => {}
                Err(why) => {
                    if !session.has_note(key) {
                        session.note_job(key, Some(GangPhase::Inqueue), "NotEnoughResources", why);
                    }
                }
            }
        }
    }
}

/// How much work the search for one job's plan took.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct SearchEffort {
    /// Nomination plans tried.
    pub trials: usize,
    /// Domains passed over without a trial: they could not hold the waiting
    /// tasks even with every victim there gone.
    pub domains_without_room: usize,
}

/// Whether a domain could hold the waiting tasks with every victim there gone
/// ([`could_hold`]); a parameter so that tests can compare with no check at all.
pub(super) type RoomCheck =
    fn(&Session, &GangKey, &[String], &Domain, &[(GangKey, String)]) -> bool;

/// The first plan that works for the job, applied to the session (its
/// statement not yet committed); `Ok(None)` when it has nothing to place.
fn evict_for(
    session: &mut Session,
    rules: &dyn GangEvictionRules,
    args: GangEvictionArguments,
    key: &GangKey,
    effort: &mut SearchEffort,
) -> Result<Option<Plan>, String> {
    evict_for_checking_room(session, rules, args, key, effort, could_hold)
}

/// [`evict_for`], passing over the domains `room` says cannot hold the job.
pub(super) fn evict_for_checking_room(
    session: &mut Session,
    rules: &dyn GangEvictionRules,
    args: GangEvictionArguments,
    key: &GangKey,
    effort: &mut SearchEffort,
    room: RoomCheck,
) -> Result<Option<Plan>, String> {
    let Some(job) = session.state.job(key) else {
        return Ok(None);
    };
    let mut pending: Vec<&TaskInfo> = Vec::new();
    for uid in session.ordered_tasks(key) {
        if let Some(t) = job.tasks.iter().find(|t| t.uid == uid)
            && t.is_pending()
            && session.state.plannable(t)
            && !t.is_best_effort()
        {
            pending.push(t);
        }
    }
    if pending.is_empty() || pending.iter().any(|t| t.never_preempts) {
        return Ok(None);
    }
    rules.may_evict_for(session, job, &pending)?;
    let mut need = Resources::default();
    for t in &pending {
        need.add(&t.resreq);
    }
    let mut need_task = pending[0].clone();
    need_task.resreq = need.clone();
    let pending: Vec<String> = pending.iter().map(|t| t.uid.clone()).collect();
    let action = match rules.kind() {
        GangEvictionKind::Preempt => EvictAction::GangPreempt,
        GangEvictionKind::Reclaim => EvictAction::GangReclaim,
    };
    let reason = format!(
        "{} for gang {}/{} of queue {:?}",
        action.verb(),
        key.namespace,
        key.name,
        job.queue
    );
    let mut why = "no running task may make room for it".to_string();
    for domain in candidate_domains(session, key, args.max_domains) {
        let bundles = domain_bundles(session, rules, args, key, &need_task, &domain);
        if bundles.is_empty() {
            continue;
        }
        let every_victim: Vec<(GangKey, String)> = bundles.iter().flatten().cloned().collect();
        if !room(session, key, &pending, &domain, &every_victim) {
            effort.domains_without_room += 1;
            why = format!(
                "its waiting tasks do not fit in {} even with every victim there gone",
                domain.name
            );
            continue;
        }
        let mut victims: Vec<(GangKey, String)> = Vec::new();
        for bundle in bundles {
            victims.extend(bundle);
            effort.trials += 1;
            match plan_in_domain(session, key, &pending, &domain, &victims, action, &reason) {
                Ok(plan) => return Ok(Some(plan)),
                Err(e) => why = e,
            }
        }
    }
    Err(why)
}

/// The victim bundles of one domain in the order they are added, each as the
/// tasks it evicts: candidates by the action's rules, bundled, ordered, as the
/// plugins and PodDisruptionBudgets allow, whole bundles only if allowed.
fn domain_bundles(
    session: &Session,
    rules: &dyn GangEvictionRules,
    args: GangEvictionArguments,
    key: &GangKey,
    need_task: &TaskInfo,
    domain: &Domain,
) -> Vec<Vec<(GangKey, String)>> {
    let state = &session.state;
    let Some(preemptor) = state.job(key) else {
        return Vec::new();
    };
    let may_go = |t: &TaskInfo| evictable(session.tiers(), t, state.now);
    let in_domain = |t: &TaskInfo| t.placement.as_ref().is_some_and(|p| domain.holds(&p.node));
    let mut bundles = Vec::new();
    for victim in state.jobs.values() {
        if victim.key == *key
            || !victim.group_preemptable
            || !rules.takes_from(session, preemptor, victim)
        {
            continue;
        }
        let candidates: Vec<&TaskInfo> = victim
            .tasks
            .iter()
            .filter(|t| may_go(t) && in_domain(t))
            .collect();
        bundles.extend(job_bundles(victim, candidates, in_domain, may_go));
    }
    if bundles.is_empty() {
        return Vec::new();
    }
    let order = |a: &JobInfo, b: &JobInfo| rules.victim_first(session, preemptor, a, b);
    sort_bundles(&mut bundles, &need_task.resreq, order);
    let eviction = GangEviction {
        kind: rules.kind(),
        job: preemptor,
        need: need_task,
        domain: &domain.name,
    };
    let allowed = session
        .tiers()
        .gang_evictable(state, &eviction, &flatten(&bundles));
    if allowed.is_empty() {
        return Vec::new();
    }
    let mut bundles = keep_allowed(bundles, &allowed, in_domain);
    sort_bundles(&mut bundles, &need_task.resreq, order);
    let mut budgets = Budgets::new(state, session.evicted());
    let mut taken: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for b in &bundles {
        if !args.allow_whole_bundle && b.kind == BundleKind::Whole {
            continue;
        }
        let new: Vec<&TaskInfo> = b
            .evicts()
            .filter(|t| !taken.contains(t.uid.as_str()))
            .collect();
        if !budgets.take(&new) {
            continue;
        }
        taken.extend(new.iter().map(|t| t.uid.as_str()));
        out.push(new.iter().map(|t| (t.job.clone(), t.uid.clone())).collect());
    }
    out
}
