//! Binds queued on one node's lock, end to end through the scheduler: turns in
//! arrival order, a release seen by the watch handing the lock on at once, a
//! lock whose holder vanished taken over as soon as the watch says so; and where
//! `/filter` sends the next pod while a node's lock is held.

use super::{Scheduler, SchedulerConfig};
use crate::annotations::{BIND_PHASE, NODE_LOCK};
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::{ExtenderArgs, ExtenderBindingArgs};
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A waiting bind re-reads the lock by itself after this long at the latest; a
/// handoff that takes less was woken by the release.
const RECHECK: Duration = Duration::from_secs(5);

fn node() -> Node {
    named_node("n1", "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc")
}

fn named_node(name: &str, gpu: &str) -> Node {
    node_with_gpus(name, &[gpu])
}

/// A node of H100s, ten slots each.
fn node_with_gpus(name: &str, gpus: &[&str]) -> Node {
    let register: Vec<String> = gpus
        .iter()
        .enumerate()
        .map(|(index, gpu)| format!(
            r#"{{"id":"{gpu}","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true,"index":{index},"mode":"hami-core"}}"#
        ))
        .collect();
    let register = format!("[{}]", register.join(","));
    serde_json::from_value(
        serde_json::json!({"metadata": {"name": name, "annotations": {
        "hami.io/node-nvidia-register": register}}}),
    )
    .expect("node")
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {"schedulerName": "vgpu-scheduler",
                 "containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}}}]}
    }))
    .expect("pod")
}

fn world() -> (Arc<Scheduler>, Arc<MemoryCluster>) {
    // No simulated device plugin: locks stay held until the test releases them.
    // Changes are reported by watches, which the tests play by applying objects.
    let memory = Arc::new(MemoryCluster::new(vec![node()], Vec::new(), false).reporting_changes());
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Arc::new(Scheduler::new(
        SchedulerConfig::default(),
        api,
        Arc::new(Metrics::new()),
    ));
    s.load(&ClusterObjects {
        nodes: vec![node()],
        ..Default::default()
    });
    (s, memory)
}

async fn filtered(s: &Scheduler, memory: &MemoryCluster, name: &str) {
    let p = pod(name);
    memory.insert_pod(&p);
    let answer = s
        .filter(ExtenderArgs {
            pod: Some(p),
            nodes: None,
            node_names: Some(["n1"].into_iter().collect()),
        })
        .await;
    assert_eq!(answer.node_names, Some(vec!["n1".to_string()]), "{name}");
}

fn bind_args(name: &str) -> ExtenderBindingArgs {
    ExtenderBindingArgs {
        pod_name: Some(name.into()),
        pod_namespace: Some("ns".into()),
        pod_uid: Some(format!("uid-{name}")),
        node: Some("n1".into()),
    }
}

async fn lock_owner(memory: &MemoryCluster) -> Option<String> {
    let node = memory.get_node("n1").await.ok().flatten()?;
    let lock = node.metadata.annotations?.get(NODE_LOCK)?.clone();
    lock.rsplit(',').next().map(str::to_string)
}

/// What HAMi's device plugin does after `Allocate` (removes the lock), and the
/// node watch delivering the change.
async fn device_plugin_releases(s: &Scheduler, memory: &MemoryCluster) {
    let mut release = BTreeMap::new();
    release.insert(NODE_LOCK.to_string(), None);
    memory
        .patch_node_annotations("n1", &release, None)
        .await
        .expect("release");
    let node = memory.get_node("n1").await.ok().flatten().expect("node");
    s.apply_node(&node);
}

