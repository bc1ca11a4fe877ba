//! Black-box tests of `/bind`: idempotence, stale and unknown pods, the HAMi node
//! lock (`hami.io/mutex.lock`), events, and the reservation TTL.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::*;

fn one_gpu_node(name: &str, extra: &[(&str, &str)]) -> Value {
    node(name, &[h100(&gpu_uuid(name, 0), 0)], extra)
}

/// A Pending pod without GPUs that is not bound anywhere (a lock owner).
fn pending_pod(ns: &str, name: &str) -> Value {
    pod(ns, name)
        .container(container("app", &[("cpu", "1")]))
        .build()
}

fn lock_cluster() -> Vec<Value> {
    let recent = format!("{},team,other", rfc3339_ago(10));
    let stale = "2020-01-01T00:00:00Z,team,other".to_string();
    let orphan = format!("{},team,gone", rfc3339_ago(10));
    vec![
        one_gpu_node("free", &[]),
        one_gpu_node("locked", &[("hami.io/mutex.lock", &recent)]),
        one_gpu_node("stale-lock", &[("hami.io/mutex.lock", &stale)]),
        one_gpu_node("orphan-lock", &[("hami.io/mutex.lock", &orphan)]),
        // Legacy values (bare RFC 3339, no owner) written by old HAMi versions.
        one_gpu_node("legacy-lock", &[("hami.io/mutex.lock", &rfc3339_ago(10))]),
        one_gpu_node(
            "legacy-old-lock",
            &[("hami.io/mutex.lock", "2020-01-01T00:00:00Z")],
        ),
        // HAMi never clears an unparsable lock; this scheduler replaces it.
        one_gpu_node("junk-lock", &[("hami.io/mutex.lock", "not a lock value")]),
        pending_pod("team", "other"),
    ]
}

/// Records success events too (HAMi's behaviour), which these tests check.
async fn lock_server() -> Server {
    Server::start(
        lock_cluster(),
        &[
            "--node-lock-retry-timeout",
            "1s",
            "--placement-events",
            "all",
        ],
    )
    .await
}

#[tokio::test]
async fn bind_after_filter_binds_and_is_idempotent() {
    let server = lock_server().await;
    let p = pod("default", "trainer").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["free"]).await,
        json!({"NodeNames": ["free"]})
    );
    let state = server.state().await;
    assert_eq!(state.expect_pod(pod_uid(&p))["phase"], "Reserved");

    let (status, text) = server
        .post_raw(
            "/bind",
            bind_args("default", "trainer", pod_uid(&p), "free").to_string(),
        )
        .await;
    assert_eq!((status, text.as_str()), (200, "{}"));
    let state = server.state().await;
    let bound = state.expect_pod(pod_uid(&p));
    assert_eq!(bound["phase"], "Bound");
    assert_eq!(bound["node"], "free");
    let gpu = gpu_uuid("free", 0);
    let usage = Usage {
        used: 1,
        usedmem: 4000,
        usedcores: 20,
    };
    assert_eq!(state.gpu_usage(&gpu), usage);

    // kube-scheduler retries a bind whose answer it lost: same answer, no change.
    assert_eq!(server.bind(&p, "free").await, json!({}));
    let state = server.state().await;
    assert_eq!(state.expect_pod(pod_uid(&p))["phase"], "Bound");
    assert_eq!(
        state.gpu_usage(&gpu),
        usage,
        "a repeated bind books nothing"
    );
    assert!(
        state.has_event("trainer", "FilteringSucceed"),
        "{}",
        state.0
    );
    assert!(state.has_event("trainer", "BindingSucceed"), "{}", state.0);
    let message = state
        .events()
        .into_iter()
        .find(|e| e["pod"] == "trainer" && e["reason"] == "BindingSucceed")
        .map(|e| e["message"].clone());
    assert_eq!(
        message,
        Some(json!("Successfully binding node [free] to default/trainer"))
    );

    // A bind to another node after a successful bind is refused.
    let answer = server.bind(&p, "stale-lock").await;
    assert!(
        answer["Error"].as_str().is_some_and(|e| !e.is_empty()),
        "{answer}"
    );
}

