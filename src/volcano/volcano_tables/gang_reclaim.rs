//! `pkg/scheduler/actions/gangreclaim/gangreclaim_test.go`: the gangreclaim
//! action, run as a configuration listing it builds it. Volcano's cases call
//! the action's helpers on a hand-built session (one plugin letting every
//! candidate go); here each runs a whole session over a cluster that makes the
//! helper's answer visible as evictions: the reclaimer of queue q1 (one task of
//! 1 CPU) waits, and the victims Volcano expects are the pods evicted.
//!
//! - `TestPickDomainsFromGradients_MaxDomainsAndDedup`: `maxDomains: 3` reaches
//!   the third domain of a hard-constrained gang, `2` does not (a HyperNode is
//!   one domain however it is reached, so the dedup is by construction).
//! - `TestPickDomainsFromGradients_Fallback`: a gang with no HyperNode gradient
//!   of its own searches the whole cluster.
//! - `TestSelectDomainVictims_*`: the three cases, one each.
//!
//! Left out: `TestParseArguments` and
//! `TestParseArguments_InvalidMaxDomainsFallsBackToDefault` are tests of the
//! configuration's reading, in `actions::gang_eviction_arguments`.

use super::gang_eviction_support::{
    job, not_preemptable, one_cpu_nodes, run_action, set, spread_victims, test_task,
    victim_in_third_domain,
};
use super::support::{GroupRow, Table, queue};

/// The reclaimer (q1) waiting, and on n1 of 2 CPUs the victim (q2,
/// reclaimable, its PodGroup as given) and `other` (q3, not reclaimable).
fn cross_queue(victim_group: GroupRow) -> Table {
    let mut q3 = queue("q3", 1, None);
    q3.reclaimable = false;
    Table {
        nodes: vec![("n1", super::support::node_alloc("2", "2G", 10))],
        queues: vec![queue("q1", 1, None), queue("q2", 1, None), q3],
        groups: vec![
            job("reclaimer", "q1", 0),
            victim_group,
            job("other", "q3", 0),
        ],
        pods: vec![
            test_task("reclaimer", "reclaimer", ""),
            test_task("victim", "victim", "n1"),
            test_task("other", "other", "n1"),
        ],
        ..Table::default()
    }
}

#[test]
fn select_domain_victims_reclaimable_cross_queue_only() {
    let t = cross_queue(job("victim", "q2", 0));
    assert_eq!(run_action(&t, &[], "gangreclaim", ""), set(&["victim"]));
}

#[test]
fn select_domain_victims_respect_victim_job_preemptable() {
    // Only the victim of a reclaimable queue could go, and its PodGroup says no.
    let t = cross_queue(not_preemptable(job("victim", "q2", 0)));
    assert!(run_action(&t, &[], "gangreclaim", "").is_empty());
}

#[test]
fn select_domain_victims_allow_victim_job_when_preemptable_unset() {
    let t = Table {
        nodes: one_cpu_nodes(&["n1"]),
        queues: vec![queue("q1", 1, None), queue("q2", 1, None)],
        groups: vec![job("reclaimer", "q1", 0), job("victim", "q2", 0)],
        pods: vec![
            test_task("reclaimer", "reclaimer", ""),
            test_task("victim", "victim", "n1"),
        ],
        ..Table::default()
    };
    assert_eq!(run_action(&t, &[], "gangreclaim", ""), set(&["victim"]));
}

#[test]
fn pick_domains_from_gradients_max_domains_and_dedup() {
    assert_eq!(
        victim_in_third_domain("gangreclaim", "q2", 3),
        set(&["victim"])
    );
    assert!(victim_in_third_domain("gangreclaim", "q2", 2).is_empty());
}

#[test]
fn pick_domains_from_gradients_fallback() {
    assert_eq!(
        spread_victims("gangreclaim", "q2"),
        set(&["v1", "v2", "v3"])
    );
}
