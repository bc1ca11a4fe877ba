//! Gang and queue scheduling through the scheduler: plans commit whole or not at
//! all, gates are lifted together, `/filter` honours plans, strict gangs wait at
//! `/bind`, and timed-out gangs leave nothing behind.

use super::{GangConfig, Scheduler, SchedulerConfig};
use crate::clock::ManualClock;
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::{ExtenderArgs, ExtenderBindingArgs};
use crate::gang::book::GANG_GATE;
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// A node with `gpus` H100s of one slot each (a pod takes a whole card).
pub(super) fn gpu_node(name: &str, gpus: usize) -> Node {
    let devices: Vec<Value> = (0..gpus)
        .map(|i| {
            json!({"id": format!("GPU-{name}-{i}"), "count": 1, "devmem": 81559,
                "devcore": 100, "type": "NVIDIA H100 80GB HBM3", "numa": 0, "health": true,
                "index": i, "mode": "hami-core"})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            "hami.io/node-nvidia-register": Value::Array(devices).to_string()}},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi"}}
    }))
    .unwrap()
}

/// [`gpu_node`] labelled with its hostname, the topology pod affinity terms
/// name most.
pub(super) fn hostname_gpu_node(name: &str, gpus: usize) -> Node {
    let mut node = gpu_node(name, gpus);
    node.metadata
        .labels
        .get_or_insert_default()
        .insert("kubernetes.io/hostname".into(), name.to_string());
    node
}

/// A gated member of PodGroup `group` asking for one whole GPU.
pub(super) fn member(name: &str, group: &str, created: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "creationTimestamp": format!("2026-01-01T00:00:{created:02}Z"),
            "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"schedulerName": "vgpu-scheduler",
            "schedulingGates": [{"name": GANG_GATE}],
            "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "80000"}}}]}
    }))
    .unwrap()
}

pub(super) fn podgroup(name: &str, min: u32, queue: &str, extra: Value) -> Value {
    let mut v = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("pg-{name}"),
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": min, "queue": queue}
    });
    if let (Some(obj), Some(extra)) = (v["metadata"].as_object_mut(), extra.as_object()) {
        for (k, val) in extra {
            obj.insert(k.clone(), val.clone());
        }
    }
    v
}

pub(super) fn queue(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": "Open"}
    })
}

pub(super) struct Cluster {
    pub s: Arc<Scheduler>,
    pub memory: Arc<MemoryCluster>,
    pub nodes: Vec<String>,
    /// The scheduler's clock: tests move it instead of waiting.
    pub clock: Arc<ManualClock>,
}

impl Cluster {
    pub fn new(nodes: &[(&str, usize)], gang: GangConfig) -> Self {
        Self::from_nodes(nodes.iter().map(|(n, g)| gpu_node(n, *g)).collect(), gang)
    }

    /// A cluster of these nodes.
    pub fn from_nodes(nodes_v: Vec<Node>, gang: GangConfig) -> Self {
        Self::from_nodes_with_api(nodes_v, gang, |memory| -> Arc<dyn ClusterApi> { memory })
    }

    /// A cluster whose scheduler talks to the store through `api` (a wrapper of
    /// the in-memory store, e.g. one whose evictions take time).
    pub fn with_api(
        nodes: &[(&str, usize)],
        gang: GangConfig,
        api: impl FnOnce(Arc<MemoryCluster>) -> Arc<dyn ClusterApi>,
    ) -> Self {
        Self::from_nodes_with_api(
            nodes.iter().map(|(n, g)| gpu_node(n, *g)).collect(),
            gang,
            api,
        )
    }

    fn from_nodes_with_api(
        nodes_v: Vec<Node>,
        gang: GangConfig,
        api: impl FnOnce(Arc<MemoryCluster>) -> Arc<dyn ClusterApi>,
    ) -> Self {
        let names: Vec<String> = nodes_v
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let memory = Arc::new(MemoryCluster::new(nodes_v.clone(), Vec::new(), true));
        let api = api(memory.clone());
        let config = SchedulerConfig {
            gang,
            ..SchedulerConfig::default()
        };
        let clock = ManualClock::new();
        let s = Arc::new(Scheduler::with_clock(
            config,
            api,
            Arc::new(Metrics::new()),
            clock.clone(),
        ));
        s.load(&ClusterObjects {
            nodes: nodes_v,
            ..Default::default()
        });
        Self {
            s,
            memory,
            nodes: names,
            clock,
        }
    }

