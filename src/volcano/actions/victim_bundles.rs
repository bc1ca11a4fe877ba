//! Victim bundles of the gang eviction actions (`gangpreempt`, `gangreclaim`):
//! a victim job's candidate tasks split into what may go without breaking the
//! job and what breaks it, and the order bundles are offered in.
//!
//! A **safe** bundle holds the tasks whose eviction leaves the job ready: the
//! lowest-priority ones, as many as the job has above its minMember, each role
//! kept at its minTaskMember (Volcano's gang readiness). A **whole** bundle holds
//! the rest: evicting any of them breaks the job, so it goes only whole. Volcano
//! evicts a whole bundle's tasks in the domain searched and leaves the job's
//! others running below its minimum; here a whole bundle takes the job's other
//! running members along (those outside the domain, and the safe ones), and is
//! dropped when one of them may not go, since no eviction may leave a gang
//! running below its minimum while others of it keep their GPUs.
//!
//! Bundles are offered safe ones first, then by the victim's job (preempt: the
//! job scheduled last first) or queue (reclaim: the plugins' victim queue order),
//! then by how much of the need a bundle frees for what it costs (freed in the
//! domain, capped at the need, over the whole job's request when the bundle
//! breaks it; a safe bundle costs nothing), then by job and first task.

use crate::resources::Resources;
use crate::volcano::framework::victims::{holds_off_node, whole_gang};
use crate::volcano::framework::{JobInfo, TaskInfo};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Whether a bundle leaves its job ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum BundleKind {
    /// Its tasks may go and the job stays ready.
    Safe,
    /// Evicting it breaks the job: all of its running members go together.
    Whole,
}

/// Tasks of one victim job offered together.
#[derive(Debug, Clone)]
pub(crate) struct Bundle<'s> {
    /// Safe or whole.
    pub kind: BundleKind,
    /// The victim job.
    pub job: &'s JobInfo,
    /// The tasks to evict: the lowest priority first.
    pub tasks: Vec<&'s TaskInfo>,
    /// The job's other running members, which go with a whole bundle unless
    /// evicted already (none for a safe bundle).
    pub along: Vec<&'s TaskInfo>,
    /// What its tasks (and those along) in the domain free.
    pub local: Resources,
    /// What evicting it costs: the whole job's request for a whole bundle,
    /// nothing for a safe one.
    pub global: Resources,
}

fn sum<'a>(tasks: impl IntoIterator<Item = &'a TaskInfo>) -> Resources {
    let mut r = Resources::default();
    for t in tasks {
        r.add(&t.resreq);
    }
    r
}

/// Splits a job's candidate tasks (those in the domain that may be evicted) into
/// a safe and a whole bundle (either may be absent). `in_domain` says which of
/// the whole bundle's tasks free room where it is sought; `may_go`, which of
/// the job's running members may be evicted at all (a whole bundle needs all).
pub(crate) fn job_bundles<'s>(
    job: &'s JobInfo,
    mut candidates: Vec<&'s TaskInfo>,
    in_domain: impl Fn(&TaskInfo) -> bool,
    may_go: impl Fn(&TaskInfo) -> bool,
) -> Vec<Bundle<'s>> {
    if candidates.is_empty() {
        return Vec::new();
    }
    candidates.sort_by(|a, b| a.priority.cmp(&b.priority).then_with(|| a.uid.cmp(&b.uid)));
    let ready = job.tasks.iter().filter(|t| t.status.is_ready()).count() as i64;
    let mut job_surplus = ready - job.min_member as i64;
    // A job that is not ready already loses nothing more.
    if job_surplus < 0 {
        return vec![Bundle {
            kind: BundleKind::Safe,
            job,
            local: sum(candidates.iter().copied()),
            tasks: candidates,
            along: Vec::new(),
            global: Resources::default(),
        }];
    }
    // A job disrupted only whole has no safe tasks.
    if job.disrupted_whole {
        job_surplus = 0;
    }
    // Role minimums hold only when minMember covers them (as the gang check
    // skips them otherwise).
    let role_sum: usize = job.min_roles.values().sum();
    let enforce_roles = job.min_member >= role_sum;
    let mut role_surplus: BTreeMap<&str, i64> = BTreeMap::new();
    if enforce_roles {
        for (role, min) in &job.min_roles {
            let ready_in_role = job
                .tasks
                .iter()
                .filter(|t| t.status.is_ready() && t.role.as_deref().unwrap_or("") == role)
                .count() as i64;
            role_surplus.insert(role.as_str(), ready_in_role - *min as i64);
        }
    }
    let mut safe = Vec::new();
    let mut whole = Vec::new();
    for t in candidates {
        let role = t.role.as_deref().unwrap_or("");
        let role_safe = role_surplus.get(role).is_none_or(|s| *s > 0);
        if job_surplus > 0 && role_safe {
            job_surplus -= 1;
            if let Some(s) = role_surplus.get_mut(role) {
                *s -= 1;
            }
            safe.push(t);
        } else {
            whole.push(t);
        }
    }
    let mut bundles = Vec::new();
    if !safe.is_empty() {
        bundles.push(Bundle {
            kind: BundleKind::Safe,
            job,
            local: sum(safe.iter().copied()),
            tasks: safe,
            along: Vec::new(),
            global: Resources::default(),
        });
    }
    if !whole.is_empty()
        && let Some(bundle) = whole_bundle(job, &whole, in_domain, may_go)
    {
        bundles.push(bundle);
    }
    bundles
}

