//! Tidal reclaim through the scheduler, on a cluster file: inference takes GPUs
//! back from training a whole gang at a time, waits gated on a pipelined plan
//! until its victims are gone, then is released and binds on the GPUs they held.
//! Training never takes from inference, and a restart between the evictions and
//! the gate lift loses nothing.

use super::gang_tests::{Cluster, member, podgroup, queue};
use super::{GangConfig, Scheduler};
use crate::clock::Clock;
use crate::cluster::api::ClusterApi;
use crate::gang::PLAN_DEADLINE;
use crate::gang::pipelined_plan::{PIPELINED_PLAN, PipelinedPlan};
use crate::volcano::framework::GangPhase;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::collections::BTreeSet;

/// The seed's configuration: capacity-card decides who reclaims from whom by
/// service type and card quota.
pub(super) const TIDAL: &str = "actions: enqueue, allocate, backfill, reclaim, preempt
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
  - name: conformance
    enableReclaimable: false
- plugins:
  - name: capacity-card
    arguments:
      cardUnlimitedCpuMemory: true
";

/// `n` nodes of 2 whole GPUs, the tidal queues and configuration.
fn tidal_cluster(nodes: usize) -> Cluster {
    let names: Vec<String> = (1..=nodes).map(|i| format!("n{i}")).collect();
    let spec: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 2)).collect();
    let c = Cluster::new(&spec, GangConfig::default());
    make_tidal(&c);
    c
}

/// The tidal configuration and its two queues: `inference` (high priority, not
/// reclaimable) and `training` (low priority, reclaimable).
pub(super) fn make_tidal(c: &Cluster) {
    c.s.set_gang_conf(crate::volcano::load_conf(TIDAL).unwrap());
    c.s.apply_queue(&queue(
        "inference",
        json!({"priority": 80000, "reclaimable": false}),
    ));
    c.s.apply_queue(&queue(
        "training",
        json!({"priority": 20000, "reclaimable": true}),
    ));
}

/// The PodGroup of a training gang in queue `training`, minMember `min`.
pub(super) fn training_group(group: &str, min: u32) -> serde_json::Value {
    podgroup(
        group,
        min,
        "training",
        json!({"annotations": {"volcano.sh/service.type": "training"}}),
    )
}

/// A training gang of `n` one-GPU members in queue `training`.
fn training(c: &Cluster, group: &str, n: u32) {
    c.s.apply_podgroup(&training_group(group, n));
    for i in 0..n {
        c.add(&member(&format!("{group}-{i}"), group, i));
    }
}

/// An inference service pod of one GPU in queue `inference`.
fn inference(c: &Cluster, name: &str) {
    c.add(&inference_pod(name));
}

/// An inference service pod of one GPU in queue `inference`, gated, not yet
/// added (a gang of one: no PodGroup).
pub(super) fn inference_pod(name: &str) -> Pod {
    outside_volcano_groups(
        name,
        30,
        &[
            ("scheduling.volcano.sh/queue-name", "inference"),
            ("volcano.sh/service.type", "inference"),
        ],
    )
}

/// A gated one-GPU pod in no Volcano PodGroup, with these annotations.
fn outside_volcano_groups(name: &str, created: u32, annotations: &[(&str, &str)]) -> Pod {
    let mut pod = member(name, "unused", created);
    let anns = pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    anns.remove("scheduling.k8s.io/group-name");
    for (k, v) in annotations {
        anns.insert((*k).into(), (*v).into());
    }
    pod
}