/// Waits, a virtual millisecond at a time, until `owner` holds the lock;
/// returns the virtual time that took.
async fn until_held_by(memory: &MemoryCluster, owner: &str) -> Duration {
    let started = tokio::time::Instant::now();
    while lock_owner(memory).await.as_deref() != Some(owner) {
        assert!(
            started.elapsed() < 10 * RECHECK,
            "{owner} never got the lock"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    started.elapsed()
}

#[tokio::test(start_paused = true)]
async fn binds_waiting_for_a_node_get_its_lock_in_arrival_order_as_soon_as_it_is_released() {
    let (s, memory) = world();
    for name in ["p0", "p1", "p2", "p3"] {
        filtered(&s, &memory, name).await;
    }
    assert_eq!(s.bind(bind_args("p0")).await.error, "");
    assert_eq!(lock_owner(&memory).await.as_deref(), Some("p0"));
    let mut binds = Vec::new();
    for (n, name) in ["p1", "p2", "p3"].into_iter().enumerate() {
        let scheduler = s.clone();
        binds.push(tokio::spawn(async move {
            scheduler.bind(bind_args(name)).await
        }));
        // Each bind is queued before the next one arrives.
        while s.lock_handoff.binds_at("n1") < n + 1 {
            tokio::task::yield_now().await;
        }
    }
    for next in ["p1", "p2", "p3"] {
        device_plugin_releases(&s, &memory).await;
        let took = until_held_by(&memory, next).await;
        assert!(
            took < RECHECK,
            "{next} took the lock after {took:?}: by a re-check, not the release"
        );
    }
    for bind in binds {
        assert_eq!(bind.await.expect("bind task").error, "");
    }
}

#[tokio::test(start_paused = true)]
async fn a_lock_whose_holder_vanished_is_taken_over_once_the_watch_shows_it_gone() {
    let (s, memory) = world();
    filtered(&s, &memory, "holder").await;
    filtered(&s, &memory, "next").await;
    assert_eq!(s.bind(bind_args("holder")).await.error, "");
    let scheduler = s.clone();
    let next = tokio::spawn(async move { scheduler.bind(bind_args("next")).await });
    while s.lock_handoff.binds_at("n1") < 1 {
        tokio::task::yield_now().await;
    }
    // The holder is deleted before its device plugin answered; the pod watch
    // reports the delete.
    memory
        .evict_pod("ns", "holder")
        .await
        .expect("delete holder");
    s.forget_pod("uid-holder");
    let took = until_held_by(&memory, "next").await;
    assert!(took < RECHECK, "taken over after {took:?}: by a re-check");
    assert_eq!(next.await.expect("bind task").error, "");
}

/// One node, n1, under a scheduler that reads the runtime's paused clock: the
/// grace after a device plugin's answer runs on the clock the binds wait on.
fn world_on_runtime_clock() -> (Arc<Scheduler>, Arc<MemoryCluster>) {
    let memory = Arc::new(MemoryCluster::new(vec![node()], Vec::new(), false).reporting_changes());
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Arc::new(Scheduler::with_clock(
        SchedulerConfig::default(),
        api,
        Arc::new(Metrics::new()),
        crate::clock::RuntimeClock::new(),
    ));
    s.load(&ClusterObjects {
        nodes: vec![node()],
        ..Default::default()
    });
    (s, memory)
}

/// HAMi's device plugin handing `name` its GPUs (bind phase `success`), as the
/// pod watch shows it; its lock is released apart.
async fn device_plugin_answers(s: &Scheduler, memory: &MemoryCluster, name: &str) {
    let mut pod = memory
        .get_pod("ns", name)
        .await
        .ok()
        .flatten()
        .expect("bound pod");
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(BIND_PHASE.to_string(), "success".to_string());
    s.apply_pod(&pod);
}

/// Binds `name` while `holder` holds n1's lock, then has the device plugin
/// answer for the holder and never release its lock: how long after the
/// answer the bind took the lock over.
async fn taken_over_after_the_answer(
    s: &Arc<Scheduler>,
    memory: &MemoryCluster,
    holder: &str,
    name: &str,
) -> Duration {
    filtered(s, memory, name).await;
    let scheduler = s.clone();
    let args = bind_args(name);
    let bind = tokio::spawn(async move { scheduler.bind(args).await });
    while s.lock_handoff.binds_at("n1") < 1 {
        tokio::task::yield_now().await;
    }
    device_plugin_answers(s, memory, holder).await;
    let took = until_held_by(memory, name).await;
    assert_eq!(bind.await.expect("bind task").error, "");
    took
}

/// `name` placed on n1 and bound, holding its lock as the node watch shows it.
async fn holding_the_lock(s: &Scheduler, memory: &MemoryCluster, name: &str) {
    filtered(s, memory, name).await;
    bound_and_locked(s, memory, name).await;
}

/// A lock taken over `took` after its holder's answer was taken over once the
/// `grace` had passed, on the first look after it.
fn assert_taken_over_after(took: Duration, grace: Duration) {
    assert!(
        took >= grace && took < grace + Duration::from_millis(10),
        "taken over {took:?} after the answer, the grace being {grace:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_answered_holder_keeps_its_lock_for_the_device_plugin_to_release_a_tenth_of_a_second() {
    let (s, memory) = world_on_runtime_clock();
    holding_the_lock(&s, &memory, "p0").await;
    let took = taken_over_after_the_answer(&s, &memory, "p0", "p1").await;
    assert_taken_over_after(took, Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn an_answered_holder_keeps_its_lock_twice_as_long_as_releases_lately_took() {
    let (s, memory) = world_on_runtime_clock();
    holding_the_lock(&s, &memory, "p0").await;
    // A busy control plane: the device plugin's release lands 400 ms after
    // its answer, so a bind that took the lock over sooner would only have
    // its write refused.
    device_plugin_answers(&s, &memory, "p0").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    device_plugin_releases(&s, &memory).await;
    holding_the_lock(&s, &memory, "p1").await;
    let took = taken_over_after_the_answer(&s, &memory, "p1", "p2").await;
    assert_taken_over_after(took, Duration::from_millis(800));
}

#[tokio::test(start_paused = true)]
async fn a_bind_whose_turn_does_not_come_within_the_lock_budget_fails_and_frees_its_gpus() {
    let (s, memory) = world();
    filtered(&s, &memory, "p0").await;
    // A bind ahead that never finishes (its device plugin never answers).
    let ahead = s.lock_handoff.turn("n1").await;
    let started = tokio::time::Instant::now();
    let error = s.bind(bind_args("p0")).await.error;
    let waited = started.elapsed();
    assert!(
        error.contains("did not finish within --node-lock-retry-timeout"),
        "{error}"
    );
    assert!(error.contains("1 binds were ahead"), "{error}");
    let budget = SchedulerConfig::default().node_lock_retry_timeout;
    // The budget runs on the scheduler's (real) clock and the wait on tokio's
    // paused one: the real time the test itself took comes off the wait.
    assert!(
        waited + Duration::from_secs(1) >= budget && waited < budget + RECHECK,
        "{waited:?}"
    );
    // Its GPUs are free again for kube-scheduler's next attempt, and the lock
    // was never taken.
    assert!(s.with_ledger(|l| l.pod("uid-p0").is_none()));
    assert_eq!(lock_owner(&memory).await, None);
    drop(ahead);
    filtered(&s, &memory, "p0").await;
    assert_eq!(s.bind(bind_args("p0")).await.error, "");
}

type World = (
    Arc<Scheduler>,
    Arc<MemoryCluster>,
    Arc<crate::clock::ManualClock>,
);

/// Two nodes of one GPU, n1 and n2, on a clock the test moves.
fn two_nodes(tolerance: Option<f64>) -> World {
    let nodes = vec![
        node(),
        named_node("n2", "GPU-bb6e500d-328b-a510-73d1-5877a2e60bdc"),
    ];
    two_nodes_with(
        nodes,
        SchedulerConfig {
            busy_node_tolerance: tolerance,
            ..SchedulerConfig::default()
        },
    )
}

/// Two nodes of four GPUs (40 one-slot pods each), n1 and n2.
fn two_roomy_nodes(config: SchedulerConfig) -> World {
    roomy_nodes(2, config)
}

/// `count` nodes of four GPUs (40 one-slot pods each), n1, n2, ...
fn roomy_nodes(count: usize, config: SchedulerConfig) -> World {
    let nodes = (1..=count)
        .map(|n| {
            let gpus: Vec<String> = (0..4)
                .map(|i| format!("GPU-{n}{i}6e500d-328b-a510-73d1-5877a2e60bdc"))
                .collect();
            node_with_gpus(
                &format!("n{n}"),
                &gpus.iter().map(String::as_str).collect::<Vec<_>>(),
            )
        })
        .collect();
    two_nodes_with(nodes, config)
}

fn two_nodes_with(nodes: Vec<Node>, config: SchedulerConfig) -> World {
    let memory = Arc::new(MemoryCluster::new(nodes.clone(), Vec::new(), false).reporting_changes());
    let api: Arc<dyn ClusterApi> = memory.clone();
    let clock = crate::clock::ManualClock::new();
    let s = Arc::new(Scheduler::with_clock(
        config,
        api,
        Arc::new(Metrics::new()),
        clock.clone(),
    ));
    s.load(&ClusterObjects {
        nodes,
        ..Default::default()
    });
    (s, memory, clock)
}

/// `/filter` of a new pod over n1 and n2; the chosen node.
async fn placed_on(s: &Scheduler, memory: &MemoryCluster, name: &str) -> String {
    placed_among(s, memory, name, &["n1", "n2"]).await
}

/// `/filter` of a new pod over `nodes`; the chosen node.
async fn placed_among(s: &Scheduler, memory: &MemoryCluster, name: &str, nodes: &[&str]) -> String {
    let p = pod(name);
    memory.insert_pod(&p);
    let answer = s
        .filter(ExtenderArgs {
            pod: Some(p),
            nodes: None,
            node_names: Some(nodes.iter().map(|n| n.to_string()).collect()),
        })
        .await;
    answer
        .node_names
        .and_then(|n| n.first().cloned())
        .unwrap_or_else(|| panic!("{name} placed nowhere"))
}

/// Binds `name` to n1 and lets the node watch show the lock it took.
async fn bound_and_locked(s: &Scheduler, memory: &MemoryCluster, name: &str) {
    assert_eq!(s.bind(bind_args(name)).await.error, "");
    let node = memory.get_node("n1").await.ok().flatten().expect("node");
    s.apply_node(&node);
}

#[tokio::test]
async fn binpack_keeps_filling_a_node_whose_device_plugin_answers_at_once() {
    let (s, memory, clock) = two_nodes(Some(100.0));
    assert_eq!(placed_on(&s, &memory, "p0").await, "n1");
    bound_and_locked(&s, &memory, "p0").await;
    // The lock has been held 20 ms: a device plugin about to answer.
    clock.advance(Duration::from_millis(20));
    assert_eq!(placed_on(&s, &memory, "p1").await, "n1");
}

/// Two roomy nodes whose device plugin answers in 20 ms (see below).
async fn roomy_nodes_with_a_quick_device_plugin() -> World {
    roomy_nodes_answered_in_20_ms(two_roomy_nodes(SchedulerConfig::default())).await
}

/// `world`, whose device plugin has answered a first bind on n1 in 20 ms, a
/// second before the test goes on.
async fn roomy_nodes_answered_in_20_ms(world: World) -> World {
    let (s, memory, clock) = world;
    assert_eq!(placed_on(&s, &memory, "p0").await, "n1");
    bound_and_locked(&s, &memory, "p0").await;
    clock.advance(Duration::from_millis(20));
    device_plugin_releases(&s, &memory).await;
    clock.advance(Duration::from_secs(1));
    (s, memory, clock)
}

#[tokio::test]
async fn pods_that_come_faster_than_a_quick_device_plugin_answers_fill_nodes_side_by_side() {
    let (s, memory, _clock) = roomy_nodes_with_a_quick_device_plugin().await;
    // Three pods within one 20 ms turn: one node would hand its lock on too
    // slowly for them, so the third goes to the empty node, within the
    // default tolerance of the fuller one (7.5 points emptier).
    assert_eq!(placed_on(&s, &memory, "a1").await, "n1");
    assert_eq!(placed_on(&s, &memory, "a2").await, "n1");
    assert_eq!(placed_on(&s, &memory, "a3").await, "n2");
    // Both nodes have binds ahead now: the one with fewer takes the next.
    assert_eq!(placed_on(&s, &memory, "a4").await, "n2");
}

#[tokio::test]
async fn a_burst_opens_no_more_nodes_side_by_side_than_pods_come_in_one_turn() {
    let world = roomy_nodes(
        3,
        SchedulerConfig {
            busy_node_tolerance: Some(100.0),
            ..SchedulerConfig::default()
        },
    );
    let (s, memory, clock) = roomy_nodes_answered_in_20_ms(world).await;
    let all = ["n1", "n2", "n3"];
    // Three pods in one turn: two nodes fill side by side.
    assert_eq!(placed_among(&s, &memory, "a1", &all).await, "n1");
    assert_eq!(placed_among(&s, &memory, "a2", &all).await, "n1");
    let second = placed_among(&s, &memory, "a3", &all).await;
    assert_ne!(second, "n1");
    // A turn later, three more: their binds queue on the two nodes, and two
    // nodes are what pods coming at that pace need, so the third stays empty.
    clock.advance(Duration::from_millis(30));
    assert_eq!(placed_among(&s, &memory, "b1", &all).await, "n1");
    assert_eq!(placed_among(&s, &memory, "b2", &all).await, "n1");
    assert_eq!(placed_among(&s, &memory, "b3", &all).await, second);
}

#[tokio::test]
async fn before_any_bind_takes_a_lock_the_pace_of_pods_alone_does_not_fill_nodes_side_by_side() {
    // No bind here has taken a lock (a cluster file's binds take none that a
    // device plugin answers): pods placed at once keep filling binpack's node
    // while its binds ahead would end within a second.
    let (s, memory, _clock) = two_roomy_nodes(SchedulerConfig::default());
    for name in ["a1", "a2", "a3", "a4"] {
        assert_eq!(placed_on(&s, &memory, name).await, "n1", "{name}");
    }
}

#[tokio::test]
async fn a_burst_behind_the_first_lock_taken_fills_nodes_side_by_side_before_any_answer() {
    let (s, memory, _clock) = two_roomy_nodes(SchedulerConfig::default());
    assert_eq!(placed_on(&s, &memory, "p0").await, "n1");
    bound_and_locked(&s, &memory, "p0").await;
    // The lock is held, no answer yet: a hold is taken to last 100 ms, and a
    // third pod within it goes to the empty node.
    assert_eq!(placed_on(&s, &memory, "a1").await, "n1");
    assert_eq!(placed_on(&s, &memory, "a2").await, "n2");
}

#[tokio::test]
async fn pods_that_come_no_faster_than_a_quick_device_plugin_answers_keep_filling_one_node() {
    let (s, memory, clock) = roomy_nodes_with_a_quick_device_plugin().await;
    // One pod per 30 ms turn of a device plugin answering in 20 ms: binpack
    // fills n1, the binds ahead there notwithstanding.
    for name in ["a1", "a2", "a3", "a4"] {
        assert_eq!(placed_on(&s, &memory, name).await, "n1", "{name}");
        clock.advance(Duration::from_millis(30));
    }
}

#[tokio::test]
async fn a_node_whose_device_plugin_is_slow_to_answer_passes_the_pod_to_one_nearly_as_good() {
    let (s, memory, clock) = two_nodes(Some(100.0));
    assert_eq!(placed_on(&s, &memory, "p0").await, "n1");
    bound_and_locked(&s, &memory, "p0").await;
    // Held half a second without an answer: a pod sent there would wait.
    clock.advance(Duration::from_millis(500));
    assert_eq!(placed_on(&s, &memory, "p1").await, "n2");
    // Once the device plugin answered, binpack goes back to the fuller node.
    device_plugin_releases(&s, &memory).await;
    assert_eq!(placed_on(&s, &memory, "p2").await, "n1");
}

#[tokio::test]
async fn without_a_tolerance_or_a_nearly_as_good_node_the_pod_waits_for_the_busy_one() {
    for tolerance in [None, Some(0.0)] {
        let (s, memory, clock) = two_nodes(tolerance);
        assert_eq!(placed_on(&s, &memory, "p0").await, "n1");
        bound_and_locked(&s, &memory, "p0").await;
        clock.advance(Duration::from_millis(500));
        assert_eq!(placed_on(&s, &memory, "p1").await, "n1", "{tolerance:?}");
    }
}

#[tokio::test]
async fn binds_ahead_that_would_outlast_the_bind_budget_send_the_pod_past_the_tolerance() {
    let (s, memory, clock) = two_roomy_nodes(SchedulerConfig {
        busy_node_tolerance: Some(0.0),
        node_lock_retry_timeout: Duration::from_secs(3),
        ..SchedulerConfig::default()
    });
    // The device plugin took half a second to answer the first bind.
    assert_eq!(placed_on(&s, &memory, "p0").await, "n1");
    bound_and_locked(&s, &memory, "p0").await;
    clock.advance(Duration::from_millis(500));
    device_plugin_releases(&s, &memory).await;
    // Binpack queues pods on n1 while six binds ahead end within three seconds
    // (no other node is within a tolerance of 0)...
    for name in ["p1", "p2", "p3", "p4", "p5", "p6", "p7"] {
        assert_eq!(placed_on(&s, &memory, name).await, "n1", "{name}");
    }
    // ...but a seventh would keep the next pod past the bind's budget.
    assert_eq!(placed_on(&s, &memory, "p8").await, "n2");
}

#[tokio::test]
async fn before_any_answer_a_burst_fills_a_node_only_as_far_as_a_slow_device_plugin_binds_in_time()
{
    let (s, memory, _clock) = two_roomy_nodes(SchedulerConfig {
        busy_node_tolerance: Some(0.0),
        node_lock_retry_timeout: Duration::from_secs(15),
        ..SchedulerConfig::default()
    });
    // No lock was ever released: each bind ahead is taken to last a second,
    // so fifteen binds ahead are the most a pod may wait behind.
    for n in 0..16 {
        assert_eq!(placed_on(&s, &memory, &format!("p{n}")).await, "n1", "p{n}");
    }
    assert_eq!(placed_on(&s, &memory, "p16").await, "n2");
}

#[tokio::test]
async fn a_nearly_as_good_node_with_fewer_binds_ahead_is_passed_over_too_if_they_outlast_the_budget()
 {
    let (s, memory, clock) = roomy_nodes(
        3,
        SchedulerConfig {
            busy_node_tolerance: Some(10.0),
            node_lock_retry_timeout: Duration::from_secs(3),
            ..SchedulerConfig::default()
        },
    );
    // The device plugin took half a second: six binds ahead end within the
    // three-second budget, seven do not.
    assert_eq!(placed_among(&s, &memory, "p0", &["n1"]).await, "n1");
    bound_and_locked(&s, &memory, "p0").await;
    clock.advance(Duration::from_millis(500));
    device_plugin_releases(&s, &memory).await;
    // n1, binpack's choice, has twelve binds on their way; n2, a few pods
    // emptier (within the tolerance), eight; n3 is empty, beyond the tolerance.
    for n in 1..=12 {
        assert_eq!(
            placed_among(&s, &memory, &format!("a{n}"), &["n1"]).await,
            "n1"
        );
    }
    for n in 1..=8 {
        assert_eq!(
            placed_among(&s, &memory, &format!("b{n}"), &["n2"]).await,
            "n2"
        );
    }
    // n2 has fewer binds ahead than n1 but would not bind the pod in time
    // either: it goes to n3, where it would.
    let all = ["n1", "n2", "n3"];
    assert_eq!(placed_among(&s, &memory, "next", &all).await, "n3");
}

#[tokio::test]
async fn a_search_for_a_spare_node_looks_each_candidate_up_in_the_ledger_once() {
    let (s, memory, clock) = roomy_nodes(
        3,
        SchedulerConfig {
            busy_node_tolerance: Some(10.0),
            node_lock_retry_timeout: Duration::from_secs(3),
            ..SchedulerConfig::default()
        },
    );
    assert_eq!(placed_among(&s, &memory, "p0", &["n1"]).await, "n1");
    bound_and_locked(&s, &memory, "p0").await;
    clock.advance(Duration::from_millis(500));
    device_plugin_releases(&s, &memory).await;
    for n in 1..=12 {
        placed_among(&s, &memory, &format!("a{n}"), &["n1"]).await;
    }
    for n in 1..=8 {
        placed_among(&s, &memory, &format!("b{n}"), &["n2"]).await;
    }
    // Every way of finding a spare node is tried before n3 takes the pod
    // (the test above): each pass over the candidates once cost a lookup of
    // every candidate, and at 5,000 candidates ten times the whole `/filter`.
    let all = ["n1", "n2", "n3"];
    let before = crate::ledger::Ledger::rank_lookups();
    assert_eq!(placed_among(&s, &memory, "next", &all).await, "n3");
    assert_eq!(
        crate::ledger::Ledger::rank_lookups() - before,
        all.len(),
        "one lookup per candidate"
    );
}
