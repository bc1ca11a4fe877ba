//! Restart safety in live mode: the server is killed (SIGKILL) after `/filter`
//! and before `/bind`, and again after `/bind`; each new process rebuilds exactly
//! the state the old one had from the cluster alone, keeps the reservation, binds
//! it, and never books a GPU twice.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::Value;
use std::time::Duration;

const NS: &str = "ml";

fn assert_same_state(before: &support::State, after: &support::State, what: &str) {
    let (a, b) = (stable(before), stable(after));
    assert!(
        a == b,
        "{what}: /debug/state differs after restart:\n{}\nbefore: {a}\nafter: {b}",
        json_diff(&a, &b).join("\n")
    );
}

/// Per-GPU usage in `/debug/state` equals what the pods in the cluster hold.
fn assert_matches_cluster(api: &FakeApiServer, state: &support::State) {
    let cluster = cluster_usage(api);
    for g in state.gpus() {
        let held = cluster.get(&g.id).copied().unwrap_or_default();
        assert_eq!(
            g.usage, held,
            "GPU {} on {}: ledger vs cluster annotations",
            g.id, g.node
        );
    }
}

#[tokio::test]
async fn restart_after_filter_and_after_bind_keeps_the_same_state() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 2, 10);
    add_node(&api, "gpu-b", 2, 10);
    // Already running before we start, written by an earlier scheduler.
    let old_devices = format!("{},NVIDIA,40000,50:;", gpu_id("gpu-b", 1));
    create_pod(&api, running_pod(NS, "old", "gpu-b", &old_devices, 1));

    let mut first = LiveServer::start(&api, &[]).await;
    create_pod(&api, gpu_pod(NS, "bound-early", 2, 30000, 25));
    first
        .schedule(&api, NS, "bound-early", &["gpu-a", "gpu-b"])
        .await;
    device_plugin_allocated(&api, NS, "bound-early");
    create_pod(&api, gpu_pod(NS, "waiting", 1, 20000, 30));
    let waiting_node = first
        .filter_one(&api, NS, "waiting", &["gpu-a", "gpu-b"])
        .await;
    create_pod(&api, gpu_pod(NS, "other", 1, 8000, 10));
    first
        .filter_one(&api, NS, "other", &["gpu-a", "gpu-b"])
        .await;
    let waiting_uid = uid_of(&api_pod(&api, NS, "waiting"));

    // Let the watch catch up with our own writes (bind-phase success, Running).
    let (before, ok) = first
        .wait_state(Duration::from_secs(5), |s| {
            s.pods().len() == 4 && s.pods().iter().filter(|p| p["phase"] == "Bound").count() == 2
        })
        .await;
    assert!(ok, "4 pods, 2 bound: {}", before.0);
    assert!(over_capacity(&before.gpus()).is_empty());

    // (a) killed between /filter and /bind. The placement is written by the bind,
    // so the reservations of the two pods only filtered lived in memory: the new
    // process has the bound pods exactly as the cluster has them, and nothing of
    // the others, whose binds book them again.
    first.kill();
    let second = LiveServer::start(&api, &[]).await;
    let after = second.state().await;
    let bound_before: Vec<&Value> = before
        .pods()
        .iter()
        .filter(|p| p["phase"] == "Bound")
        .collect();
    let after_pods: Vec<&Value> = after.pods().iter().collect();
    assert_eq!(after_pods, bound_before, "killed after filter: {}", after.0);
    assert!(after.pod(&waiting_uid).is_none(), "{}", after.0);
    assert_matches_cluster(&api, &after);
    let waiting = before.expect_pod(&waiting_uid);
    assert!(
        annotation(
            &api.get("Node", None, &waiting_node).expect("node"),
            "hami.io/mutex.lock"
        )
        .is_none_or(|l| !l.contains(",waiting")),
        "no node lock for a pod that was only filtered"
    );
    let devices_reserved = waiting["devices"].clone();

    // The new process binds the reservation the old one made.
    let error = second
        .bind(NS, "waiting", &waiting_uid, &waiting_node)
        .await;
    assert_eq!(
        error,
        "",
        "bind after restart; log:\n{}",
        second.log_tail(30)
    );
    assert_eq!(
        api_pod(&api, NS, "waiting")["spec"]["nodeName"],
        waiting_node.as_str()
    );
    let (bound, ok) = second
        .wait_state(Duration::from_secs(5), |s| {
            s.pod(&waiting_uid).is_some_and(|p| p["phase"] == "Bound")
        })
        .await;
    assert!(ok, "{}", bound.0);
    assert_eq!(
        bound.expect_pod(&waiting_uid)["devices"],
        devices_reserved,
        "same GPUs as filtered"
    );
    assert!(over_capacity(&bound.gpus()).is_empty(), "{}", bound.0);
    assert_matches_cluster(&api, &bound);

    // (b) killed after /bind.
    let mut second = second;
    second.kill();
    let third = LiveServer::start(&api, &[]).await;
    let after = third.state().await;
    assert_same_state(&bound, &after, "killed after bind");
    let waiting = after.expect_pod(&waiting_uid);
    assert_eq!(waiting["phase"], "Bound", "{waiting}");
    assert_eq!(waiting["devices"], devices_reserved);
    assert!(over_capacity(&after.gpus()).is_empty(), "{}", after.0);
    assert_matches_cluster(&api, &after);

    // The restarted server still schedules on the node whose lock the dead process
    // left (its owner already got its GPUs).
    device_plugin_allocated(&api, NS, "waiting");
    create_pod(&api, gpu_pod(NS, "later", 1, 1000, 5));
    let started = std::time::Instant::now();
    let node = third
        .filter_one(&api, NS, "later", &[waiting_node.as_str()])
        .await;
    let uid = uid_of(&api_pod(&api, NS, "later"));
    let error = third.bind(NS, "later", &uid, &node).await;
    assert_eq!(error, "");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no wait for a dead lock"
    );
}

