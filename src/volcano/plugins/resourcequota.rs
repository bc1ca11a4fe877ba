//! resourcequota: a job is admitted only when its minimum fits every
//! ResourceQuota of its namespace, so a gang does not start pods the API server
//! would refuse or that the namespace cannot hold with the jobs admitted before it.
//!
//! For each quota, on each name the job's minimum counts under and the quota
//! limits (see `volcano::quota_usage`), the namespace's projected usage must stay
//! within `hard`:
//!
//! ```text
//!   used − what the namespace's waiting members count
//!        + what admitted, not yet running jobs still need of their minimum
//!        + the job's minimum                                      ≤ hard
//! ```
//!
//! Kubernetes counts a pod from its creation, and a gang's members are created
//! (gated) before admission, so `used` already holds every waiting member;
//! counting a job's minimum on top of them would count it twice and refuse a job
//! that fits exactly (Volcano's plugin does that, volcano-sh/volcano#4220). The
//! waiting members are therefore taken out and each job counted once: by its
//! placed pods in `used`, by what its minimum still needs once admitted, by its
//! minimum when asked about. Jobs admitted earlier in the same session count the
//! same way as those admitted in earlier sessions.
//!
//! As in Volcano, a job with no stated minimum is admitted (a gang of one states
//! its pod), a job that fits is *permitted* (so tiers below are not asked;
//! configure it in the same tier as `overcommit` or `proportion`), and quotas with
//! scopes are not checked here (they apply to some pods only; the API server still
//! enforces them when pods are created).

use crate::resources::{Resources, format_amount};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::{Plugin, Vote};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{JobInfo, Rejection, SessionState, TaskStatus};
use crate::volcano::quota_usage::{base_name, counted_for_pods, of_minimum, of_pod};
use std::collections::BTreeMap;

/// The resourcequota plugin.
#[derive(Debug, Default)]
pub struct ResourceQuotaPlugin {
    /// Per namespace with quotas: what its waiting members count in `used`.
    waiting: BTreeMap<String, Resources>,
    /// Per namespace with quotas: what its admitted, not yet running jobs still
    /// need of their minimum.
    reserved: BTreeMap<String, Resources>,
}

/// Builds the plugin (it takes no arguments).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(ResourceQuotaPlugin::default())))
}

/// What the job's minimum counts against quotas: its PodGroup's `minResources`
/// for `minMember` pods, or for a gang of one its pod; `None` for a PodGroup that
/// states no minimum.
fn demand(job: &JobInfo) -> Option<Resources> {
    if job.key.single {
        let mut usage = Resources::default();
        for t in job.tasks.iter().take(job.min_member.max(1)) {
            usage.add(&of_pod(&t.pod));
        }
        return Some(usage);
    }
    job.min_resources
        .as_ref()
        .map(|min| of_minimum(min, job.min_member))
}

/// What the job's minimum still needs beyond the members it has placed (those
/// count in `used` already); nothing once it holds its minimum.
fn still_needed(job: &JobInfo) -> Resources {
    if job.is_ready() {
        return Resources::default();
    }
    let Some(demand) = demand(job) else {
        return Resources::default();
    };
    let mut placed = Resources::default();
    for t in job.tasks.iter().filter(|t| t.holds_resources()) {
        placed.add(&of_pod(&t.pod));
    }
    demand.minus(&placed).without_zeros()
}

