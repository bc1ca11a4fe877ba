//! `pkg/scheduler/actions/gangpreempt/gangpreempt_test.go`: the gangpreempt
//! action, run as a configuration listing it builds it. Volcano's cases call
//! the action's helpers on a hand-built session (one plugin letting every
//! candidate go); here each runs a whole session over a cluster that makes the
//! helper's answer visible as evictions: the preemptor (priority 100, one task
//! of 1 CPU) waits, and the victims Volcano expects are the pods evicted.
//!
//! - `TestPickDomainsFromGradients_MaxDomainsAndDedup`: `maxDomains: 2` keeps
//!   the search to the first two domains of a hard-constrained gang (a HyperNode
//!   is one domain however it is reached, so the dedup is by construction).
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
use super::support::{PodRow, Table, queue};

/// The preemptor: `ns/preemptor` of priority 100, waiting.
fn preemptor() -> PodRow {
    test_task("preemptor", "preemptor", "")
}

/// Preemptor and victim (priority 10, minMember 1: a whole bundle) on n1 of 1
/// CPU, the victim's PodGroup as given.
fn one_victim(victim_group: super::support::GroupRow) -> Table {
    Table {
        nodes: one_cpu_nodes(&["n1"]),
        queues: vec![queue("q1", 1, None)],
        groups: vec![job("preemptor", "q1", 100), victim_group],
        pods: vec![preemptor(), test_task("victim", "victim", "n1")],
        ..Table::default()
    }
}

fn whole_bundle(allow: bool) -> String {
    format!("- name: gangpreempt\n  arguments:\n    allowWholeBundle: {allow}\n")
}

#[test]
fn select_domain_victims_respect_allow_whole_bundle() {
    let t = one_victim(job("victim", "q1", 10));
    assert!(run_action(&t, &[], "gangpreempt", &whole_bundle(false)).is_empty());
    assert_eq!(
        run_action(&t, &[], "gangpreempt", &whole_bundle(true)),
        set(&["victim"])
    );
}

#[test]
fn select_domain_victims_respect_victim_job_preemptable() {
    let t = one_victim(not_preemptable(job("victim", "q1", 10)));
    assert!(run_action(&t, &[], "gangpreempt", &whole_bundle(true)).is_empty());
}

#[test]
fn select_domain_victims_allow_victim_job_when_preemptable_unset() {
    let t = one_victim(job("victim", "q1", 10));
    assert_eq!(
        run_action(&t, &[], "gangpreempt", &whole_bundle(true)),
        set(&["victim"])
    );
}

#[test]
fn pick_domains_from_gradients_max_domains_and_dedup() {
    assert!(victim_in_third_domain("gangpreempt", "q1", 2).is_empty());
    assert_eq!(
        victim_in_third_domain("gangpreempt", "q1", 3),
        set(&["victim"])
    );
}

#[test]
fn pick_domains_from_gradients_fallback() {
    assert_eq!(
        spread_victims("gangpreempt", "q1"),
        set(&["v1", "v2", "v3"])
    );
}

/// Beside Volcano's cases, where this scheduler differs on purpose: a victim
/// gang broken to make room in one HyperNode goes whole, its members in other
/// HyperNodes too (Volcano evicts only those in the domain searched and leaves
/// the rest running below minMember).
#[test]
fn a_gang_broken_for_one_domain_goes_whole_across_domains() {
    let mut victim = job("victim", "q1", 10);
    victim.min_member = 2;
    let t = Table {
        nodes: one_cpu_nodes(&["n1", "n2", "n3"]),
        queues: vec![queue("q1", 1, None)],
        groups: vec![
            super::gang_eviction_support::hard_tier_one(job("preemptor", "q1", 100)),
            victim,
            job("high", "q1", 1000),
        ],
        pods: vec![
            preemptor(),
            test_task("v1", "victim", "n1"),
            test_task("v2", "victim", "n2"),
            test_task("busy", "high", "n3"),
        ],
        ..Table::default()
    };
    assert_eq!(
        run_action(
            &t,
            &super::gang_eviction_support::three_domains(),
            "gangpreempt",
            ""
        ),
        set(&["v1", "v2"])
    );
}