    /// PodGroup `group` (minMember `min`, queue `queue`) and `count` gated
    /// members named `<prefix><i>`, created a second apart.
    pub fn gang(&self, group: &str, min: u32, queue: &str, prefix: &str, count: u32) {
        self.s
            .apply_podgroup(&podgroup(group, min, queue, json!({})));
        for i in 0..count {
            self.add(&member(&format!("{prefix}{i}"), group, i));
        }
    }

    pub fn add(&self, pod: &Pod) {
        self.memory.insert_pod(pod);
        self.s.apply_pod(pod);
    }

    pub async fn pod(&self, name: &str) -> Option<Pod> {
        self.pod_in("ml", name).await
    }

    pub async fn pod_in(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.memory.get_pod(namespace, name).await.unwrap()
    }

    pub async fn gated(&self, name: &str) -> bool {
        self.pod(name)
            .await
            .and_then(|p| p.spec.and_then(|s| s.scheduling_gates))
            .is_some_and(|g| g.iter().any(|g| g.name == GANG_GATE))
    }

    pub async fn filter(&self, name: &str) -> Result<Vec<String>, String> {
        self.filter_in("ml", name).await
    }

    pub async fn filter_in(&self, namespace: &str, name: &str) -> Result<Vec<String>, String> {
        let pod = self.pod_in(namespace, name).await.expect("pod exists");
        let r = self
            .s
            .filter(ExtenderArgs {
                pod: Some(pod),
                nodes: None,
                node_names: Some(self.nodes.iter().collect()),
            })
            .await;
        if !r.error.is_empty() {
            return Err(r.error);
        }
        match r.node_names {
            Some(n) if !n.is_empty() => Ok(n),
            _ => Err(r.failed_nodes.values().next().cloned().unwrap_or_default()),
        }
    }

    pub async fn bind(&self, name: &str, node: &str) -> Result<(), String> {
        // The store keeps only a slim copy of a bound pod; a watch would deliver it
        // whole (priority, preemption policy, requests), so keep the whole pod.
        let whole = self.pod(name).await;
        // kube-scheduler binds a pod once (the API server refuses a Binding for a
        // pod assigned already), and the store's copy of a bound pod is the slim
        // one: shown to the scheduler as a new version, it would take away what
        // every version of a pod carries (affinity, priority, requests), which
        // no real update can.
        let assigned = whole
            .as_ref()
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if assigned {
            return Err(format!("pod ml/{name} is already assigned to a node"));
        }
        let r = self
            .s
            .bind(ExtenderBindingArgs {
                pod_name: Some(name.into()),
                pod_namespace: Some("ml".into()),
                pod_uid: Some(format!("uid-{name}")),
                node: Some(node.into()),
            })
            .await;
        if r.error.is_empty() {
            // The cluster file has no watch: show the scheduler the bound pod.
            if let (Some(mut p), Some(stored)) = (whole, self.pod(name).await) {
                p.metadata.annotations = stored.metadata.annotations;
                if let Some(spec) = p.spec.as_mut() {
                    spec.node_name = Some(node.to_string());
                    spec.scheduling_gates = None;
                }
                self.s.apply_pod(&p);
            }
            Ok(())
        } else {
            Err(r.error)
        }
    }

    pub fn verdict(&self, gang: &str) -> crate::volcano::framework::GangVerdict {
        self.s
            .gang_view()
            .gangs
            .iter()
            .find(|g| g.gang == gang)
            .cloned()
            .unwrap_or_else(|| panic!("no verdict for {gang}"))
    }

