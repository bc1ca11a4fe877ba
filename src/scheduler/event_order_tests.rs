//! Watch events arrive late and out of order with respect to our own writes; these
//! tests pin down how the ledger treats them.

use super::{Scheduler, SchedulerConfig};
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::{ExtenderArgs, ExtenderBindingArgs};
use crate::ledger::PodPhase;
use crate::metrics::Metrics;
use crate::scheduler::registration::NODE_DEVICE_PLUGIN_NOT_READY;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::HashSet;
use std::sync::Arc;

fn node(name: &str, extra: serde_json::Value) -> Node {
    let mut v = serde_json::json!({"metadata": {"name": name, "annotations": {
        "hami.io/node-nvidia-register": r#"[{"id":"GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true,"index":0,"mode":"hami-core"}]"#}}});
    if let (Some(obj), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        for (k, val) in extra {
            if k == "annotations" {
                if let Some(a) = obj["metadata"]["annotations"].as_object_mut() {
                    for (ak, av) in val.as_object().into_iter().flatten() {
                        a.insert(ak.clone(), av.clone());
                    }
                }
            } else {
                obj.insert(k.clone(), val.clone());
            }
        }
    }
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {"schedulerName": "vgpu-scheduler",
                 "containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}}}]}
    }))
    .unwrap()
}

fn scheduler(nodes: Vec<Node>, config: SchedulerConfig) -> (Arc<Scheduler>, Arc<MemoryCluster>) {
    let memory = Arc::new(MemoryCluster::new(nodes.clone(), Vec::new(), false));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Arc::new(Scheduler::new(config, api, Arc::new(Metrics::new())));
    s.load(&ClusterObjects {
        nodes,
        ..Default::default()
    });
    (s, memory)
}

async fn filter(s: &Scheduler, p: &Pod) -> Vec<String> {
    s.filter(ExtenderArgs {
        pod: Some(p.clone()),
        nodes: None,
        node_names: Some(["n1"].into_iter().collect()),
    })
    .await
    .node_names
    .unwrap_or_default()
}

fn phase(s: &Scheduler, uid: &str) -> Option<PodPhase> {
    s.with_ledger(|l| l.pod(uid).map(|p| p.phase.clone()))
}

#[tokio::test]
async fn an_old_event_without_annotations_does_not_drop_a_fresh_reservation() {
    let (s, _) = scheduler(
        vec![node("n1", serde_json::json!({}))],
        SchedulerConfig::default(),
    );
    let p = pod("a");
    assert_eq!(filter(&s, &p).await, vec!["n1"]);
    // The creation event of the pod arrives after our reservation.
    s.apply_pod(&p);
    assert!(matches!(
        phase(&s, "uid-a"),
        Some(PodPhase::Reserved { .. })
    ));
    // A finished pod releases it.
    let mut done = p.clone();
    done.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Failed".into()),
        ..Default::default()
    });
    s.apply_pod(&done);
    assert_eq!(phase(&s, "uid-a"), None);
}

#[tokio::test]
async fn an_event_of_our_own_patch_keeps_the_reservation_deadline_and_binding_phase() {
    let (s, memory) = scheduler(
        vec![node("n1", serde_json::json!({}))],
        SchedulerConfig::default(),
    );
    let p = pod("b");
    filter(&s, &p).await;
    let patched = memory.get_pod("ns", "b").await.unwrap().unwrap();
    let before = phase(&s, "uid-b");
    s.apply_pod(&patched);
    assert_eq!(phase(&s, "uid-b"), before);
    let bound = s
        .bind(ExtenderBindingArgs {
            pod_name: Some("b".into()),
            pod_namespace: Some("ns".into()),
            pod_uid: Some("uid-b".into()),
            node: Some("n1".into()),
        })
        .await;
    assert!(bound.error.is_empty(), "{}", bound.error);
    // The stale unbound event must not turn the bound pod back into a reservation.
    s.apply_pod(&patched);
    assert!(!matches!(
        phase(&s, "uid-b"),
        Some(PodPhase::Reserved { .. })
    ));
    let now_bound = memory.get_pod("ns", "b").await.unwrap().unwrap();
    s.apply_pod(&now_bound);
    assert_eq!(phase(&s, "uid-b"), Some(PodPhase::Bound));
}

