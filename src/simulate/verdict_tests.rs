//! The verdict and the measures of work on replays whose answer is known: a
//! policy that strands whole-card jobs is not chosen and its starved line is
//! named; two variants that replay the same are a tie; work is what the pods
//! held, for as long as they held it.

use super::replay::{ReplayResult, VariantSetup};
use super::summary::{Inputs, Summary, compare, summarise};
use super::tests::{args, cluster, setup};
use super::workload::Workload;
use super::{simulate, variant};
use std::time::Duration;

async fn replay(workload: &str, setups: &[VariantSetup]) -> Vec<ReplayResult> {
    let workload = Workload::parse(workload).expect("workload");
    simulate(
        &cluster(),
        &workload,
        setups,
        1,
        Duration::from_secs(60),
        false,
    )
    .await
    .expect("replay")
}

async fn verdict_of(workload: &str, variants: &[&str]) -> Summary {
    let setups: Vec<VariantSetup> = variants
        .iter()
        .map(|v| variant(v, &args()).expect("variant"))
        .collect();
    let results = replay(workload, &setups).await;
    compare(
        1,
        Inputs::default(),
        setups
            .iter()
            .zip(&results)
            .map(|(s, r)| summarise(&s.name, &s.flags, r))
            .collect(),
    )
}

/// Two single-card jobs that run all day, then whole-node jobs of four cards:
/// binpack keeps a node free for them, spread puts one small job on each node
/// and leaves no node with four free cards.
const STRANDED: &str = "
horizon: 5h
arrivals:
- name: small
  count: 2
  every: 1s
  duration: 10h
  pod: {gpus: 1}
- name: whole-node
  at: 1m
  every: 1m
  count: 3
  duration: 1h
  pod: {gpus: 4}
";

#[tokio::test]
async fn the_verdict_chooses_the_policy_that_delivered_more_and_names_the_starved_line() {
    let s = verdict_of(
        STRANDED,
        &[
            "binpack:--node-scheduler-policy=binpack",
            "spread:--node-scheduler-policy=spread",
        ],
    )
    .await;
    assert!(
        s.verdict
            .starts_with("Choose binpack: binpack leads on most work delivered"),
        "{}",
        s.verdict
    );
    assert!(
        s.verdict.contains(
            "Worst off under spread: 3 of 3 jobs of whole-node in queue default waited 5.0h, 3 of them never placed: no node had 4 free cards (extender filter: 0/2 nodes are available"
        ),
        "{}",
        s.verdict
    );
    let spread = &s.variants[1];
    let names: Vec<&str> = spread
        .never_placed_jobs
        .iter()
        .map(|j| j.job.as_str())
        .collect();
    assert_eq!(names, ["whole-node-0", "whole-node-1", "whole-node-2"]);
    // Work: binpack ran the three whole-node jobs (12 card-hours) besides the
    // small ones (2 × 5 h, less the second's one second late); spread only
    // the small ones.
    let near = |a: f64, b: f64| (a - b).abs() < 0.01;
    assert!(
        near(s.variants[0].work.card_hours, 22.0),
        "{:?}",
        s.variants[0].work
    );
    assert!(near(spread.work.card_hours, 10.0), "{:?}", spread.work);
    let work = &s.standings[0];
    assert_eq!(work.best, ["binpack"]);
    assert!(!work.tie);
    assert_eq!(work.margin_percent, Some(120.0));
    // Memory in use is reported, not a measure a variant wins on.
    assert!(s.standings.iter().all(|m| !m.measure.contains("memory")));
}

#[tokio::test]
async fn two_variants_that_replay_the_same_are_a_tie_not_a_win_for_the_first() {
    let s = verdict_of(STRANDED, &["first:", "second:--gang-strict=false"]).await;
    assert!(s.verdict.starts_with("No clear choice"), "{}", s.verdict);
    assert!(
        s.verdict
            .contains("first and second tie on most work delivered"),
        "{}",
        s.verdict
    );
    for standing in &s.standings {
        assert!(
            standing.tie,
            "{} was given to {:?}",
            standing.measure, standing.best
        );
        assert_eq!(standing.best, ["first", "second"]);
        assert!(standing.describe().starts_with("tie: first, second"));
    }
}