    /// The pods evicted since last asked, as `namespace/name`.
    pub fn evicted(&self) -> Vec<String> {
        self.memory
            .take_evicted()
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    pub fn held(&self) -> usize {
        self.s.with_ledger(|l| l.pod_count())
    }

    pub fn status(&self, object: &str) -> Value {
        self.memory
            .volcano_statuses()
            .into_iter()
            .find(|(k, _)| k.to_string() == object)
            .map(|(_, v)| v)
            .unwrap_or(Value::Null)
    }
}

fn gang_config() -> GangConfig {
    GangConfig::default()
}

/// Strict gangs whose members wait at most `strict_wait` at `/bind`.
fn strict_config(strict_wait: Duration) -> GangConfig {
    GangConfig {
        strict: true,
        strict_wait,
        ..gang_config()
    }
}

/// Filters and binds members `<prefix>0` .. `<prefix>{n-1}`, each in a task of its
/// own (strict binds wait at the barrier for each other).
fn filter_and_bind_each(
    c: &Arc<Cluster>,
    prefix: &str,
    n: usize,
) -> Vec<tokio::task::JoinHandle<Result<(), String>>> {
    (0..n)
        .map(|i| {
            let c = c.clone();
            let name = format!("{prefix}{i}");
            tokio::spawn(async move {
                let node = c.filter(&name).await.unwrap().remove(0);
                c.bind(&name, &node).await
            })
        })
        .collect()
}

async fn schedule(c: &Cluster, name: &str) -> String {
    let nodes = c
        .filter(name)
        .await
        .unwrap_or_else(|e| panic!("filter {name}: {e}"));
    assert_eq!(nodes.len(), 1, "{name}: {nodes:?}");
    c.bind(name, &nodes[0])
        .await
        .unwrap_or_else(|e| panic!("bind {name}: {e}"));
    nodes[0].clone()
}

#[tokio::test]
async fn a_gang_of_four_that_fits_is_released_together_and_binds() {
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], gang_config());
    c.gang("train", 4, "default", "w", 4);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    let mut gpus = std::collections::BTreeSet::new();
    for i in 0..4 {
        let name = format!("w{i}");
        assert!(!c.gated(&name).await, "{name} still gated");
        let pod = c.pod(&name).await.unwrap();
        let anns = pod.metadata.annotations.unwrap();
        assert!(
            anns.contains_key("hami.io/vgpu-devices-to-allocate"),
            "{name}"
        );
        assert!(anns.contains_key(crate::gang::PLAN_DEADLINE), "{name}");
        gpus.insert(anns["hami.io/vgpu-devices-allocated"].clone());
    }
    assert_eq!(gpus.len(), 4, "every member has its own GPU: {gpus:?}");
    assert!(
        c.memory
            .events()
            .iter()
            .any(|e| e.pod == "w3" && e.reason == "GangScheduled" && e.message.contains("node n")),
        "members are told where their gang was placed"
    );
    for i in 0..4 {
        schedule(&c, &format!("w{i}")).await;
    }
    let v = c.verdict("ml/train");
    assert_eq!(v.ready, 4);
    c.s.run_gang_cycle().await;
    let status = c.status("PodGroup ml/train");
    assert_eq!(status["phase"], "Running", "{status}");
    assert_eq!(status["running"], 4, "{status}");
}

#[tokio::test]
async fn a_gang_of_eight_on_six_free_gpus_places_nothing_and_says_why() {
    let c = Cluster::new(&[("n1", 2), ("n2", 2), ("n3", 2)], gang_config());
    c.gang("big", 8, "default", "b", 8);
    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(c.held(), 0, "nothing may stay reserved");
    for i in 0..8 {
        assert!(c.gated(&format!("b{i}")).await);
    }
    let v = c.verdict("ml/big");
    assert_eq!(v.reason, Some("NotEnoughResources"));
    let message = v.message.unwrap();
    assert!(message.contains("tasks in gang unschedulable"), "{message}");
    assert!(message.contains("did not fit any node"), "{message}");
    // Each gated member is told why, once per change of the reason.
    c.s.run_gang_cycle().await;
    let told: Vec<_> = c
        .memory
        .events()
        .into_iter()
        .filter(|e| e.pod == "b0" && e.reason == "GangWaiting")
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].message.contains("tasks in gang unschedulable"),
        "{told:?}"
    );
    let status = c.status("PodGroup ml/big");
    assert_eq!(status["phase"], "Inqueue", "{status}");
    assert_eq!(status["conditions"][0]["type"], "Unschedulable", "{status}");
    assert_eq!(
        status["conditions"][0]["reason"], "NotEnoughResources",
        "{status}"
    );
}