#[tokio::test]
async fn bind_for_a_recreated_pod_fails_and_frees_the_stale_reservation() {
    let server = lock_server().await;
    let old = pod("default", "recreated")
        .uid("5c0e7a1d-3b2f-4d6e-8a9c-1f2e3d4c5b6a")
        .gpus(1, 4000, 20)
        .build();
    assert_eq!(
        server.filter(&old, &["free"]).await,
        json!({"NodeNames": ["free"]})
    );
    // The pod is deleted and recreated under the same name (new UID); the new one
    // is filtered but fits nowhere, so it holds nothing.
    let new = pod("default", "recreated")
        .uid("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
        .gpus(1, 900_000, 20)
        .build();
    expect_rejected(&server.filter(&new, &["free"]).await);

    // kube-scheduler binds with the stale UID.
    let answer = server.bind(&old, "free").await;
    assert!(
        answer["Error"].as_str().is_some_and(|e| !e.is_empty()),
        "stale UID must fail: {answer}"
    );
    let state = server.state().await;
    assert!(
        state.pod(pod_uid(&old)).is_none(),
        "the stale reservation is released: {}",
        state.0
    );
    assert_eq!(state.gpu_usage(&gpu_uuid("free", 0)), Usage::default());
    assert!(state.has_event("recreated", "BindingFailed"), "{}", state.0);
    assert!(
        state.has_event("recreated", "FilteringFailed"),
        "{}",
        state.0
    );
}

#[tokio::test]
async fn bind_to_an_unknown_node_fails_and_releases_the_reservation() {
    let server = lock_server().await;
    let p = pod("default", "misdirected").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["free"]).await,
        json!({"NodeNames": ["free"]})
    );
    let answer = server.bind(&p, "no-such-node").await;
    assert!(
        answer["Error"]
            .as_str()
            .is_some_and(|e| e.contains("\"no-such-node\" not found")),
        "{answer}"
    );
    let state = server.state().await;
    assert!(
        state.pod(pod_uid(&p)).is_none(),
        "the reservation is released: {}",
        state.0
    );
    assert_eq!(state.gpu_usage(&gpu_uuid("free", 0)), Usage::default());
    // The GPU is free for the next pod.
    let next = pod("default", "next").gpus(1, 80_000, 100).build();
    assert_eq!(
        server.filter(&next, &["free"]).await,
        json!({"NodeNames": ["free"]})
    );
}

#[tokio::test]
async fn bind_with_a_wrong_uid_fails() {
    let server = lock_server().await;
    let p = pod("default", "mismatch").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["free"]).await,
        json!({"NodeNames": ["free"]})
    );
    let answer = server
        .bind_args(&bind_args(
            "default",
            "mismatch",
            "00000000-0000-4000-8000-000000000000",
            "free",
        ))
        .await;
    assert!(
        answer["Error"].as_str().is_some_and(|e| !e.is_empty()),
        "{answer}"
    );
    let state = server.state().await;
    assert_ne!(
        state.pod(pod_uid(&p)).map(|p| p["phase"].clone()),
        Some(json!("Bound")),
        "a bind with the wrong UID must not bind the pod"
    );
    assert!(state.pod("00000000-0000-4000-8000-000000000000").is_none());
}

#[tokio::test]
async fn bind_of_an_unknown_pod_says_not_found() {
    let server = lock_server().await;
    let answer = server
        .bind_args(&bind_args(
            "default",
            "never-seen",
            "1b2c3d4e-5f60-4718-9a0b-1c2d3e4f5a6b",
            "free",
        ))
        .await;
    assert_eq!(answer, json!({"Error": "pod \"never-seen\" not found"}));
    let state = server.state().await;
    assert!(
        state.has_event("never-seen", "BindingFailed"),
        "{}",
        state.0
    );
}

