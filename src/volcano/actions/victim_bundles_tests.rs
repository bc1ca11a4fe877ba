//! Volcano's `pkg/scheduler/actions/utils/bundle_test.go`, case by case: how a
//! victim job's candidates split into safe and whole bundles, what the plugins'
//! answer keeps of them, and the order they are offered in.
//!
//! Left out:
//! - The four `TestCreateJobBundles_*SubJob*` / `_JobNotReadyShortCircuitsAllSafe`
//!   cases with sub-jobs: sub-jobs (`subGroupPolicy`) are not modelled here; the
//!   short circuit itself (a job not ready has only a safe bundle) is
//!   [`job_not_ready_short_circuits_all_safe`] without them.
//! - `TestSelectBundles_RespectsAllowWhole`: `SelectBundles` is called by no
//!   action; `allowWholeBundle` is tested through the actions
//!   (`volcano_tables::gang_preempt`).

use super::victim_bundles::{Bundle, BundleKind, flatten, job_bundles, keep_allowed, sort_bundles};
use crate::resources::Resources;
use crate::volcano::framework::testing::{gang_key, job, task};
use crate::volcano::framework::{JobInfo, TaskInfo, TaskStatus};
use std::cmp::Ordering;

fn cpu(milli: i64) -> Resources {
    Resources::from_milli([("cpu", milli)])
}

/// A running worker of 1 CPU named `name` with this priority.
fn worker(name: &str, priority: i32) -> TaskInfo {
    let mut t = task(&gang_key("victim"), name, cpu(1000));
    t.status = TaskStatus::Running;
    t.role = Some("worker".into());
    t.priority = priority;
    t
}

/// A job of minMember `min` with running workers a, b, c, … of priority 0, 1, ….
fn workers(min: usize, n: usize) -> JobInfo {
    let tasks = (0..n)
        .map(|i| worker(&((b'a' + i as u8) as char).to_string(), i as i32))
        .collect();
    job("victim", "q", min, tasks)
}

fn names(tasks: &[&TaskInfo]) -> Vec<String> {
    tasks.iter().map(|t| t.name.clone()).collect()
}

fn bundles_of(j: &JobInfo) -> Vec<Bundle<'_>> {
    job_bundles(j, j.tasks.iter().collect(), |_| true, |_| true)
}

#[test]
fn create_job_bundles_safe_and_whole() {
    let mut j = workers(3, 5);
    j.min_roles.insert("worker".into(), 3);
    let b = bundles_of(&j);
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].kind, names(&b[0].tasks)),
        (BundleKind::Safe, vec!["a".into(), "b".into()])
    );
    assert_eq!(b[1].kind, BundleKind::Whole);
    assert_eq!(b[1].tasks.len(), 3);
    // Breaking the job takes the safe ones along, unless evicted already.
    assert_eq!(names(&b[1].along), ["a", "b"]);
}

#[test]
fn create_job_bundles_no_task_min_available_treats_all_roles_as_unconstrained() {
    let j = workers(2, 4);
    let b = bundles_of(&j);
    assert_eq!(b.len(), 2);
    assert_eq!((b[0].kind, b[0].tasks.len()), (BundleKind::Safe, 2));
    assert_eq!((b[1].kind, b[1].tasks.len()), (BundleKind::Whole, 2));
}

#[test]
fn job_not_ready_short_circuits_all_safe() {
    let j = workers(10, 2);
    let b = bundles_of(&j);
    assert_eq!(b.len(), 1);
    assert_eq!((b[0].kind, b[0].tasks.len()), (BundleKind::Safe, 2));
}

#[test]
fn a_member_that_may_not_go_keeps_the_job_from_going_whole() {
    let j = workers(1, 1);
    let b = job_bundles(&j, j.tasks.iter().collect(), |_| true, |t| t.name != "a");
    assert!(b.is_empty(), "{b:?}");
}

/// A bundle by hand: `kind`, job `of`, tasks, freeing `local` and costing
/// `global` CPUs (milli).
fn bundle<'s>(
    kind: BundleKind,
    of: &'s JobInfo,
    tasks: Vec<&'s TaskInfo>,
    local: i64,
    global: i64,
) -> Bundle<'s> {
    Bundle {
        kind,
        job: of,
        tasks,
        along: Vec::new(),
        local: cpu(local),
        global: if global == 0 {
            Resources::default()
        } else {
            cpu(global)
        },
    }
}