/// Plans, filters and binds every member of `group` (`n` of them).
async fn start(c: &Cluster, group: &str, n: u32) {
    c.s.run_gang_cycle().await;
    for i in 0..n {
        let name = format!("{group}-{i}");
        let nodes = c
            .filter(&name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        c.bind(&name, &nodes[0]).await.unwrap();
    }
}

async fn exists(c: &Cluster, name: &str) -> bool {
    c.pod(name).await.is_some()
}

async fn annotation(c: &Cluster, name: &str, key: &str) -> Option<String> {
    c.pod(name)
        .await
        .and_then(|p| p.metadata.annotations)
        .and_then(|a| a.get(key).cloned())
}

fn evict_events(c: &Cluster) -> Vec<(String, String)> {
    c.memory
        .events()
        .into_iter()
        .filter(|e| e.reason == "Evict")
        .map(|e| (e.pod, e.message))
        .collect()
}

#[tokio::test]
async fn inference_reclaims_a_whole_training_gang_and_binds_where_it_was() {
    let c = tidal_cluster(2);
    training(&c, "big", 2);
    training(&c, "small", 2);
    start(&c, "big", 2).await;
    start(&c, "small", 2).await;
    assert_eq!(c.held(), 4, "the cluster is full of training");

    inference(&c, "svc");
    c.s.run_gang_cycle().await;
    // One whole gang went, and nothing else; the service waits, gated, on a
    // pipelined plan naming the GPUs the gang held.
    let gone: BTreeSet<String> = {
        let mut gone = BTreeSet::new();
        for p in ["big-0", "big-1", "small-0", "small-1"] {
            if !exists(&c, p).await {
                gone.insert(p.to_string());
            }
        }
        gone
    };
    assert!(
        gone == BTreeSet::from(["big-0".into(), "big-1".into()])
            || gone == BTreeSet::from(["small-0".into(), "small-1".into()]),
        "a whole gang and only one: {gone:?}"
    );
    let events = evict_events(&c);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .all(|(_, m)| m.contains("Reclaimed") && m.contains("ml/svc")),
        "{events:?}"
    );
    assert!(c.gated("svc").await);

    // The next cycle publishes the plan (its victims are gone) and releases it.
    c.s.run_gang_cycle().await;
    assert!(!c.gated("svc").await);
    assert!(annotation(&c, "svc", PIPELINED_PLAN).await.is_none());
    assert!(annotation(&c, "svc", PLAN_DEADLINE).await.is_some());
    let node = c.filter("svc").await.unwrap();
    assert_eq!(node.len(), 1);
    c.bind("svc", &node[0]).await.unwrap();
    assert_eq!(c.held(), 3);
    assert_eq!(
        c.s.with_ledger(|l| l.recomputed_node_usage()),
        c.s.with_ledger(|l| l.incremental_node_usage().clone())
    );
    let text = c.s.metrics().render(
        &crate::ledger::Ledger::default(),
        &crate::gang::GangView::default(),
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("vgpu_scheduler_evictions_total{")
                && l.contains("action=\"reclaim\"")
                && l.contains("queue=\"training\"")
                && l.contains("service_type=\"training\"")
                && l.contains("outcome=\"evicted\"")
                && l.ends_with(" 2")),
        "{text}"
    );
    // A deleted Queue takes its series with it.
    c.s.forget_queue("training");
    let text = c.s.metrics().render(
        &crate::ledger::Ledger::default(),
        &crate::gang::GangView::default(),
    );
    assert!(!text.contains("queue=\"training\""), "{text}");
}

#[tokio::test]
async fn training_never_takes_gpus_from_inference() {
    let c = tidal_cluster(1);
    inference(&c, "svc-a");
    inference(&c, "svc-b");
    c.s.run_gang_cycle().await;
    for name in ["svc-a", "svc-b"] {
        let node = c.filter(name).await.unwrap();
        c.bind(name, &node[0]).await.unwrap();
    }
    training(&c, "train", 1);
    for _ in 0..3 {
        c.s.run_gang_cycle().await;
    }
    assert!(exists(&c, "svc-a").await && exists(&c, "svc-b").await);
    assert!(evict_events(&c).is_empty());
    assert!(c.gated("train-0").await);
    assert_eq!(c.verdict("ml/train").phase, GangPhase::Inqueue);
}

#[tokio::test]
async fn a_native_group_disrupted_only_whole_is_reclaimed_whole_above_its_minimum() {
    let c = tidal_cluster(1);
    // Kubernetes' own PodGroup: a minimum of one, but its members go together.
    c.s.apply_native_podgroup(&json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "pair", "namespace": "ml", "uid": "pg-pair",
            "annotations": {"scheduling.volcano.sh/queue-name": "training",
                            "volcano.sh/service.type": "training"}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, "disruptionMode": "PodGroup"}
    }));
    for i in 0..2 {
        c.add(&outside_volcano_groups(
            &format!("pair-{i}"),
            i,
            &[(crate::gang::scheduling_group::SCHEDULING_GROUP, "pair")],
        ));
    }
    start(&c, "pair", 2).await;
    assert_eq!(c.held(), 2, "the node is full of the group");
    inference(&c, "svc");
    c.s.run_gang_cycle().await;
    assert!(
        !exists(&c, "pair-0").await && !exists(&c, "pair-1").await,
        "the whole group goes, not one member: {:?}",
        evict_events(&c)
    );
    assert_eq!(evict_events(&c).len(), 2);
}