#[tokio::test]
async fn two_gangs_that_fit_alone_but_not_together_run_one_after_the_other() {
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], gang_config());
    c.s.apply_podgroup(&podgroup("first", 3, "default", json!({})));
    c.s.apply_podgroup(&podgroup("second", 3, "default", json!({})));
    for i in 0..3 {
        c.add(&member(&format!("a{i}"), "first", i));
        c.add(&member(&format!("b{i}"), "second", 10 + i));
    }
    assert_eq!(c.s.run_gang_cycle().await, 1);
    for i in 0..3 {
        assert!(!c.gated(&format!("a{i}")).await);
        assert!(
            c.gated(&format!("b{i}")).await,
            "no member of the second gang may hold GPUs"
        );
    }
    assert_eq!(c.held(), 3);
    for i in 0..3 {
        schedule(&c, &format!("a{i}")).await;
    }
    assert_eq!(c.s.run_gang_cycle().await, 0);
    // The first gang finishes.
    for i in 0..3 {
        let mut p = c.pod(&format!("a{i}")).await.unwrap();
        p.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        c.s.apply_pod(&p);
    }
    assert_eq!(c.s.run_gang_cycle().await, 1);
    for i in 0..3 {
        assert!(!c.gated(&format!("b{i}")).await);
        schedule(&c, &format!("b{i}")).await;
    }
    assert_eq!(
        c.verdict("ml/first").phase,
        crate::volcano::framework::GangPhase::Completed
    );
}

#[tokio::test]
async fn pods_without_our_gate_plan_their_whole_gang_at_filter() {
    let c = Cluster::new(&[("n1", 2)], gang_config());
    c.s.apply_podgroup(&podgroup("pair", 2, "default", json!({})));
    for i in 0..2 {
        let mut p = member(&format!("u{i}"), "pair", i);
        p.spec.as_mut().unwrap().scheduling_gates = None;
        c.add(&p);
    }
    let n0 = schedule(&c, "u0").await;
    // The sibling was planned together with it.
    let sibling = c.pod("u1").await.unwrap();
    assert!(
        sibling
            .metadata
            .annotations
            .unwrap()
            .contains_key(crate::gang::PLAN_DEADLINE)
    );
    let n1 = schedule(&c, "u1").await;
    assert_eq!((n0.as_str(), n1.as_str()), ("n1", "n1"));
    // A lone member of an incomplete gang waits with the reason.
    c.s.apply_podgroup(&podgroup("trio", 3, "default", json!({})));
    let mut p = member("t0", "trio", 5);
    p.spec.as_mut().unwrap().scheduling_gates = None;
    c.add(&p);
    let err = c.filter("t0").await.unwrap_err();
    assert!(err.contains("1 of minMember 3 pods exist"), "{err}");
}

#[tokio::test]
async fn queue_capability_blocks_with_the_named_dimension() {
    let c = Cluster::new(&[("n1", 4)], gang_config());
    c.s.apply_queue(&queue(
        "team",
        json!({"weight": 1, "capability": {"nvidia.com/gpu": "2"}}),
    ));
    c.gang("wide", 3, "team", "q", 3);
    assert_eq!(c.s.run_gang_cycle().await, 0);
    let v = c.verdict("ml/wide");
    let message = v.message.unwrap_or_default();
    assert!(message.contains("nvidia.com/gpu"), "{message}");
    assert_eq!(c.held(), 0);
}

