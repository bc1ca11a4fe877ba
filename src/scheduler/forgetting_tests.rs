//! What the scheduler remembers of a pod that left: a finished pod stays final
//! (a late event showing it holding GPUs books nothing) until its bookkeeping
//! is forgotten, between `FORGET_AFTER` and `FORGET_AFTER + PRUNE_EVERY` after
//! it finished; pods still holding GPUs are never forgotten.

use super::gang_tests::Cluster;
use crate::freshness::{FORGET_AFTER, PRUNE_EVERY};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::time::Duration;

/// A vGPU pod that names no queue or group, asking for one GPU.
fn plain_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"schedulerName": "vgpu-scheduler",
            "containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}}}]}
    }))
    .expect("pod")
}

/// Places the pod through `/filter` and `/bind`, and returns it as the watch
/// shows it bound.
async fn place(c: &Cluster, name: &str) -> Pod {
    c.add(&plain_pod(name));
    let nodes = c.filter(name).await.expect("fits");
    c.bind(name, &nodes[0]).await.expect("binds");
    let mut bound = c.pod(name).await.expect("stored");
    bound.spec.get_or_insert_with(Default::default).node_name = Some(nodes[0].clone());
    bound
}

fn remembered(c: &Cluster, uid: &str) -> bool {
    c.s.with_ledger(|l| l.meta(uid).is_some())
}

#[tokio::test]
async fn a_finished_pod_stays_final_for_an_hour_then_is_forgotten_while_running_pods_are_kept() {
    let c = Cluster::new(&[("n1", 2)], Default::default());
    let done = place(&c, "done").await;
    place(&c, "runs").await;
    assert_eq!(c.held(), 2);

    let mut finished = done.clone();
    finished.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
    c.s.apply_pod(&finished);
    assert_eq!(c.held(), 1, "the finished pod's GPU is free");

    let minute = Duration::from_secs(60);
    let mut forgotten_at = None;
    for minutes in 1..=(FORGET_AFTER + PRUNE_EVERY).as_secs() / 60 + 1 {
        c.clock.advance(minute);
        c.s.expire_reservations(false).await;
        if remembered(&c, "uid-done") {
            // Still final: the pod as it was bound, arriving late, books nothing.
            c.s.apply_pod(&done);
            assert_eq!(c.held(), 1, "a late event brought back a finished pod");
        } else if forgotten_at.is_none() {
            forgotten_at = Some(Duration::from_secs(minutes * 60));
        }
        assert!(
            remembered(&c, "uid-runs"),
            "a running pod is never forgotten"
        );
    }
    let forgotten_at = forgotten_at.expect("forgotten");
    assert!(
        forgotten_at >= FORGET_AFTER && forgotten_at <= FORGET_AFTER + PRUNE_EVERY,
        "forgotten after {forgotten_at:?}"
    );
}