#[tokio::test]
async fn bind_missing_fields_or_garbage_answers_200_with_an_error() {
    let server = lock_server().await;
    for body in [
        "{\"PodName\":",
        "{}",
        "{\"PodName\":\"x\",\"PodNamespace\":\"default\"}",
    ] {
        let (status, text) = server.post_raw("/bind", body).await;
        assert_eq!(status, 200, "{body}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("JSON answer");
        assert!(
            answer["Error"].as_str().is_some_and(|e| !e.is_empty()),
            "{body}: {answer}"
        );
    }
}

#[tokio::test]
async fn bind_on_a_node_locked_by_a_live_pod_times_out_and_releases() {
    let server = lock_server().await;
    let p = pod("default", "waiter").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["locked"]).await,
        json!({"NodeNames": ["locked"]})
    );
    let started = Instant::now();
    let answer = server.bind(&p, "locked").await;
    let waited = started.elapsed();
    let error = answer["Error"].as_str().unwrap_or_default();
    assert!(
        error.contains("node lock contention"),
        "lock contention reported: {answer}"
    );
    assert!(
        waited >= Duration::from_millis(900),
        "waited for --node-lock-retry-timeout 1s, took {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "took {waited:?}");
    let state = server.state().await;
    assert!(
        state.pod(pod_uid(&p)).is_none(),
        "reservation released after the failed bind: {}",
        state.0
    );
    assert_eq!(state.gpu_usage(&gpu_uuid("locked", 0)), Usage::default());
    let failed = state
        .events()
        .into_iter()
        .find(|e| e["pod"] == "waiter" && e["reason"] == "BindingFailed")
        .unwrap_or_else(|| panic!("BindingFailed event: {}", state.0));
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("node lock contention")),
        "{failed}"
    );
    assert_eq!(failed["type"], "Warning");
}

#[tokio::test]
async fn recent_legacy_lock_without_owner_blocks_until_it_expires() {
    let server = lock_server().await;
    let p = pod("default", "legacy-waiter").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["legacy-lock"]).await,
        json!({"NodeNames": ["legacy-lock"]})
    );
    let answer = server.bind(&p, "legacy-lock").await;
    assert!(
        answer["Error"]
            .as_str()
            .is_some_and(|e| e.contains("node lock contention")),
        "{answer}"
    );
    let state = server.state().await;
    assert!(state.pod(pod_uid(&p)).is_none(), "{}", state.0);
}

#[tokio::test]
async fn expired_or_orphaned_node_locks_are_taken_over() {
    let server = lock_server().await;
    for (name, node_name) in [
        ("after-expired-lock", "stale-lock"),
        ("after-orphan-lock", "orphan-lock"),
        ("after-legacy-lock", "legacy-old-lock"),
        ("after-junk-lock", "junk-lock"),
    ] {
        let p = pod("default", name).gpus(1, 4000, 20).build();
        assert_eq!(
            server.filter(&p, &[node_name]).await,
            json!({"NodeNames": [node_name]})
        );
        let started = Instant::now();
        assert_eq!(
            server.bind(&p, node_name).await,
            json!({}),
            "{node_name}: lock taken over"
        );
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "{node_name}: no waiting for a dead lock ({:?})",
            started.elapsed()
        );
        let state = server.state().await;
        let bound = state.expect_pod(pod_uid(&p));
        assert_eq!(bound["phase"], "Bound", "{node_name}");
        assert_eq!(bound["node"], node_name);
        assert!(state.has_event(name, "BindingSucceed"), "{}", state.0);
    }
}

