//! `pkg/scheduler/actions/utils/simulate_test.go`: the plan the gang eviction
//! actions try in one domain (evict the victims, place every waiting task
//! inside the domain, keep it only if the gang then has its minimum), run in a
//! session and committed when it works, so that what it decided shows as
//! evictions and placements. Nodes of the named CPUs; the job `job` (minMember
//! 1) waits with `t1` of 1 CPU; victims belong to `victim-job`.
//!
//! Volcano pipelines every task of a plan, even onto room free now; here a task
//! that fits as things are is placed (bound), as preempt and reclaim place it,
//! and only one that needs the victims gone is pipelined.
//!
//! Left out:
//! - `TestBuildNominationPlanInDomain_Guards`: nil arguments of a Go function.
//! - `TestCollectPendingTasksFor*`: they order sub-jobs, which are not modelled
//!   here (a job's waiting tasks go in task order).
//! - `TestBuildNominationPlanInDomain_NominatedHintDoesNotShortCircuitPredicate`,
//!   `_FallbackWhenNominatedMissing`, `_FallbackWhenNominatedInfeasible`: a
//!   pod's nominated node, which this scheduler does not keep; the case that
//!   carries over (a node outside the domain is never used) is
//!   [`build_nomination_plan_in_domain_ignores_nominated_node_outside_domain`].
//! - `util_test.go`'s `TestGetCandidateDomains_*` drive an empty gradient from
//!   a plugin written in the test; the fallback to the whole cluster is
//!   `gang_preempt::pick_domains_from_gradients_fallback`.

use super::support::{
    Table, bound, evicted, group, node_alloc, pipelined, pod, queue, resources, tiers_conf,
};
use crate::volcano::actions::eviction_domains::Domain;
use crate::volcano::actions::nomination_plan::plan_in_domain;
use crate::volcano::framework::{Action, EvictAction, GangKey, GangPhase, Session, SessionOutcome};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// Tries the plan for `t1` of `job` in `domain` (`None`: every node) with
/// these victims (pods of `victim-job`), committing it when it works.
#[derive(Debug)]
struct TryPlan {
    domain: Option<&'static [&'static str]>,
    victims: &'static [&'static str],
    failed: Mutex<Option<String>>,
}

fn key(name: &str) -> GangKey {
    GangKey {
        namespace: "c1".into(),
        name: name.into(),
        single: false,
    }
}

impl Action for TryPlan {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn execute(&self, session: &mut Session) {
        let domain = Domain {
            name: "sim-domain".into(),
            nodes: self
                .domain
                .map(|nodes| nodes.iter().map(|n| n.to_string()).collect()),
        };
        let victims: Vec<(GangKey, String)> = self
            .victims
            .iter()
            .map(|v| (key("victim-job"), format!("uid-{v}")))
            .collect();
        let pending = ["uid-t1".to_string()];
        match plan_in_domain(
            session,
            &key("job"),
            &pending,
            &domain,
            &victims,
            EvictAction::Preempt,
            "test",
        ) {
            Ok(plan) => plan.statement.commit(session),
            Err(e) => {
                if let Ok(mut failed) = self.failed.lock() {
                    *failed = Some(e);
                }
            }
        }
    }
}

/// Nodes with these CPUs, the victims (1 CPU each unless given) running where
/// named; the plan tried in `domain`. The outcome, and why the plan failed.
fn try_plan(
    nodes: &[(&'static str, &str)],
    running: &[(&'static str, &'static str, &str)],
    domain: Option<&'static [&'static str]>,
    victims: &'static [&'static str],
) -> (SessionOutcome, Option<String>) {
    let mut pods = vec![pod("t1", "", false, resources("1", "1G"), "job")];
    pods.extend(
        running
            .iter()
            .map(|(name, node, cpu)| pod(name, node, true, resources(cpu, "1G"), "victim-job")),
    );
    let t = Table {
        nodes: nodes
            .iter()
            .map(|(n, cpu)| (*n, node_alloc(cpu, "8G", 10)))
            .collect(),
        queues: vec![queue("q1", 1, None)],
        groups: vec![
            group("job", "q1", 1, GangPhase::Inqueue),
            group("victim-job", "q1", 1, GangPhase::Running),
        ],
        pods,
        ..Table::default()
    };
    let action = TryPlan {
        domain,
        victims,
        failed: Mutex::new(None),
    };
    let conf = tiers_conf("allocate", &[&[("gang", &["JobPipelined"])]]);
    let outcome = t.run(&conf, &[&action]);
    let failed = action.failed.lock().ok().and_then(|f| f.clone());
    (outcome, failed)
}

fn on(node: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("c1/t1".to_string(), node.to_string())])
}

fn none() -> BTreeSet<String> {
    BTreeSet::new()
}

#[test]
fn build_nomination_plan_in_domain_success() {
    let (o, failed) = try_plan(&[("n1", "2")], &[], None, &[]);
    assert_eq!((failed, bound(&o), evicted(&o)), (None, on("n1"), none()));
}

#[test]
fn build_nomination_plan_in_domain_with_victim_includes_evict_and_pipeline() {
    let (o, failed) = try_plan(&[("n1", "3")], &[("v1", "n1", "1")], None, &["v1"]);
    assert_eq!(failed, None);
    assert_eq!(evicted(&o), BTreeSet::from(["c1/v1".to_string()]));
    assert_eq!(bound(&o), on("n1"));
}

#[test]
fn build_nomination_plan_in_domain_no_feasible_node() {
    let (o, failed) = try_plan(&[("n1", "0")], &[], None, &[]);
    assert!(failed.is_some());
    assert!(bound(&o).is_empty() && pipelined(&o).is_empty());
}

#[test]
fn build_nomination_plan_in_domain_pipeline_failure_rolls_back_eviction() {
    // The domain holds only a node the cluster does not have: nothing can be
    // placed, and the victim evicted for the try is not evicted after all.
    let (o, failed) = try_plan(
        &[("n1", "1")],
        &[("v1", "n1", "1")],
        Some(&["ghost-node"]),
        &["v1"],
    );
    assert!(failed.is_some());
    assert_eq!(evicted(&o), none());
    assert!(bound(&o).is_empty() && pipelined(&o).is_empty());
}

#[test]
fn build_nomination_plan_in_domain_prefers_idle_node_over_future_idle() {
    let (o, failed) = try_plan(
        &[("n-future", "2"), ("n-idle", "2")],
        &[("v1", "n-future", "2")],
        None,
        &["v1"],
    );
    assert_eq!(failed, None);
    assert_eq!(bound(&o), on("n-idle"));
    assert!(pipelined(&o).is_empty());
}

#[test]
fn pick_best_node_for_task_falls_back_future_idle_group() {
    let (o, failed) = try_plan(
        &[("n-future", "2")],
        &[("v1", "n-future", "2")],
        None,
        &["v1"],
    );
    assert_eq!(failed, None);
    assert_eq!(
        pipelined(&o),
        BTreeMap::from([("c1/job".to_string(), vec!["n-future".to_string()])])
    );
}

#[test]
fn build_nomination_plan_in_domain_ignores_nominated_node_outside_domain() {
    let (o, failed) = try_plan(
        &[("n-domain", "2"), ("n-nominated", "2")],
        &[],
        Some(&["n-domain"]),
        &[],
    );
    assert_eq!(failed, None);
    assert_eq!(bound(&o), on("n-domain"));
}