#[tokio::test]
async fn work_is_what_the_pods_held_for_as_long_as_they_held_it() {
    // Two whole cards for an hour; half a card's memory and a quarter of its
    // compute for two hours; cut off by a 90-minute horizon.
    let r = replay(
        "
horizon: 90m
arrivals:
- name: whole
  duration: 1h
  pod: {gpus: 2}
- name: slice
  duration: 2h
  pod: {gpus: 1, gpumem: 40779, gpucores: 25}
",
        &[setup()],
    )
    .await;
    let v = summarise("default", "", &r[0]);
    let whole = &r[0].jobs[0].work;
    assert_eq!(
        (whole.vgpu_hours, whole.card_hours, whole.compute_card_hours),
        (2.0, 2.0, 2.0)
    );
    let slice = &r[0].jobs[1].work;
    assert_eq!(slice.vgpu_hours, 1.5);
    assert!((slice.card_hours - 0.75).abs() < 1e-3, "{slice:?}");
    assert!((slice.compute_card_hours - 0.375).abs() < 1e-9, "{slice:?}");
    // Asked: 2 × 1 h and 1 × 1.5 h within the horizon, all delivered.
    assert_eq!(v.demand_met_percent, 100.0);
    let h100 = &v.models["NVIDIA H100 80GB HBM3"];
    assert_eq!(h100.cards, 8);
    assert!((h100.work.card_hours - 2.75).abs() < 1e-3, "{h100:?}");
}

#[tokio::test]
async fn variants_replayed_side_by_side_come_out_as_each_alone() {
    let binpack = variant("binpack:--node-scheduler-policy=binpack", &args()).expect("variant");
    let spread = variant("spread:--node-scheduler-policy=spread", &args()).expect("variant");
    let together = replay(STRANDED, &[binpack.clone(), spread.clone()]).await;
    let alone = [
        replay(STRANDED, &[binpack]).await.remove(0),
        replay(STRANDED, &[spread]).await.remove(0),
    ];
    for (name, (t, a)) in ["binpack", "spread"]
        .iter()
        .zip(together.iter().zip(&alone))
    {
        let json = |r| serde_json::to_string(&summarise(name, "", r)).expect("json");
        assert_eq!(json(t), json(a), "{name}");
        assert_eq!(t.bindings, a.bindings, "{name}");
    }
}

#[tokio::test]
async fn job_sizes_are_listed_smallest_first() {
    let r = replay(
        "
horizon: 10m
arrivals:
- name: huge
  duration: 1m
  gang: {members: 10}
  pod: {gpus: 4}
- name: mid
  duration: 1m
  gang: {members: 3}
  pod: {gpus: 4}
- name: pair
  duration: 1m
  pod: {gpus: 2}
- name: one
  duration: 1m
  pod: {gpus: 1}
",
        &[setup()],
    )
    .await;
    let v = summarise("default", "", &r[0]);
    let sizes: Vec<&str> = v
        .pending_seconds_by_size
        .iter()
        .map(|s| s.size.as_str())
        .collect();
    assert_eq!(sizes, ["1 vGPU", "2-8 vGPUs", "9-32 vGPUs", "33+ vGPUs"]);
}

#[tokio::test]
async fn a_starved_line_limited_to_a_card_type_is_told_by_that_type() {
    let workload = STRANDED.replace(
        "  pod: {gpus: 4}",
        "  pod: {gpus: 4, annotations: {nvidia.com/use-gputype: H100}}",
    );
    let s = verdict_of(&workload, &["spread:--node-scheduler-policy=spread"]).await;
    assert!(
        s.verdict
            .contains("waited 5.0h, 3 of them never placed: no H100 node had 4 free cards ("),
        "{}",
        s.verdict
    );
}