#[tokio::test]
async fn pods_bound_one_after_another_on_one_node_all_succeed() {
    // The lock taken by a bind is released after the (simulated) device plugin
    // handed the GPUs over, so the next bind on the node does not wait.
    let server = lock_server().await;
    for i in 0..3 {
        let p = pod("default", &format!("serial-{i}"))
            .gpus(1, 1000, 10)
            .build();
        assert_eq!(
            server.filter(&p, &["free"]).await,
            json!({"NodeNames": ["free"]})
        );
        let started = Instant::now();
        assert_eq!(server.bind(&p, "free").await, json!({}));
        assert!(started.elapsed() < Duration::from_millis(900));
    }
    let state = server.state().await;
    assert_eq!(
        state.gpu_usage(&gpu_uuid("free", 0)),
        Usage {
            used: 3,
            usedmem: 3000,
            usedcores: 30
        }
    );
}

#[tokio::test]
async fn reservation_without_bind_expires_after_the_ttl() {
    let server = Server::start(
        vec![one_gpu_node("free", &[])],
        &["--reservation-ttl", "1s"],
    )
    .await;
    let gpu = gpu_uuid("free", 0);
    let p = pod("default", "abandoned").gpus(1, 4000, 20).build();
    let filtered = Instant::now();
    assert_eq!(
        server.filter(&p, &["free"]).await,
        json!({"NodeNames": ["free"]})
    );
    let state = server.state().await;
    let reserved = state.expect_pod(pod_uid(&p));
    assert_eq!(reserved["phase"], "Reserved");
    let left = reserved["reservationExpiresInSeconds"]
        .as_f64()
        .unwrap_or(-1.0);
    assert!((0.0..=1.0).contains(&left), "expires within 1s: {reserved}");
    assert_eq!(state.gpu_usage(&gpu).used, 1);

    let (state, expired) = server
        .wait_state(Duration::from_secs(10), |s| s.pod(pod_uid(&p)).is_none())
        .await;
    assert!(expired, "reservation expired: {}", state.0);
    // Not before its TTL: it was made after `filtered`.
    assert!(
        filtered.elapsed() >= Duration::from_secs(1),
        "released {:?} after the filter",
        filtered.elapsed()
    );
    assert_eq!(state.gpu_usage(&gpu), Usage::default());

    // A cluster file keeps no pod it only heard of from a request once it holds
    // nothing, so a late bind finds no pod...
    let late = server.bind(&p, "free").await;
    assert_eq!(late, json!({"Error": "pod \"abandoned\" not found"}));
    // ...until kube-scheduler filters it again, as it does before binding.
    assert_eq!(
        server.filter(&p, &["free"]).await,
        json!({"NodeNames": ["free"]})
    );
    assert_eq!(server.bind(&p, "free").await, json!({}));
    let state = server.state().await;
    assert_eq!(state.expect_pod(pod_uid(&p))["phase"], "Bound");
    assert_eq!(
        state.gpu_usage(&gpu),
        Usage {
            used: 1,
            usedmem: 4000,
            usedcores: 20
        }
    );
}

#[tokio::test]
async fn refilter_replaces_the_earlier_reservation() {
    let server = Server::start(
        vec![one_gpu_node("first", &[]), one_gpu_node("second", &[])],
        &[],
    )
    .await;
    let p = pod("default", "refiltered").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["first"]).await,
        json!({"NodeNames": ["first"]})
    );
    assert_eq!(
        server.filter(&p, &["second"]).await,
        json!({"NodeNames": ["second"]})
    );
    let state = server.state().await;
    assert_eq!(state.expect_pod(pod_uid(&p))["node"], "second");
    assert_eq!(state.gpu_usage(&gpu_uuid("first", 0)), Usage::default());
    assert_eq!(state.gpu_usage(&gpu_uuid("second", 0)).used, 1);
}