#[tokio::test]
async fn a_gang_with_a_member_still_to_bind_is_not_evicted_half() {
    // Both members are planned and released; one is bound, the other still holds
    // its reservation. Evicting the bound one alone would leave the other to start
    // below minMember, and a reserved pod cannot be evicted: the gang is no victim
    // until it runs whole.
    let c = tidal_cluster(1);
    training(&c, "train", 2);
    c.s.run_gang_cycle().await;
    let node = c.filter("train-0").await.unwrap();
    c.bind("train-0", &node[0]).await.unwrap();
    assert!(!c.gated("train-1").await);

    inference(&c, "svc");
    c.s.run_gang_cycle().await;
    assert!(exists(&c, "train-0").await, "{:?}", evict_events(&c));
    assert!(evict_events(&c).is_empty());
    assert!(c.gated("svc").await);

    // Once the gang runs whole it goes whole.
    let node = c.filter("train-1").await.unwrap();
    c.bind("train-1", &node[0]).await.unwrap();
    c.s.run_gang_cycle().await;
    assert!(!exists(&c, "train-0").await && !exists(&c, "train-1").await);
    assert_eq!(evict_events(&c).len(), 2);
}

#[tokio::test]
async fn a_restart_after_the_evictions_publishes_the_plan_and_evicts_nobody_twice() {
    let c = tidal_cluster(1);
    training(&c, "train", 2);
    start(&c, "train", 2).await;
    inference(&c, "svc");
    // The eviction is seen before the plan is published: the first cycle writes
    // the plan and evicts; then the scheduler "restarts".
    c.s.run_gang_cycle().await;
    let plan = annotation(&c, "svc", PIPELINED_PLAN)
        .await
        .expect("pipelined plan written");
    let plan = PipelinedPlan::decode(&plan).unwrap();
    assert_eq!(plan.victims.len(), 2);
    assert_eq!(evict_events(&c).len(), 2);

    // A new scheduler reads the cluster as it is now.
    let restarted = restart(&c, &["svc", "train-0", "train-1"]).await;
    restarted.run_gang_cycle().await;
    restarted.run_gang_cycle().await;
    let svc = c.memory.get_pod("ml", "svc").await.unwrap().unwrap();
    let anns = svc.metadata.annotations.clone().unwrap_or_default();
    assert!(
        anns.contains_key("hami.io/vgpu-devices-allocated"),
        "{anns:?}"
    );
    assert!(!anns.contains_key(PIPELINED_PLAN));
    assert_eq!(
        anns.get("hami.io/vgpu-node").map(String::as_str),
        Some(plan.node.as_str())
    );
    assert!(
        !svc.spec
            .unwrap()
            .scheduling_gates
            .unwrap_or_default()
            .iter()
            .any(|g| g.name == crate::gang::book::GANG_GATE)
    );
    assert_eq!(evict_events(&c).len(), 2, "nobody evicted twice");
}

#[tokio::test]
async fn a_restarted_scheduler_keeps_the_room_promised_to_a_waiting_plan() {
    let c = tidal_cluster(1);
    training(&c, "train", 2);
    start(&c, "train", 2).await;
    // A plan as a previous run wrote it, whose victims are still leaving.
    let victims: BTreeSet<String> = ["uid-train-0".to_string(), "uid-train-1".to_string()].into();
    let devices =
        crate::device::allocation_codec::decode_pod_devices("GPU-n1-0,NVIDIA,80000,0:;").unwrap();
    let plan = PipelinedPlan {
        node: "n1".into(),
        devices,
        init_count: 0,
        victims,
        deadline: c.clock.wall().timestamp() + 120,
        evicted_by: Default::default(),
    };
    let mut svc: Pod = member("svc", "unused", 30);
    let anns = svc
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    anns.remove("scheduling.k8s.io/group-name");
    anns.insert(
        "scheduling.volcano.sh/queue-name".into(),
        "inference".into(),
    );
    anns.insert(PIPELINED_PLAN.into(), plan.encode());
    c.add(&svc);
    let pledged =
        c.s.with_ledger(|l| l.pledge_of("uid-svc").map(|p| p.victims.len()));
    assert_eq!(pledged, Some(2));
    // Room promised is room taken: an ordinary one-GPU pod finds no GPU free.
    let node = c.s.with_ledger(|l| l.node("n1").unwrap().effective.clone());
    assert_eq!(node[0].used, 2, "{node:?}");

    // The victims leave: the plan is booked and published.
    for v in ["train-0", "train-1"] {
        c.memory.evict_pod("ml", v).await.unwrap();
        c.s.forget_pod(&format!("uid-{v}"));
    }
    c.s.run_gang_cycle().await;
    c.s.run_gang_cycle().await;
    assert!(!c.gated("svc").await);
    assert_eq!(
        annotation(&c, "svc", "hami.io/vgpu-node").await.as_deref(),
        Some("n1")
    );
    assert!(
        evict_events(&c).is_empty(),
        "the recovered plan evicted nobody: its victims were already leaving"
    );
}

