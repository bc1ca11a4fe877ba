//! Replays on a small cluster: time moves from event to event, gangs wait for
//! room and start when it frees, and a job that never fits says why.

use super::replay::VariantSetup;
use super::workload::Workload;
use super::{simulate, variant};
use crate::cluster::file::{ClusterObject, visit};
use crate::config::SimulateArgs;
use std::time::Duration;

/// Two nodes of four whole-card slots (one slot per card), one queue.
pub(super) fn cluster() -> Vec<ClusterObject> {
    let node = |name: &str| {
        let devs: Vec<String> = (0..4)
            .map(|i| {
                format!(
                    r#"{{"id":"GPU-{name}-{i}","count":1,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true,"index":{i},"mode":"hami-core"}}"#
                )
            })
            .collect();
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  annotations:\n    hami.io/node-nvidia-register: '[{}]'\nstatus:\n  allocatable: {{cpu: \"64\", memory: 512Gi, nvidia.com/gpu: \"4\"}}\n",
            devs.join(",")
        )
    };
    let text = format!("{}---\n{}", node("n1"), node("n2"));
    let mut objects = Vec::new();
    visit(&text, |o| objects.push(o)).expect("cluster");
    objects
}

/// The simulate command line the tests' variants are read with.
pub(super) fn args() -> SimulateArgs {
    SimulateArgs {
        cluster_file: Some("cluster.yaml".into()),
        from_cluster: false,
        kubeconfig: None,
        workload: "workload.yaml".into(),
        scheduler_config: None,
        variants: Vec::new(),
        report: "report".into(),
        seed: 1,
        sample_every: Some(Duration::from_secs(60)),
        quiet: true,
    }
}

pub(super) fn setup() -> VariantSetup {
    variant("default:", &args()).expect("variant")
}

async fn run(workload: &str) -> super::replay::ReplayResult {
    let workload = Workload::parse(workload).expect("workload");
    let cluster = cluster();
    simulate(
        &cluster,
        &workload,
        &[setup()],
        1,
        Duration::from_secs(60),
        false,
    )
    .await
    .expect("replay")
    .remove(0)
}

#[tokio::test]
async fn a_gang_waits_for_room_and_starts_when_it_frees() {
    // Six of the eight cards are busy for an hour; a gang of four whole cards
    // arrives at 10 minutes and can start only when they are free.
    let r = run("
arrivals:
- name: busy
  duration: 1h
  gang: {members: 6}
  pod: {gpus: 1}
- name: train
  at: 10m
  duration: 2h
  gang: {members: 4}
  pod: {gpus: 1}
")
    .await;
    let job = |name: &str| r.jobs.iter().find(|j| j.name == name).expect("job");
    assert_eq!(job("busy-0").started, Some(0.0));
    let train = job("train-0");
    assert_eq!(train.arrived, 600.0);
    let started = train.started.expect("the gang started");
    assert!(
        (3600.0..3600.0 + 2.0).contains(&started),
        "the gang started at {started}s, not when the busy job ended"
    );
    // Nothing ran past the last job: the replay ends when the gang finishes.
    assert!(
        (r.seconds - (started + 7200.0)).abs() < 1.0,
        "{}",
        r.seconds
    );
}

#[tokio::test]
async fn a_job_that_never_fits_says_why() {
    let r = run("
arrivals:
- name: huge
  duration: 1h
  pod: {gpus: 5}
")
    .await;
    let huge = &r.jobs[0];
    assert_eq!(huge.started, None);
    let reason = huge.reason.clone().unwrap_or_default();
    // In the words of the step that refused it, every node's reason told.
    assert!(
        reason.starts_with("extender filter: 0/2 nodes are available: 2 "),
        "{reason}"
    );
}

/// Volcano's reclaim under proportion: a queue above its share gives back.
const RECLAIM: &str = "actions: \"enqueue, allocate, backfill, reclaim\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: proportion
";

#[tokio::test]
async fn a_reclaimed_gang_is_evicted_whole_and_created_again() {
    let mut cluster = cluster();
    let queues = "apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: training}
spec: {weight: 1, reclaimable: true}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: inference}
spec: {weight: 1, reclaimable: false}
";
    visit(queues, |o| cluster.push(o)).expect("queues");
    let mut setup = setup();
    setup.gang_conf = Some(crate::volcano::load_conf(RECLAIM).expect("conf"));
    // Training takes all eight cards; inference then asks for four, its share.
    let workload = Workload::parse(
        "
horizon: 3h
arrivals:
- name: train
  duration: 10h
  queue: training
  gang: {members: 8}
  pod: {gpus: 1}
- name: serve
  at: 30m
  duration: 1h
  queue: inference
  gang: {members: 4}
  pod: {gpus: 1}
",
    )
    .expect("workload");
    let r = simulate(
        &cluster,
        &workload,
        &[setup],
        1,
        Duration::from_secs(60),
        false,
    )
    .await
    .expect("replay")
    .remove(0);
    let job = |name: &str| r.jobs.iter().find(|j| j.name == name).expect("job");
    assert_eq!(r.evicted_pods, 8, "the whole gang was evicted");
    assert_eq!(job("train-0").evictions, 1);
    let served = job("serve-0").started.expect("inference was placed");
    assert!((1800.0..2100.0).contains(&served), "{served}");
}

#[tokio::test]
async fn a_pod_without_a_pod_group_waiting_shows_its_own_verdicts_reason() {
    let r = run("
arrivals:
- name: lost
  duration: 1h
  queue: nowhere
  pod: {gpus: 1}
")
    .await;
    assert_eq!(r.jobs[0].started, None);
    let reason = r.jobs[0].reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("Volcano planner, QueueNotFound: ") && reason.contains("nowhere"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_gang_that_can_never_fit_ends_the_replay_when_nothing_else_moves() {
    let r = run("
arrivals:
- name: giant
  duration: 1h
  gang: {members: 9}
  pod: {gpus: 1}
")
    .await;
    assert_eq!(r.jobs[0].started, None);
    assert!(r.seconds < 120.0, "replayed {}s of nothing", r.seconds);
    // The reason is the PodGroup's.
    let reason = r.jobs[0].reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("Volcano planner, ") && reason.contains("tasks in gang unschedulable"),
        "{reason}"
    );
}
