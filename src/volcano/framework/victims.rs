//! Choosing victims safely: which running tasks may be evicted at all, how a gang
//! is evicted (whole, unless it keeps its minimum without the victims), which
//! victims PodDisruptionBudgets let go, and in which order victims go (least
//! important first).
//!
//! These rules hold whatever the configuration lists: the `conformance`, `cdp` and
//! `pdb` plugins express the same rules for Volcano configurations, and switching
//! them off never exposes a pod the rules protect. Rules the plugins own reach
//! here as [`EvictionGuard`]s registered with the tiers.

use super::job::{GangKey, JobInfo, TaskInfo, TaskStatus};
use super::state::SessionState;
use super::tiers::Tiers;
use chrono::{DateTime, Utc};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// A plugin's rule on victims that holds whatever the configuration lists:
/// whether the scheduler may evict this task at all. The plugins register theirs
/// when the tiers are built (conformance: never `kube-system`, never the critical
/// priority classes).
pub type EvictionGuard = fn(&TaskInfo) -> bool;

/// Whether a task may be considered for eviction at all: it runs (bound to its
/// node) and is not being evicted already, its pod allows it
/// (`volcano.sh/preemptable`), every eviction guard of the tiers lets it go, and
/// it is past its cooldown.
pub fn evictable(tiers: &Tiers, task: &TaskInfo, now: DateTime<Utc>) -> bool {
    task.status == TaskStatus::Running
        && task.preemptable
        && tiers.guards_let_evict(task)
        && !in_cooldown(task, now)
}

/// Whether the task is within `volcano.sh/cooldown-time` of being bound. A task
/// with a cooldown whose bind time is unknown counts as protected: unknown must
/// not expose it.
pub fn in_cooldown(task: &TaskInfo, now: DateTime<Utc>) -> bool {
    let Some(cooldown) = task.cooldown else {
        return false;
    };
    match task.scheduled_at {
        None => true,
        Some(at) => chrono::Duration::from_std(cooldown).is_ok_and(|d| now < at + d),
    }
}

/// What PodDisruptionBudgets still let go, as victims are taken one after another.
#[derive(Debug, Clone)]
pub struct Budgets<'s> {
    state: &'s SessionState,
    left: Vec<i64>,
}

impl<'s> Budgets<'s> {
    /// The budgets' allowances less what this session evicts already.
    pub fn new(state: &'s SessionState, evicted: &BTreeSet<String>) -> Self {
        let left = state
            .budgets
            .iter()
            .map(|b| {
                let spent = state
                    .jobs
                    .values()
                    .flat_map(|j| &j.tasks)
                    .filter(|t| evicted.contains(&t.uid) && covers(b, t))
                    .count() as i64;
                i64::from(b.allowed) - spent
            })
            .collect();
        Self { state, left }
    }

    /// Takes `unit` if every budget covering its members lets all of them go.
    pub fn take(&mut self, unit: &[&TaskInfo]) -> bool {
        let mut need = vec![0i64; self.left.len()];
        for t in unit {
            for (i, b) in self.state.budgets.iter().enumerate() {
                if covers(b, t) {
                    need[i] += 1;
                }
            }
        }
        if need.iter().zip(&self.left).any(|(n, l)| n > l) {
            return false;
        }
        for (l, n) in self.left.iter_mut().zip(&need) {
            *l -= n;
        }
        true
    }
}

fn covers(budget: &crate::volcano::disruption_budget::DisruptionBudget, t: &TaskInfo) -> bool {
    let labels = t.pod.metadata.labels.clone().unwrap_or_default();
    budget.covers(&t.namespace, &labels)
}

/// What must go if `victim` goes, given what is taken already: the victim alone
/// while its job keeps its minimum, else every running member of its job not taken
/// yet, when every one of them is `allowed` and no member of the job holds GPUs
/// off a node; `None` when it cannot go safely.
pub fn take_with<'s>(
    state: &'s SessionState,
    allowed: &BTreeSet<&str>,
    taken: &BTreeSet<String>,
    victim: &'s TaskInfo,
) -> Option<Vec<&'s TaskInfo>> {
    let job = state.job(&victim.job)?;
    let mut gone: BTreeSet<&str> = job
        .tasks
        .iter()
        .filter(|t| taken.contains(&t.uid))
        .map(|t| t.uid.as_str())
        .collect();
    gone.insert(victim.uid.as_str());
    if goes_alone(job, &gone) {
        return Some(vec![victim]);
    }
    if holds_off_node(job) {
        return None;
    }
    let rest: Vec<&TaskInfo> = whole_gang(job)
        .into_iter()
        .filter(|t| !taken.contains(&t.uid))
        .collect();
    rest.iter()
        .all(|t| allowed.contains(t.uid.as_str()))
        .then_some(rest)
}

/// Whether the tasks in `gone` may leave their job without the rest of it: a
/// gang of one always, a job disrupted only whole never, any other while it
/// keeps its minimum without them.
fn goes_alone(job: &JobInfo, gone: &BTreeSet<&str>) -> bool {
    job.key.single || (!job.disrupted_whole && keeps_minimum(job, gone))
}

/// Tasks of a job that count toward its minimum.
fn standing(job: &JobInfo) -> impl Iterator<Item = &TaskInfo> {
    job.tasks.iter().filter(|t| {
        matches!(
            t.status,
            TaskStatus::Running | TaskStatus::Allocated | TaskStatus::Succeeded
        )
    })
}