impl Plugin for ResourceQuotaPlugin {
    fn name(&self) -> &'static str {
        "resourcequota"
    }

    fn open(&mut self, state: &SessionState) {
        self.waiting.clear();
        self.reserved.clear();
        for job in state.jobs.values() {
            let namespace: &str = &job.key.namespace;
            if !state.resource_quotas.contains_key(namespace) {
                continue;
            }
            let waiting = self.waiting.entry(namespace.to_owned()).or_default();
            for t in job.tasks.iter().filter(|t| t.status == TaskStatus::Pending) {
                waiting.add(&of_pod(&t.pod));
            }
            if job.inqueue {
                self.reserved
                    .entry(namespace.to_owned())
                    .or_default()
                    .add(&still_needed(job));
            }
        }
    }

    fn job_enqueueable(&self, state: &SessionState, job: &JobInfo) -> Vote {
        let Some(demand) = demand(job) else {
            return Vote::Permit;
        };
        let namespace: &str = &job.key.namespace;
        let none = Resources::default();
        let waiting = self.waiting.get(namespace).unwrap_or(&none);
        let reserved = self.reserved.get(namespace).unwrap_or(&none);
        let quotas = state.resource_quotas.get(namespace).into_iter().flatten();
        for quota in quotas.filter(|q| !q.scoped) {
            for (dim, hard) in quota.hard.iter() {
                if !counted_for_pods(dim) || !demand.contains(dim) {
                    continue;
                }
                let projected = (quota.used.get(dim) - waiting.get(dim))
                    .max(0)
                    .saturating_add(reserved.get(dim))
                    .saturating_add(demand.get(dim));
                if projected > hard {
                    let unit = base_name(dim);
                    return Vote::Reject(Rejection {
                        plugin: "resourcequota",
                        queue: job.queue.clone(),
                        dimension: dim.to_string(),
                        message: format!(
                            "namespace {namespace:?}: resourcequota {:?}: {dim} would be {} > hard {}",
                            quota.name,
                            format_amount(unit, projected),
                            format_amount(unit, hard)
                        ),
                    });
                }
            }
        }
        Vote::Permit
    }

    fn job_enqueued(&mut self, state: &SessionState, job: &JobInfo) {
        let namespace: &str = &job.key.namespace;
        if state.resource_quotas.contains_key(namespace) {
            self.reserved
                .entry(namespace.to_owned())
                .or_default()
                .add(&still_needed(job));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::testing::{job, state, task};
    use crate::volcano::framework::{GangKey, QueueInfo, TaskInfo};
    use crate::volcano::objects::QueueSpec;
    use crate::volcano::resource_quota::NamespaceQuota;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;
    use std::sync::Arc;

    fn gpu_quota(hard: i64, used: i64) -> NamespaceQuota {
        NamespaceQuota {
            namespace: "ns".into(),
            name: "gpu-quota".into(),
            hard: Resources::from_units([("requests.nvidia.com/gpu", hard)]),
            used: Resources::from_units([("requests.nvidia.com/gpu", used)]),
            scoped: false,
        }
    }

    /// A member asking for `gpus` whole GPUs, as its pod says.
    fn member(name: &str, gpus: i64, status: TaskStatus) -> TaskInfo {
        let key = GangKey {
            namespace: "ns".into(),
            name: "x".into(),
            single: false,
        };
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
        }))
        .unwrap();
        let mut t = task(
            &key,
            name,
            Resources::from_units([("nvidia.com/gpu", gpus)]),
        );
        t.status = status;
        t.pod = Arc::new(pod);
        t
    }

    /// A gang of `n` members of one GPU each, stating minResources of `n` GPUs.
    fn gang(name: &str, n: usize, status: TaskStatus, inqueue: bool) -> JobInfo {
        let tasks = (0..n)
            .map(|i| member(&format!("{name}-{i}"), 1, status))
            .collect();
        let mut j = job(name, "default", n, tasks);
        j.min_resources = Some(Resources::from_units([("nvidia.com/gpu", n as i64)]));
        j.inqueue = inqueue;
        j
    }

    fn opened(
        jobs: Vec<JobInfo>,
        quotas: Vec<NamespaceQuota>,
    ) -> (ResourceQuotaPlugin, SessionState) {
        let mut st = state(
            Resources::default(),
            vec![QueueInfo::idle(QueueSpec::new("default"))],
            jobs,
        );
        st.resource_quotas.insert("ns".into(), quotas);
        let mut plugin = ResourceQuotaPlugin::default();
        plugin.open(&st);
        (plugin, st)
    }

    fn ask(plugin: &ResourceQuotaPlugin, st: &SessionState, name: &str) -> Vote {
        let key = GangKey {
            namespace: "ns".into(),
            name: name.into(),
            single: false,
        };
        plugin.job_enqueueable(st, &st.jobs[&key])
    }

    fn rejection(vote: Vote) -> String {
        match vote {
            Vote::Reject(r) => r.message,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn a_gang_whose_members_already_count_in_used_is_not_counted_twice() {
        // Kubernetes counts the four gated members: used 4 of 4. The gang needs
        // exactly those four GPUs.
        let (plugin, st) = opened(
            vec![gang("a", 4, TaskStatus::Pending, false)],
            vec![gpu_quota(4, 4)],
        );
        assert_eq!(ask(&plugin, &st, "a"), Vote::Permit);
    }

    #[test]
    fn a_gang_over_its_namespace_quota_waits_with_the_quota_and_dimension() {
        // Four GPUs run in the namespace and the gang's four gated members are
        // counted too (used 8): the gang would bring the namespace to 8 > 6.
        let running = gang("running", 4, TaskStatus::Running, true);
        let (plugin, st) = opened(
            vec![running, gang("a", 4, TaskStatus::Pending, false)],
            vec![gpu_quota(6, 8)],
        );
        assert_eq!(
            rejection(ask(&plugin, &st, "a")),
            "namespace \"ns\": resourcequota \"gpu-quota\": requests.nvidia.com/gpu would be 8 > hard 6"
        );
        let jobs = st
            .jobs
            .values()
            .map(|job| crate::volcano::framework::JobInfo::clone(job))
            .collect();
        let (plugin, st) = opened(jobs, vec![gpu_quota(8, 8)]);
        assert_eq!(ask(&plugin, &st, "a"), Vote::Permit, "raised to 8, it fits");
    }

    #[test]
    fn jobs_admitted_but_not_running_count_their_minimum() {
        // Quota 6, nothing runs; b (4 GPUs) was admitted in an earlier session and
        // waits for nodes. a (4 GPUs) would bring the namespace to 8.
        let (plugin, st) = opened(
            vec![
                gang("a", 4, TaskStatus::Pending, false),
                gang("b", 4, TaskStatus::Pending, true),
            ],
            vec![gpu_quota(6, 8)],
        );
        assert_eq!(
            rejection(ask(&plugin, &st, "a")),
            "namespace \"ns\": resourcequota \"gpu-quota\": requests.nvidia.com/gpu would be 8 > hard 6"
        );
    }

    #[test]
    fn a_job_admitted_in_this_session_counts_for_the_next() {
        // Quota 6, nothing runs: a fits alone, and so does b, but not both.
        let (mut plugin, mut st) = opened(
            vec![
                gang("a", 4, TaskStatus::Pending, false),
                gang("b", 2, TaskStatus::Pending, false),
                gang("c", 2, TaskStatus::Pending, false),
            ],
            vec![gpu_quota(6, 8)],
        );
        assert_eq!(ask(&plugin, &st, "a"), Vote::Permit);
        let a_key = st.jobs.keys().find(|k| &*k.name == "a").unwrap().clone();
        let a = std::sync::Arc::make_mut(st.jobs.get_mut(&a_key).unwrap());
        a.inqueue = true;
        let a = a.clone();
        plugin.job_enqueued(&st, &a);
        assert_eq!(ask(&plugin, &st, "b"), Vote::Permit, "4 + 2 = 6 fits");
        let b_key = st.jobs.keys().find(|k| &*k.name == "b").unwrap().clone();
        let b = std::sync::Arc::make_mut(st.jobs.get_mut(&b_key).unwrap());
        b.inqueue = true;
        let b = b.clone();
        plugin.job_enqueued(&st, &b);
        assert_eq!(
            rejection(ask(&plugin, &st, "c")),
            "namespace \"ns\": resourcequota \"gpu-quota\": requests.nvidia.com/gpu would be 8 > hard 6"
        );
    }

    #[test]
    fn an_admitted_job_counts_only_what_it_has_not_placed() {
        // b placed 3 of its 4 members (in used) and still needs one GPU.
        let mut b = gang("b", 4, TaskStatus::Pending, true);
        for t in b.tasks.iter_mut().take(3) {
            t.status = TaskStatus::Allocated;
        }
        let (plugin, st) = opened(
            vec![b, gang("a", 2, TaskStatus::Pending, false)],
            // used: b's 4 members and a's 2.
            vec![gpu_quota(6, 6)],
        );
        // 3 placed + 1 still needed + 2 = 6.
        assert_eq!(ask(&plugin, &st, "a"), Vote::Permit);
    }

    #[test]
    fn only_names_the_minimum_counts_under_are_checked() {
        let mut quota = gpu_quota(100, 0);
        quota.hard = Resources::from_json(&json!({
            "requests.nvidia.com/gpu": 100, "limits.cpu": "2", "services": 0, "pods": 10
        }))
        .unwrap();
        quota.used = Resources::from_json(&json!({"limits.cpu": "1", "services": 5})).unwrap();
        let mut a = gang("a", 2, TaskStatus::Pending, false);
        let (plugin, st) = opened(vec![a.clone()], vec![quota.clone()]);
        assert_eq!(
            ask(&plugin, &st, "a"),
            Vote::Permit,
            "services is over its hard limit, but pods do not count there"
        );
        a.min_resources =
            Some(Resources::from_json(&json!({"nvidia.com/gpu": 2, "cpu": "2"})).unwrap());
        let (plugin, st) = opened(vec![a], vec![quota]);
        assert_eq!(
            rejection(ask(&plugin, &st, "a")),
            "namespace \"ns\": resourcequota \"gpu-quota\": limits.cpu would be 3 > hard 2"
        );
    }

    #[test]
    fn every_quota_of_the_namespace_must_hold_and_scoped_ones_are_skipped() {
        let roomy = gpu_quota(100, 2);
        let mut tight = gpu_quota(1, 2);
        tight.name = "tight".into();
        let mut scoped = gpu_quota(0, 2);
        scoped.name = "high-priority-only".into();
        scoped.scoped = true;
        let (plugin, st) = opened(
            vec![gang("a", 2, TaskStatus::Pending, false)],
            vec![scoped.clone(), roomy.clone()],
        );
        assert_eq!(ask(&plugin, &st, "a"), Vote::Permit);
        let (plugin, st) = opened(
            vec![gang("a", 2, TaskStatus::Pending, false)],
            vec![roomy, tight, scoped],
        );
        assert!(rejection(ask(&plugin, &st, "a")).contains("resourcequota \"tight\""));
    }

    #[test]
    fn no_minimum_or_no_quota_permits() {
        let mut a = gang("a", 2, TaskStatus::Pending, false);
        a.min_resources = None;
        let (plugin, st) = opened(vec![a], vec![gpu_quota(0, 0)]);
        assert_eq!(ask(&plugin, &st, "a"), Vote::Permit, "no minimum stated");
        let (plugin, st) = opened(vec![gang("a", 2, TaskStatus::Pending, false)], vec![]);
        assert_eq!(ask(&plugin, &st, "a"), Vote::Permit, "no quota");
    }

    #[test]
    fn the_documented_configuration_loads() {
        // Volcano's example: resourcequota next to overcommit, in one tier, so a
        // job must fit both.
        let conf = crate::volcano::conf::SchedulerConf::parse(
            "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: resourcequota\n  - name: overcommit\n",
        )
        .unwrap();
        let tiers = crate::volcano::plugins::registry::build(&conf).unwrap();
        assert_eq!(tiers.names(), vec!["resourcequota", "overcommit"]);
        let bad = crate::volcano::conf::SchedulerConf::parse(
            "actions: enqueue\ntiers:\n- plugins:\n  - name: resourcequota\n    arguments:\n      scope: all\n",
        )
        .unwrap();
        assert!(crate::volcano::plugins::registry::build(&bad).is_err());
    }

    #[test]
    fn a_gang_of_one_states_its_pod() {
        let mut single = gang("solo", 1, TaskStatus::Pending, false);
        single.key.single = true;
        single.min_resources = None;
        single.tasks[0] = member("solo", 3, TaskStatus::Pending);
        let key = single.key.clone();
        single.tasks[0].job = key.clone();
        let (plugin, st) = opened(vec![single], vec![gpu_quota(2, 3)]);
        assert_eq!(
            rejection(plugin.job_enqueueable(&st, &st.jobs[&key])),
            "namespace \"ns\": resourcequota \"gpu-quota\": requests.nvidia.com/gpu would be 3 > hard 2"
        );
    }
}
