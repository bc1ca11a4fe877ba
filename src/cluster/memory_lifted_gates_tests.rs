//! The store tells a caller that follows gated pods which had a gate lifted, so
//! that it reads back only those instead of every gated pod after every cycle.

use super::MemoryCluster;
use crate::cluster::api::{ClusterApi, GateLift};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn gated(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c"}],
                 "schedulingGates": [{"name": "example.com/gate"}]}
    }))
    .expect("pod")
}

/// Lifts `example.com/gate` from pod `ml/<name>`.
async fn lift(store: &MemoryCluster, name: &str) -> Result<(), crate::cluster::api::ApiError> {
    store
        .remove_scheduling_gate("ml", name, &GateLift::only("example.com/gate"))
        .await
}

#[tokio::test]
async fn lifted_gates_are_told_once_in_the_order_they_were_lifted() {
    let store = MemoryCluster::new(Vec::new(), Vec::new(), false).recording_lifted_gates();
    for name in ["a", "b", "c"] {
        store.insert_pod(&gated(name));
    }
    for name in ["c", "a"] {
        lift(&store, name).await.expect("lifted");
    }
    // Not there any more: nothing lifted.
    lift(&store, "a").await.expect("no-op");
    let lifted: Vec<String> = store
        .take_lifted_gates()
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(lifted, ["ml/c", "ml/a"]);
    assert!(store.take_lifted_gates().is_empty());
    let b = store.get_pod("ml", "b").await.expect("read").expect("b");
    assert!(b.spec.and_then(|s| s.scheduling_gates).is_some());
}

#[tokio::test]
async fn a_store_not_asked_to_record_keeps_no_list() {
    let store = MemoryCluster::new(Vec::new(), Vec::new(), false);
    store.insert_pod(&gated("a"));
    lift(&store, "a").await.expect("lifted");
    assert!(store.take_lifted_gates().is_empty());
}