/// Whether the job keeps its minimum without the tasks in `gone`.
pub fn keeps_minimum(job: &JobInfo, gone: &BTreeSet<&str>) -> bool {
    let mut ready = 0usize;
    let mut roles: BTreeMap<String, usize> = BTreeMap::new();
    for t in standing(job).filter(|t| !gone.contains(t.uid.as_str())) {
        ready += 1;
        *roles.entry(t.role.clone().unwrap_or_default()).or_default() += 1;
    }
    job.reaches_minimum(ready, &roles)
}

/// Whether some member of the job holds GPUs, or is promised them, without being
/// on a node yet (reserved and not bound, or pipelined). Such a member cannot be
/// evicted: taking the running members below the minimum would leave it to
/// start alone, a half-running gang. The job is no victim until it runs whole.
pub fn holds_off_node(job: &JobInfo) -> bool {
    job.tasks
        .iter()
        .any(|t| matches!(t.status, TaskStatus::Allocated | TaskStatus::Pipelined))
}

/// The running members of a job that would have to go with any one of them: all
/// of its running tasks when losing one takes it below its minimum.
pub fn whole_gang(job: &JobInfo) -> Vec<&TaskInfo> {
    job.tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Running)
        .collect()
}

/// Victims grouped into what must go together: per job, either each victim alone
/// (the job keeps its minimum without all of them) or all of the job's running
/// members as one unit. A job whose victims would break it without taking every
/// running member, or while members not yet on a node hold GPUs, is dropped
/// entirely: no half-running gang keeps GPUs.
pub fn gang_units<'s>(state: &'s SessionState, victims: &[String]) -> Vec<Vec<&'s TaskInfo>> {
    let chosen: BTreeSet<&str> = victims.iter().map(String::as_str).collect();
    let mut by_job: BTreeMap<&GangKey, Vec<&TaskInfo>> = BTreeMap::new();
    for job in state.jobs.values() {
        for t in &job.tasks {
            if chosen.contains(t.uid.as_str()) {
                by_job.entry(&job.key).or_default().push(t);
            }
        }
    }
    let mut units = Vec::new();
    for (key, tasks) in by_job {
        let Some(job) = state.job(key) else { continue };
        let gone: BTreeSet<&str> = tasks.iter().map(|t| t.uid.as_str()).collect();
        if goes_alone(job, &gone) {
            units.extend(tasks.into_iter().map(|t| vec![t]));
            continue;
        }
        let all = whole_gang(job);
        if !holds_off_node(job) && all.iter().all(|t| gone.contains(t.uid.as_str())) {
            units.push(all);
        }
    }
    units
}

/// Only the victims that are gang-safe (see [`gang_units`]), in candidate order.
pub fn gang_safe(state: &SessionState, candidates: &[String]) -> Vec<String> {
    let safe: BTreeSet<String> = gang_units(state, candidates)
        .into_iter()
        .flatten()
        .map(|t| t.uid.clone())
        .collect();
    candidates
        .iter()
        .filter(|c| safe.contains(*c))
        .cloned()
        .collect()
}

/// Adds to `candidates` the running members of every job that one of them would
/// take below its minimum, so that a plugin can judge the whole gang.
pub fn with_whole_gangs<'s>(
    tiers: &Tiers,
    state: &'s SessionState,
    candidates: Vec<&'s TaskInfo>,
) -> Vec<&'s TaskInfo> {
    let mut seen: BTreeSet<&str> = candidates.iter().map(|t| t.uid.as_str()).collect();
    let mut out = candidates.clone();
    for t in candidates {
        let Some(job) = state.job(&t.job) else {
            continue;
        };
        if goes_alone(job, &BTreeSet::from([t.uid.as_str()])) {
            continue;
        }
        for member in whole_gang(job) {
            if evictable(tiers, member, state.now) && seen.insert(member.uid.as_str()) {
                out.push(member);
            }
        }
    }
    out
}

/// Victim order: the least important first. A lower queue priority, then a lower
/// job priority, then a lower task priority, then the most recently started (the
/// least work lost), then the job and task that would be scheduled last (by
/// name, the reverse of the scheduling order's tie-break, as Volcano's victim
/// queue reverses its job and task order).
pub fn victim_order(state: &SessionState, a: &[&TaskInfo], b: &[&TaskInfo]) -> Ordering {
    victim_key(state, a).cmp(&victim_key(state, b))
}

/// How important a unit of victims is (see [`victim_order`]); larger is more
/// important: its [`Importance`], then the reverse of its scheduling order.
pub type VictimKey = (
    Importance,
    std::cmp::Reverse<(std::sync::Arc<str>, std::sync::Arc<str>, String)>,
);

/// What losing a unit of victims costs: queue, job and task priority, then how
/// recently it started. Units equal in it are told apart by name alone, which
/// says nothing of their cost.
pub type Importance = (i32, i32, i32, std::cmp::Reverse<Option<DateTime<Utc>>>);

/// The importance of a unit of victims.
pub fn victim_key(state: &SessionState, unit: &[&TaskInfo]) -> VictimKey {
    let first = unit.first();
    let job = first.and_then(|t| state.job(&t.job));
    let queue = job.and_then(|j| state.queue(&j.queue));
    (
        (
            queue.map_or(0, |q| q.spec.priority),
            job.map_or(0, |j| j.priority),
            unit.iter().map(|t| t.priority).max().unwrap_or(0),
            std::cmp::Reverse(unit.iter().filter_map(|t| t.scheduled_at).max()),
        ),
        std::cmp::Reverse(first.map_or_else(Default::default, |t| {
            (t.job.namespace.clone(), t.job.name.clone(), t.name.clone())
        })),
    )
}