#[test]
fn apply_allowed_tasks_whole_atomic_and_safe_shrink() {
    let (t1, t2, t3) = (worker("t1", 0), worker("t2", 0), worker("t3", 0));
    let j = workers(1, 0);
    let bundles = vec![
        bundle(BundleKind::Safe, &j, vec![&t1, &t2], 2000, 0),
        bundle(BundleKind::Whole, &j, vec![&t3], 1000, 3000),
    ];
    let valid = keep_allowed(bundles, &["uid-t1".into(), "uid-t3x".into()], |_| true);
    assert_eq!(valid.len(), 1);
    assert_eq!(
        (valid[0].kind, names(&valid[0].tasks)),
        (BundleKind::Safe, vec!["t1".into()])
    );
    assert_eq!(valid[0].local, cpu(1000));
}

fn named_job(name: &str, queue: &str, priority: i32) -> JobInfo {
    let mut j = job(name, queue, 1, Vec::new());
    j.priority = priority;
    j
}

fn first_names(bundles: &[Bundle<'_>]) -> Vec<String> {
    bundles.iter().map(|b| b.tasks[0].name.clone()).collect()
}

#[test]
fn sort_bundles_for_preempt_type_priority_and_roi() {
    let (low, high) = (named_job("low", "q", 1), named_job("high", "q", 10));
    let (s1, w1, w2) = (worker("s1", 0), worker("w1", 0), worker("w2", 0));
    let mut bundles = vec![
        bundle(BundleKind::Whole, &low, vec![&w1], 1000, 4000),
        bundle(BundleKind::Safe, &high, vec![&s1], 1000, 0),
        bundle(BundleKind::Whole, &low, vec![&w2], 1000, 2000),
    ];
    sort_bundles(&mut bundles, &cpu(1000), |a, b| a.priority.cmp(&b.priority));
    assert_eq!(first_names(&bundles), ["s1", "w2", "w1"]);
}

#[test]
fn sort_bundles_for_reclaim_uses_queue_order_then_roi() {
    let (ja, jb) = (named_job("ja", "qa", 0), named_job("jb", "qb", 0));
    let (a, b) = (worker("a", 0), worker("b", 0));
    let mut bundles = vec![
        bundle(BundleKind::Whole, &jb, vec![&b], 1000, 2000),
        bundle(BundleKind::Whole, &ja, vec![&a], 1000, 4000),
    ];
    sort_bundles(&mut bundles, &cpu(1000), |l, r| l.queue.cmp(&r.queue));
    assert_eq!(first_names(&bundles)[0], "a");
    // With no queue order, the worthier bundle first.
    let (jc, jd) = (named_job("jc", "qc", 0), named_job("jd", "qd", 0));
    let (c, d) = (worker("c", 0), worker("d", 0));
    let mut bundles = vec![
        bundle(BundleKind::Whole, &jc, vec![&c], 1000, 4000),
        bundle(BundleKind::Whole, &jd, vec![&d], 1000, 2000),
    ];
    sort_bundles(&mut bundles, &cpu(1000), |_, _| Ordering::Equal);
    assert_eq!(first_names(&bundles)[0], "d");
}

#[test]
fn sort_bundles_for_preempt_uses_victim_job_order() {
    let (ja, jb) = (named_job("ja", "q", 0), named_job("jb", "q", 0));
    let (a, b) = (worker("a", 0), worker("b", 0));
    let mut bundles = vec![
        bundle(BundleKind::Whole, &ja, vec![&a], 1000, 2000),
        bundle(BundleKind::Whole, &jb, vec![&b], 1000, 2000),
    ];
    sort_bundles(&mut bundles, &cpu(1000), |l, r| r.key.cmp(&l.key));
    assert_eq!(first_names(&bundles)[0], "b");
}

#[test]
fn sort_bundles_for_reclaim_deterministic_tie_breaker() {
    let (ja, jb) = (named_job("ja", "q", 0), named_job("jb", "q", 0));
    let (a, b) = (worker("a", 0), worker("b", 0));
    let mut bundles = vec![
        bundle(BundleKind::Whole, &jb, vec![&b], 1000, 2000),
        bundle(BundleKind::Whole, &ja, vec![&a], 1000, 2000),
    ];
    sort_bundles(&mut bundles, &cpu(1000), |_, _| Ordering::Equal);
    assert_eq!(first_names(&bundles), ["a", "b"]);
    assert_eq!(names(&flatten(&bundles)), ["a", "b"]);
}