#[tokio::test]
async fn a_plan_whose_victims_never_leave_lapses_and_releases_the_room() {
    let c = tidal_cluster(1);
    training(&c, "train", 2);
    start(&c, "train", 2).await;
    let plan = PipelinedPlan {
        node: "n1".into(),
        devices: crate::device::allocation_codec::decode_pod_devices("GPU-n1-0,NVIDIA,80000,0:;")
            .unwrap(),
        init_count: 0,
        victims: ["uid-train-0".to_string(), "uid-train-1".to_string()].into(),
        deadline: c.clock.wall().timestamp() + 60,
        evicted_by: Default::default(),
    };
    let mut svc: Pod = member("svc", "unused", 30);
    let anns = svc
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    anns.insert(PIPELINED_PLAN.into(), plan.encode());
    c.add(&svc);
    assert!(c.s.with_ledger(|l| l.pledge_of("uid-svc").is_some()));
    c.clock.advance(std::time::Duration::from_secs(61));
    c.s.expire_reservations(true).await;
    assert!(c.s.with_ledger(|l| l.pledge_of("uid-svc").is_none()));
    assert!(annotation(&c, "svc", PIPELINED_PLAN).await.is_none());
    let node = c.s.with_ledger(|l| l.node("n1").unwrap().effective.clone());
    assert_eq!(
        node[0].used, 1,
        "only the training pod's own slot: {node:?}"
    );
}

/// A fresh scheduler on the same cluster store, fed what the store holds now
/// (of `pods`).
async fn restart(c: &Cluster, pods: &[&str]) -> std::sync::Arc<Scheduler> {
    let api: std::sync::Arc<dyn ClusterApi> = c.memory.clone();
    let s = std::sync::Arc::new(Scheduler::with_clock(
        c.s.config().clone(),
        api,
        std::sync::Arc::new(crate::metrics::Metrics::new()),
        c.clock.clone(),
    ));
    s.set_gang_conf(crate::volcano::load_conf(TIDAL).unwrap());
    for n in &c.nodes {
        let node = c.memory.get_node(n).await.unwrap().unwrap();
        s.apply_node(&node);
    }
    s.apply_queue(&queue(
        "inference",
        json!({"priority": 80000, "reclaimable": false}),
    ));
    s.apply_queue(&queue(
        "training",
        json!({"priority": 20000, "reclaimable": true}),
    ));
    for name in pods {
        if let Some(pod) = c.memory.get_pod("ml", name).await.unwrap() {
            s.apply_pod(&pod);
        }
    }
    s
}

#[tokio::test]
async fn training_that_fills_a_nodes_cpu_is_still_reclaimed_with_predicates_on() {
    // Each node has 64 CPUs; two training workers of 32 fill them. kube-scheduler's
    // CPU check would refuse the inference pod now, but not once the workers are
    // gone: making room must not be refused for CPU the victims free.
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    make_tidal(&c);
    let with_predicates = TIDAL.replace(
        "  - name: capacity-card\n",
        "  - name: predicates\n  - name: capacity-card\n",
    );
    c.s.set_gang_conf(crate::volcano::load_conf(&with_predicates).unwrap());
    c.s.apply_podgroup(&training_group("big", 2));
    for i in 0..2 {
        let mut p = serde_json::to_value(member(&format!("big-{i}"), "big", i)).unwrap();
        p["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": "32", "memory": "1Gi"});
        c.add(&serde_json::from_value(p).unwrap());
    }
    start(&c, "big", 2).await;
    assert_eq!(c.held(), 2);
    inference(&c, "svc");
    c.s.run_gang_cycle().await;
    assert!(
        !exists(&c, "big-0").await && !exists(&c, "big-1").await,
        "the CPU-heavy gang is reclaimed: {:?}",
        c.verdict("ml/svc")
    );
}

#[tokio::test]
async fn a_plan_withdrawn_is_not_brought_back_by_an_older_event() {
    // The commit wrote the plan, an eviction was refused and the plan was
    // withdrawn; the watch then delivers the event from before the withdrawal.
    let c = tidal_cluster(1);
    training(&c, "train", 2);
    start(&c, "train", 2).await;
    let devices =
        crate::device::allocation_codec::decode_pod_devices("GPU-n1-0,NVIDIA,80000,0:;").unwrap();
    let plan = PipelinedPlan {
        node: "n1".into(),
        devices,
        init_count: 0,
        victims: ["uid-train-0".to_string()].into(),
        deadline: c.clock.wall().timestamp() + 120,
        evicted_by: Default::default(),
    };
    let mut svc = inference_pod("svc");
    svc.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(PIPELINED_PLAN.into(), plan.encode());
    c.s.with_ledger_mut(|l| l.mark_local_released("uid-svc"));
    c.add(&svc);
    assert!(c.s.with_ledger(|l| l.pledge_of("uid-svc").is_none()));
    // The event that shows the withdrawal confirms it; a later plan is read again.
    c.add(&inference_pod("svc"));
    c.add(&svc);
    assert!(c.s.with_ledger(|l| l.pledge_of("uid-svc").is_some()));
}