// Paused time: the clock moves only once every task waits, so after the sleep
// the binds have gone as far as they can (to the barrier).
#[tokio::test(start_paused = true)]
async fn strict_gangs_bind_nobody_before_min_member_arrive() {
    let c = Cluster::new(&[("n1", 3)], strict_config(Duration::from_secs(5)));
    c.gang("sync", 3, "default", "s", 3);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    let c = Arc::new(c);
    let binds = filter_and_bind_each(&c, "s", 2);
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..2 {
        let bound = c
            .pod(&format!("s{i}"))
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name;
        assert_eq!(bound, None, "s{i} bound before the quorum");
    }
    schedule(&c, "s2").await;
    for b in binds {
        b.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_strict_gang_that_misses_the_deadline_releases_every_waiter() {
    let c = Cluster::new(&[("n1", 3)], strict_config(Duration::from_millis(200)));
    c.gang("sync", 3, "default", "s", 3);
    c.s.run_gang_cycle().await;
    let c = Arc::new(c);
    let binds = filter_and_bind_each(&c, "s", 2);
    let mut errors = Vec::new();
    for b in binds {
        errors.push(b.await.unwrap().unwrap_err());
    }
    // The first to give up saw both waiters; the other then counted itself alone.
    assert!(
        errors
            .iter()
            .all(|e| e.contains("members reached bind within 200ms")),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.contains("2/3")), "{errors:?}");
    for i in 0..2 {
        let bound = c
            .pod(&format!("s{i}"))
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name;
        assert_eq!(bound, None);
    }
    // Their GPUs are free again; only the member that never came holds its plan.
    assert_eq!(c.held(), 1);
}

#[tokio::test]
async fn a_gang_that_loses_a_member_and_times_out_leaves_nothing_behind() {
    let c = Cluster::new(
        &[("n1", 4)],
        GangConfig {
            timeout: Duration::from_secs(1),
            ..gang_config()
        },
    );
    c.gang("fragile", 4, "default", "f", 4);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    schedule(&c, "f0").await;
    schedule(&c, "f1").await;
    // A member is deleted before it binds; another never comes.
    c.memory.evict_pod("ml", "f2").await.unwrap();
    c.s.forget_pod("uid-f2");
    c.s.run_gang_cycle().await;
    assert_eq!(c.verdict("ml/fragile").reason, Some("NotEnoughTasks"));
    // The plan's deadline passes.
    c.clock.advance(Duration::from_millis(2100));
    c.s.expire_reservations(true).await;
    c.s.run_gang_cycle().await;
    // The started members were evicted; no GPU stays held.
    assert!(c.pod("f0").await.is_none());
    assert!(c.pod("f1").await.is_none());
    assert_eq!(c.held(), 0);
}

#[tokio::test]
async fn a_member_whose_planned_node_disappears_is_placed_again() {
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], gang_config());
    c.gang("pair", 2, "default", "p", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    let planned =
        c.s.with_ledger(|l| l.pod("uid-p0").map(|p| p.node.clone()))
            .unwrap();
    // The planned node is gone from the cluster (kube-scheduler no longer offers it).
    c.s.forget_node(&planned);
    let remaining: Vec<String> = c.nodes.iter().filter(|n| **n != planned).cloned().collect();
    let pod = c.pod("p0").await.unwrap();
    let r =
        c.s.filter(ExtenderArgs {
            pod: Some(pod),
            nodes: None,
            node_names: Some(remaining.iter().collect()),
        })
        .await;
    assert_eq!(r.node_names, Some(vec![remaining[0].clone()]), "{r:?}");
    c.bind("p0", &remaining[0]).await.unwrap();
}

#[tokio::test]
async fn a_plain_pod_in_a_queue_is_a_gang_of_one_admitted_by_its_queue() {
    let c = Cluster::new(&[("n1", 2)], gang_config());
    c.s.apply_queue(&queue(
        "small",
        json!({"capability": {"nvidia.com/gpu": "1"}}),
    ));
    for (i, name) in ["i0", "i1"].iter().enumerate() {
        let mut p = member(name, "unused", i as u32);
        p.metadata.annotations = Some(
            [(
                "scheduling.volcano.sh/queue-name".to_string(),
                "small".to_string(),
            )]
            .into_iter()
            .collect(),
        );
        c.add(&p);
    }
    assert_eq!(c.s.run_gang_cycle().await, 1, "one pod fits the queue");
    assert!(!c.gated("i0").await);
    assert!(c.gated("i1").await, "the queue is full");
    let v = c.verdict("ml/i1");
    assert!(v.single);
    assert!(v.message.unwrap_or_default().contains("nvidia.com/gpu"));
    let queues = &c.s.gang_view().queues;
    let small = queues.iter().find(|q| q.name == "small").unwrap();
    assert_eq!(small.allocated.get("nvidia.com/gpu"), 1000);
}