#[tokio::test]
async fn refilter_of_a_bound_pod_keeps_its_gpus_booked() {
    // kube-scheduler may filter a pod again after a bind whose answer it lost, before
    // its informer shows spec.nodeName. The pod is running on its first node; a
    // second filter and a failing second bind must not erase its booking there.
    let server = Server::start(
        vec![one_gpu_node("first", &[]), one_gpu_node("second", &[])],
        &[],
    )
    .await;
    let p = pod("default", "lost-answer").gpus(1, 4000, 20).build();
    let first = gpu_uuid("first", 0);
    let booked = Usage {
        used: 1,
        usedmem: 4000,
        usedcores: 20,
    };
    assert_eq!(
        server.filter(&p, &["first"]).await,
        json!({"NodeNames": ["first"]})
    );
    assert_eq!(server.bind(&p, "first").await, json!({}));
    assert_eq!(server.state().await.gpu_usage(&first), booked);

    let again = server.filter(&p, &["second"]).await;
    let state = server.state().await;
    assert_eq!(
        state.gpu_usage(&first),
        booked,
        "the bound pod still holds its GPU after a re-filter (answer {again})"
    );
    if again.get("NodeNames").is_some() {
        let answer = server.bind(&p, "second").await;
        assert!(
            answer["Error"].as_str().is_some_and(|e| !e.is_empty()),
            "{answer}"
        );
    }
    let state = server.state().await;
    let tracked = state.pod(pod_uid(&p)).cloned().unwrap_or(Value::Null);
    assert_eq!(
        tracked["node"], "first",
        "still tracked on first: {}",
        state.0
    );
    assert_eq!(tracked["phase"], "Bound");
    assert_eq!(state.gpu_usage(&first), booked);
    assert_eq!(state.gpu_usage(&gpu_uuid("second", 0)), Usage::default());
}

#[tokio::test]
async fn bind_of_a_pod_without_gpus_takes_no_node_lock() {
    // HAMi locks a node only for vendors the pod asks for (hami-compat §9 step 3):
    // its device plugin releases the lock in Allocate, which never runs for a pod
    // without GPUs. Without the simulated device plugin nothing releases locks, so a
    // lock taken for the CPU-only pod would block the vGPU pod after it.
    let server = Server::start(
        vec![
            one_gpu_node("shared-node", &[]),
            pending_pod("default", "cpu-job"),
        ],
        &[
            "--simulate-device-plugin",
            "false",
            "--node-lock-retry-timeout",
            "1s",
        ],
    )
    .await;
    let cpu_job = pending_pod("default", "cpu-job");
    assert_eq!(server.bind(&cpu_job, "shared-node").await, json!({}));

    let p = pod("default", "gpu-job").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["shared-node"]).await,
        json!({"NodeNames": ["shared-node"]})
    );
    assert_eq!(
        server.bind(&p, "shared-node").await,
        json!({}),
        "the CPU-only pod must not hold the node lock"
    );
}

#[tokio::test]
async fn reservation_does_not_expire_while_its_bind_waits_for_the_node_lock() {
    // The bind waits for a lock held by a live pod; the lock ages out after 3s
    // (--node-lock-timeout) and the bind succeeds. The reservation TTL (1s) is shorter
    // than that wait: the pod must still end up Bound with its GPUs booked.
    let recent = format!("{},team,other", rfc3339_ago(0));
    let server = Server::start(
        vec![
            one_gpu_node("busy-node", &[("hami.io/mutex.lock", &recent)]),
            pending_pod("team", "other"),
        ],
        &[
            "--reservation-ttl",
            "1s",
            "--node-lock-timeout",
            "3s",
            "--node-lock-retry-timeout",
            "8s",
        ],
    )
    .await;
    let p = pod("default", "patient").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&p, &["busy-node"]).await,
        json!({"NodeNames": ["busy-node"]})
    );
    let started = Instant::now();
    assert_eq!(server.bind(&p, "busy-node").await, json!({}));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "the bind waited longer than the TTL ({waited:?})"
    );
    let state = server.state().await;
    let tracked = state.pod(pod_uid(&p)).cloned().unwrap_or(Value::Null);
    assert_eq!(
        tracked["phase"], "Bound",
        "a bound pod is tracked: {}",
        state.0
    );
    assert_eq!(
        state.gpu_usage(&gpu_uuid("busy-node", 0)),
        Usage {
            used: 1,
            usedmem: 4000,
            usedcores: 20
        },
        "a bound pod's GPUs are booked"
    );
}