/// The whole bundle of a job whose `breaking` candidates would take it below its
/// minimum: every running member, unless one of them may not go, or a member
/// not yet on a node holds resources (it would be left to start alone).
fn whole_bundle<'s>(
    job: &'s JobInfo,
    breaking: &[&'s TaskInfo],
    in_domain: impl Fn(&TaskInfo) -> bool,
    may_go: impl Fn(&TaskInfo) -> bool,
) -> Option<Bundle<'s>> {
    if holds_off_node(job) || !whole_gang(job).into_iter().all(may_go) {
        return None;
    }
    let along: Vec<&TaskInfo> = whole_gang(job)
        .into_iter()
        .filter(|m| !breaking.iter().any(|t| t.uid == m.uid))
        .collect();
    Some(Bundle {
        kind: BundleKind::Whole,
        job,
        local: sum(breaking
            .iter()
            .chain(&along)
            .copied()
            .filter(|t| in_domain(t))),
        global: sum(job.tasks.iter()),
        tasks: breaking.to_vec(),
        along,
    })
}

impl<'s> Bundle<'s> {
    /// What evicting the bundle evicts: its tasks, then those along.
    pub fn evicts(&self) -> impl Iterator<Item = &'s TaskInfo> + '_ {
        self.tasks.iter().chain(&self.along).copied()
    }
}

/// What the bundles evict, in bundle order, each task once.
pub(crate) fn flatten<'s>(bundles: &[Bundle<'s>]) -> Vec<&'s TaskInfo> {
    let mut seen = std::collections::BTreeSet::new();
    bundles
        .iter()
        .flat_map(Bundle::evicts)
        .filter(|t| seen.insert(t.uid.as_str()))
        .collect()
}

/// Keeps of each bundle what the plugins allow: a safe bundle shrinks to its
/// allowed tasks, a whole bundle stays only if every task is allowed.
pub(crate) fn keep_allowed<'s>(
    bundles: Vec<Bundle<'s>>,
    allowed: &[String],
    in_domain: impl Fn(&TaskInfo) -> bool,
) -> Vec<Bundle<'s>> {
    let ok = |t: &TaskInfo| allowed.contains(&t.uid);
    bundles
        .into_iter()
        .filter_map(|mut b| match b.kind {
            BundleKind::Whole => {
                let whole = b.evicts().all(&ok);
                whole.then_some(b)
            }
            BundleKind::Safe => {
                b.tasks.retain(|t| ok(t));
                b.local = sum(b.tasks.iter().copied().filter(|t| in_domain(t)));
                (!b.tasks.is_empty()).then_some(b)
            }
        })
        .collect()
}

/// How much of `need` the bundle frees for what it costs (a safe bundle costs
/// nothing: infinitely worth it).
fn worth(b: &Bundle<'_>, need: &Resources) -> f64 {
    let score = |r: &Resources, cap: bool| -> f64 {
        need.iter()
            .filter(|(_, n)| *n > 0)
            .map(|(dim, n)| {
                let v = r.get(dim);
                let v = if cap { v.min(n) } else { v };
                v as f64 / n as f64
            })
            .sum()
    };
    let global = score(&b.global, false);
    if global == 0.0 {
        return f64::INFINITY;
    }
    score(&b.local, true) / global
}

/// Sorts bundles for offering: safe first, then `victim_first` on their jobs
/// (`Less`: the left one's job goes first; `Equal`: no opinion), then worth,
/// then job and first task.
pub(crate) fn sort_bundles(
    bundles: &mut [Bundle<'_>],
    need: &Resources,
    victim_first: impl Fn(&JobInfo, &JobInfo) -> Ordering,
) {
    bundles.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then_with(|| {
                if a.job.key == b.job.key {
                    Ordering::Equal
                } else {
                    victim_first(a.job, b.job)
                }
            })
            .then_with(|| worth(b, need).total_cmp(&worth(a, need)))
            .then_with(|| a.job.key.cmp(&b.job.key))
            .then_with(|| first_uid(a).cmp(first_uid(b)))
            .then_with(|| a.tasks.len().cmp(&b.tasks.len()))
    });
}

fn first_uid<'a>(b: &'a Bundle<'_>) -> &'a str {
    b.tasks.first().map_or("", |t| t.uid.as_str())
}