#[tokio::test]
async fn a_commit_interrupted_before_the_gates_were_lifted_is_finished_after_a_restart() {
    let c = Cluster::new(&[("n1", 2)], gang_config());
    c.gang("pair", 2, "default", "r", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    // What a crash between writing the plans and lifting the gates leaves behind:
    // planned pods that still carry the gate. A new process loads them.
    let fresh = Cluster::new(&[("n1", 2)], gang_config());
    fresh
        .s
        .apply_podgroup(&podgroup("pair", 2, "default", json!({})));
    for i in 0..2 {
        let mut p = c.pod(&format!("r{i}")).await.unwrap();
        p.spec.as_mut().unwrap().scheduling_gates =
            Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: GANG_GATE.into(),
            }]);
        fresh.add(&p);
    }
    assert_eq!(fresh.held(), 2, "the plans came back from the annotations");
    fresh.s.run_gang_cycle().await;
    for i in 0..2 {
        assert!(!fresh.gated(&format!("r{i}")).await);
    }
    assert_eq!(fresh.held(), 2, "and nothing was planned twice");
    schedule(&fresh, "r0").await;
    schedule(&fresh, "r1").await;
}

#[tokio::test]
async fn a_card_quota_blocks_with_the_card_type_named() {
    let c = Cluster::new(&[("n1", 4)], gang_config());
    // Card quotas are the capacity-card plugin's, enabled as in Volcano.
    c.s.set_gang_conf(
        crate::volcano::SchedulerConf::parse(
            "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: proportion\n  - name: capacity-card\n",
        )
        .unwrap(),
    );
    let mut q = queue("cards", json!({"weight": 1}));
    q["metadata"]["annotations"] = json!({"volcano.sh/card.quota": r#"{"NVIDIA-H100":2}"#});
    c.s.apply_queue(&q);
    c.gang("trio", 3, "cards", "c", 3);
    assert_eq!(c.s.run_gang_cycle().await, 0);
    let message = c.verdict("ml/trio").message.unwrap_or_default();
    assert!(message.contains("NVIDIA-H100"), "{message}");
    assert_eq!(c.held(), 0);
    // Two fit the quota.
    c.s.apply_podgroup(&podgroup("duo", 2, "cards", json!({})));
    for i in 0..2 {
        c.add(&member(&format!("d{i}"), "duo", 10 + i));
    }
    assert_eq!(c.s.run_gang_cycle().await, 1);
    let cards = c.s.gang_view();
    let q = cards.queues.iter().find(|q| q.name == "cards").unwrap();
    assert_eq!(q.card_used.get("NVIDIA-H100"), Some(&2), "{q:?}");
}

#[tokio::test]
async fn what_a_gang_holds_beyond_its_minimum_is_reported_elastic() {
    let c = Cluster::new(&[("n1", 4)], gang_config());
    c.s.apply_queue(&queue("team", json!({"weight": 1})));
    c.gang("wide", 2, "team", "e", 3);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    c.s.run_gang_cycle().await;
    let view = c.s.gang_view();
    let team = view.queues.iter().find(|q| q.name == "team").unwrap();
    assert_eq!(team.allocated.get("nvidia.com/gpu"), 3000);
    assert_eq!(
        team.elastic.get("nvidia.com/gpu"),
        1000,
        "one member beyond minMember 2"
    );
}

#[tokio::test]
async fn an_extra_member_of_a_running_gang_that_does_not_fit_gets_the_per_node_reasons() {
    let c = Cluster::new(&[("n1", 2)], gang_config());
    c.gang("duo", 2, "default", "x", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    schedule(&c, "x0").await;
    schedule(&c, "x1").await;
    // A third, ungated member arrives (the webhook was down): no GPU is left.
    let mut extra = member("x2", "duo", 3);
    extra.spec.as_mut().unwrap().scheduling_gates = None;
    c.add(&extra);
    let reason = c.filter("x2").await.unwrap_err();
    assert_eq!(
        reason, "2/2 CardTimeSlicingExhausted",
        "HAMi's reason, not a gang one"
    );
}

#[tokio::test]
async fn role_minimums_above_min_member_do_not_hold_a_gang_back() {
    // Like Volcano: when minMember is below the sum of minTaskMember, the
    // per-role checks are skipped and minMember alone decides.
    let c = Cluster::new(&[("n1", 4)], gang_config());
    let mut pg = podgroup("roles", 2, "default", json!({}));
    pg["spec"]["minTaskMember"] = json!({"worker": 3});
    c.s.apply_podgroup(&pg);
    for i in 0..2 {
        let mut p = member(&format!("w{i}"), "roles", i);
        p.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("volcano.sh/task-spec".into(), "worker".into());
        c.add(&p);
    }
    assert_eq!(c.s.run_gang_cycle().await, 1);
    assert!(!c.gated("w0").await && !c.gated("w1").await);
    assert_eq!(
        c.verdict("ml/roles").phase,
        crate::volcano::framework::GangPhase::Running
    );
}

#[tokio::test]
async fn an_ungated_pod_planned_at_filter_counts_what_its_queue_already_holds() {
    let c = Cluster::new(&[("n1", 4)], gang_config());
    c.s.apply_queue(&queue(
        "small",
        json!({"capability": {"nvidia.com/gpu": "1"}}),
    ));
    let in_queue = |name: &str, i: u32, gated: bool| {
        let mut p = member(name, "unused", i);
        p.metadata.annotations = Some(
            [(
                "scheduling.volcano.sh/queue-name".to_string(),
                "small".to_string(),
            )]
            .into_iter()
            .collect(),
        );
        if !gated {
            p.spec.as_mut().unwrap().scheduling_gates = None;
        }
        p
    };
    c.add(&in_queue("first", 0, true));
    assert_eq!(c.s.run_gang_cycle().await, 1);
    schedule(&c, "first").await;
    // A pod that reached kube-scheduler without our gate: the queue is full.
    c.add(&in_queue("second", 1, false));
    let err = c.filter("second").await.unwrap_err();
    assert!(err.contains("nvidia.com/gpu"), "{err}");
    assert_eq!(c.held(), 1);
}

#[tokio::test]
async fn a_strict_gang_recreated_under_the_same_podgroup_waits_at_bind_again() {
    let c = Cluster::new(&[("n1", 4)], strict_config(Duration::from_millis(300)));
    c.gang("sync", 2, "default", "a", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    let c = Arc::new(c);
    let binds = filter_and_bind_each(&c, "a", 2);
    for b in binds {
        b.await.unwrap().unwrap();
    }
    // The job restarts: its pods are deleted and made again.
    for i in 0..2 {
        c.memory.evict_pod("ml", &format!("a{i}")).await.unwrap();
        c.s.forget_pod(&format!("uid-a{i}"));
    }
    c.s.run_gang_cycle().await;
    for i in 0..2 {
        c.add(&member(&format!("b{i}"), "sync", 10 + i));
    }
    assert_eq!(c.s.run_gang_cycle().await, 1);
    // One member alone must not pass the barrier.
    let node = c.filter("b0").await.unwrap().remove(0);
    let err = c.bind("b0", &node).await.unwrap_err();
    assert!(err.contains("1/2 members reached bind"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_repeated_bind_of_a_strict_member_never_releases_its_gpus() {
    // kube-scheduler restarted while a strict member waited at the barrier and
    // sent its bind again: both requests wait, and once the quorum is there the
    // one that comes second must not undo the first.
    let c = Cluster::new(&[("n1", 2)], strict_config(Duration::from_secs(5)));
    c.gang("sync", 2, "default", "d", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    let c = Arc::new(c);
    let node = c.filter("d0").await.unwrap().remove(0);
    let mut binds = Vec::new();
    for _ in 0..2 {
        let (c, node) = (c.clone(), node.clone());
        binds.push(tokio::spawn(async move { c.bind("d0", &node).await }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    schedule(&c, "d1").await;
    for b in binds {
        b.await.unwrap().unwrap();
    }
    let d0 = c.pod("d0").await.unwrap();
    assert_eq!(d0.spec.unwrap().node_name.as_deref(), Some(node.as_str()));
    assert!(
        d0.metadata
            .annotations
            .unwrap()
            .contains_key("hami.io/vgpu-devices-allocated"),
        "the bound member lost its allocation"
    );
    assert_eq!(c.held(), 2, "the bound member's GPUs were released");
}

#[tokio::test]
async fn a_gang_that_ran_long_ago_and_lost_a_member_is_not_evicted() {
    let c = Cluster::new(
        &[("n1", 2)],
        GangConfig {
            timeout: Duration::from_secs(1),
            ..gang_config()
        },
    );
    c.gang("old", 2, "default", "o", 2);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    schedule(&c, "o0").await;
    schedule(&c, "o1").await;
    // It started an hour ago (its plan deadline is long past); now one member goes
    // away for good.
    let mut patch = crate::cluster::api::MetadataPatch::default();
    let long_ago = (chrono::Utc::now().timestamp() - 3600).to_string();
    patch
        .annotations
        .insert(crate::gang::PLAN_DEADLINE.into(), Some(long_ago));
    c.memory
        .patch_pod_metadata("ml", "o0", &patch)
        .await
        .unwrap();
    c.s.apply_pod(&c.pod("o0").await.unwrap());
    c.memory.evict_pod("ml", "o1").await.unwrap();
    c.s.forget_pod("uid-o1");
    c.s.run_gang_cycle().await;
    assert!(c.pod("o0").await.is_some(), "the running member stays");
}

#[tokio::test]
async fn an_admitted_gang_reserves_its_minimum_in_its_queue() {
    let c = Cluster::new(&[("n1", 2)], gang_config());
    // One of the two GPUs is taken by an ordinary pod: the gang is admitted (the
    // cluster has two) but cannot be placed now.
    let mut plain = member("plain", "none", 0);
    plain.metadata.annotations = None;
    plain.spec.as_mut().unwrap().scheduling_gates = None;
    c.add(&plain);
    schedule(&c, "plain").await;
    c.s.apply_queue(&queue("team", json!({"weight": 1})));
    let mut group = podgroup("wait", 2, "team", json!({}));
    group["spec"]["minResources"] = json!({"nvidia.com/gpu": "2"});
    c.s.apply_podgroup(&group);
    for i in 0..2 {
        c.add(&member(&format!("q{i}"), "wait", i));
    }
    assert_eq!(c.s.run_gang_cycle().await, 0, "two GPUs are not free");
    c.s.run_gang_cycle().await;
    let view = c.s.gang_view();
    let team = view.queues.iter().find(|q| q.name == "team").unwrap();
    assert_eq!(
        c.verdict("ml/wait").phase,
        crate::volcano::framework::GangPhase::Inqueue
    );
    assert_eq!(team.inqueue.get("nvidia.com/gpu"), 2000, "{team:?}");
    assert_eq!(team.allocated.get("nvidia.com/gpu"), 0);
}

#[test]
fn node_relists_and_planning_cycles_never_deadlock() {
    // A relist that finds a node gone updates the ledger and the gang book while
    // planning cycles read both; the two must take the locks in the same order.
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], gang_config());
    c.gang("g", 2, "default", "m", 2);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let planner = {
        let (s, stop) = (c.s.clone(), stop.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rt.block_on(s.run_gang_cycle());
            }
        })
    };
    let (done, finished) = std::sync::mpsc::channel();
    {
        let s = c.s.clone();
        let existing: std::collections::HashSet<String> =
            ["n1".to_string(), "n2".to_string()].into();
        std::thread::spawn(move || {
            for _ in 0..3000 {
                s.apply_node(&gpu_node("flaky", 1));
                s.retain_nodes(&existing);
            }
            let _ = done.send(());
        });
    }
    let relisted = finished.recv_timeout(Duration::from_secs(60));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        relisted.is_ok(),
        "relists stalled: the ledger and the gang book deadlocked"
    );
    planner.join().expect("planner thread");
}

#[tokio::test]
async fn whole_card_pods_without_a_memory_request_are_placed_under_proportion() {
    // nvidia.com/gpu alone: HAMi gives the pod the whole card's memory. The
    // queue's request must count that memory, or its deserved share has none
    // and the charge of the first member makes it look overused.
    let c = Cluster::new(&[("n1", 2), ("n2", 2)], GangConfig::default());
    c.s.apply_queue(&queue("team", json!({"weight": 1})));
    c.s.apply_podgroup(&podgroup("g", 3, "team", json!({})));
    for i in 0..3 {
        let mut p = serde_json::to_value(member(&format!("g-{i}"), "g", i)).unwrap();
        p["spec"]["containers"][0]["resources"]["limits"] = json!({"nvidia.com/gpu": "1"});
        c.add(&serde_json::from_value(p).unwrap());
    }
    c.s.run_gang_cycle().await;
    assert_eq!(c.held(), 3, "{:?}", c.verdict("ml/g"));
}