#[tokio::test]
async fn restart_with_an_expired_reservation_does_not_resurrect_it() {
    // A reservation made by a process that died more than the TTL ago: the new
    // process must not hold those GPUs (it counts the TTL from hami.io/vgpu-time).
    // The TTL is long, so only a TTL counted from that time can have run out
    // while the test waits.
    let ttl = ["--reservation-ttl", "1h"];
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    let mut first = LiveServer::start(&api, &ttl).await;
    create_pod(&api, gpu_pod(NS, "abandoned", 1, 50000, 60));
    first.filter_one(&api, NS, "abandoned", &["gpu-a"]).await;
    let uid = uid_of(&api_pod(&api, NS, "abandoned"));
    first.kill();
    // This process writes the placement at /bind; a filter of HAMi's (or of an
    // earlier version) wrote it at /filter, and those annotations stay in the
    // cluster when that process dies (nobody cleared them).
    let devices = format!("{},NVIDIA,50000,60:;", gpu_id("gpu-a", 0));
    let now = chrono::Utc::now().timestamp().to_string();
    set_annotations(
        &api,
        "Pod",
        Some(NS),
        "abandoned",
        &[
            ("hami.io/vgpu-node", Some("gpu-a")),
            ("hami.io/vgpu-time", Some(&now)),
            ("hami.io/vgpu-devices-to-allocate", Some(&devices)),
            ("hami.io/vgpu-devices-allocated", Some(&devices)),
        ],
    );
    let p = api_pod(&api, NS, "abandoned");
    assert!(annotation(&p, "hami.io/vgpu-node").is_some(), "{p}");
    let filtered_at: i64 = annotation(&p, "hami.io/vgpu-time")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("hami.io/vgpu-time in seconds: {p}"));
    // Rather than wait out the TTL, move the filter time back past it: the pod
    // looks as if the process had died two hours ago.
    let long_ago = (filtered_at - 2 * 3600).to_string();
    set_annotations(
        &api,
        "Pod",
        Some(NS),
        "abandoned",
        &[("hami.io/vgpu-time", Some(&long_ago))],
    );
    let second = LiveServer::start(&api, &ttl).await;
    let (state, ok) = second
        .wait_state(Duration::from_secs(5), |s| s.pod(&uid).is_none())
        .await;
    assert!(
        ok,
        "expired reservation released after restart: {}",
        state.0
    );
    assert_eq!(total_usage(&state), support::Usage::default());
    assert!(
        api.wait_until(Duration::from_secs(5), |a| {
            a.get("Pod", Some(NS), "abandoned")
                .is_some_and(|p| annotation(&p, "hami.io/vgpu-node").is_none())
        })
        .await,
        "the new leader clears the expired reservation's annotations: {}",
        api_pod(&api, NS, "abandoned")
    );
}