#[tokio::test]
async fn a_relist_releases_pods_that_vanished_but_not_newer_reservations() {
    // The device plugin answers, so each bind finds the node lock free.
    let memory = Arc::new(MemoryCluster::new(
        vec![node("n1", serde_json::json!({}))],
        Vec::new(),
        true,
    ));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Scheduler::new(SchedulerConfig::default(), api, Arc::new(Metrics::new()));
    s.load(&ClusterObjects {
        nodes: vec![node("n1", serde_json::json!({}))],
        ..Default::default()
    });
    for name in ["c", "d"] {
        filter(&s, &pod(name)).await;
        bind(&s, name).await;
    }
    // The watch echoes both placements (written at bind), confirming them.
    for name in ["c", "d"] {
        s.apply_pod(&memory.get_pod("ns", name).await.unwrap().unwrap());
    }
    let list_started = std::time::Instant::now();
    // Reserved while the list was being read: not in the list, must survive.
    filter(&s, &pod("e")).await;
    let keep: HashSet<String> = ["uid-d".to_string()].into();
    let released = s.retain_pods(&keep, list_started);
    assert_eq!(released, vec!["ns/c on n1".to_string()]);
    assert_eq!(s.with_ledger(|l| l.pod_count()), 2);
    // A deleted pod is final: a stale list that still has it does not bring it back.
    let c = memory.get_pod("ns", "c").await.unwrap().unwrap();
    s.apply_pod_snapshot(&c, std::time::Instant::now());
    s.apply_pod(&c);
    assert_eq!(phase(&s, "uid-c"), None);
}

#[tokio::test]
async fn a_stale_snapshot_does_not_touch_a_pod_changed_after_it_started() {
    let (s, memory) = scheduler(
        vec![node("n1", serde_json::json!({}))],
        SchedulerConfig::default(),
    );
    let p = pod("f");
    let before = std::time::Instant::now();
    filter(&s, &p).await;
    // The list (started before the filter) shows the pod without annotations.
    s.apply_pod_snapshot(&p, before);
    assert!(matches!(
        phase(&s, "uid-f"),
        Some(PodPhase::Reserved { .. })
    ));
    s.retain_pods(&HashSet::new(), before);
    assert!(phase(&s, "uid-f").is_some());
    let _ = memory;
}

#[tokio::test]
async fn late_events_do_not_undo_a_released_reservation() {
    let (s, memory) = scheduler(
        vec![node("n1", serde_json::json!({}))],
        SchedulerConfig::default(),
    );
    let p = pod("g");
    filter(&s, &p).await;
    bind(&s, "g").await;
    let annotated = memory.get_pod("ns", "g").await.unwrap().unwrap();
    // Our rollback: release and clear.
    s.with_ledger_mut(|l| l.mark_local_released("uid-g"));
    // The late event of the earlier patch still carries the annotations: stale.
    s.apply_pod(&annotated);
    assert_eq!(phase(&s, "uid-g"), None);
    // The event of the clearing patch confirms; afterwards events are authoritative.
    s.apply_pod(&p);
    assert_eq!(phase(&s, "uid-g"), None);
    s.apply_pod(&annotated);
    assert!(phase(&s, "uid-g").is_some());
}

/// Binds the pod `name` (namespace `ns`) to n1; the bind writes its placement.
/// Asserts it bound.
pub(super) async fn bind(s: &Scheduler, name: &str) {
    let bound = s
        .bind(ExtenderBindingArgs {
            pod_name: Some(name.into()),
            pod_namespace: Some("ns".into()),
            pod_uid: Some(format!("uid-{name}")),
            node: Some("n1".into()),
        })
        .await;
    assert!(bound.error.is_empty(), "{}", bound.error);
}

#[test]
fn a_node_whose_device_plugin_went_away_is_unusable_until_it_returns() {
    let config = SchedulerConfig {
        check_device_plugin_health: true,
        ..SchedulerConfig::default()
    };
    let stale = node(
        "n1",
        serde_json::json!({"annotations": {"hami.io/node-handshake": "Requesting_2020-01-01 00:00:00"},
                           "status": {"allocatable": {"nvidia.com/gpu": "0"}}}),
    );
    let (s, _) = scheduler(vec![], config);
    s.apply_node(&stale);
    let reason = s.with_ledger(|l| l.node("n1").and_then(|e| e.unusable()));
    assert_eq!(reason, Some(NODE_DEVICE_PLUGIN_NOT_READY));
    let back = node(
        "n1",
        serde_json::json!({"annotations": {"hami.io/node-handshake": "Requesting_2020-01-01 00:00:00"},
                           "status": {"allocatable": {"nvidia.com/gpu": "10"}}}),
    );
    s.apply_node(&back);
    assert_eq!(
        s.with_ledger(|l| l.node("n1").and_then(|e| e.unusable())),
        None
    );
    // A fresh unanswered handshake is still within its grace period.
    let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string();
    let fresh = node(
        "n1",
        serde_json::json!({"annotations": {"hami.io/node-handshake": format!("Requesting_{now}")}}),
    );
    s.apply_node(&fresh);
    assert_eq!(
        s.with_ledger(|l| l.node("n1").and_then(|e| e.unusable())),
        None
    );
}
