//! Conflicts and faults in live mode: 409s on the node lock are retried, failed
//! writes roll back, dropped (and expired) watches are resumed without losing a pod
//! or a release, a pod deleted between filter and bind frees its reservation, stale
//! node locks are released, and unbound reservations expire with their annotations
//! cleared.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use std::time::{Duration, Instant};
use support::Usage;

const NS: &str = "research";

fn lock_of(api: &FakeApiServer, node: &str) -> Option<String> {
    annotation(
        &api.get("Node", None, node).expect("node"),
        "hami.io/mutex.lock",
    )
    .map(String::from)
}

const OUR_ANNOTATIONS: [&str; 4] = [
    "hami.io/vgpu-node",
    "hami.io/vgpu-time",
    "hami.io/vgpu-devices-to-allocate",
    "hami.io/vgpu-devices-allocated",
];

fn assert_allocation_cleared(p: &serde_json::Value) {
    for key in OUR_ANNOTATIONS {
        assert!(annotation(p, key).is_none(), "{key} still set: {p}");
    }
    assert!(
        label(p, "hami.io/vgpu-node").is_none(),
        "label still set: {p}"
    );
}

#[tokio::test]
async fn node_lock_conflicts_are_retried() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    let server = LiveServer::start(&api, &[]).await;
    create_pod(&api, gpu_pod(NS, "contended", 1, 10000, 10));
    let node = server.filter_one(&api, NS, "contended", &["gpu-a"]).await;
    let uid = uid_of(&api_pod(&api, NS, "contended"));
    api.clear_request_log();
    api.inject_conflicts("PATCH /api/v1/nodes/gpu-a", 3);
    let error = server.bind(NS, "contended", &uid, &node).await;
    assert_eq!(
        error,
        "",
        "bind with 3 conflicts on the node lock; log:\n{}",
        server.log_tail(30)
    );
    let patches: Vec<u16> = api
        .request_log()
        .into_iter()
        .filter(|(m, p, _)| m == "PATCH" && p.starts_with("/api/v1/nodes/gpu-a"))
        .map(|(_, _, s)| s)
        .collect();
    assert_eq!(patches, vec![409, 409, 409, 200], "node lock PATCHes");
    let p = api_pod(&api, NS, "contended");
    assert_eq!(p["spec"]["nodeName"], "gpu-a");
    let (_, _, holder) = parse_lock(&lock_of(&api, "gpu-a").expect("lock"));
    assert_eq!(holder, "contended");
}

#[tokio::test]
async fn failed_writes_roll_back() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    add_node(&api, "gpu-b", 1, 10);
    let server = LiveServer::start(&api, &[]).await;
    // The pod carries the MIG instances of an earlier placement, which a
    // Binding cannot remove: the bind patches them away first.
    let mut pod = gpu_pod(NS, "unlucky", 1, 10000, 10);
    pod["metadata"]["annotations"] = serde_json::json!({
        "hami.io/vgpu-mig-allocations": "[{\"uuid\":\"GPU-old\",\"profile\":\"1g.10gb\",\"index\":0}]"
    });
    create_pod(&api, pod);
    let stored = api_pod(&api, NS, "unlucky");
    let uid = uid_of(&stored);

    // That patch fails: the bind says so, no reservation stays behind and the
    // node lock is released.
    let answer = server.filter(&stored, &["gpu-a"]).await;
    assert_eq!(answer["NodeNames"][0], "gpu-a", "{answer}");
    api.inject_errors(
        &format!("PATCH /api/v1/namespaces/{NS}/pods/unlucky"),
        500,
        1,
    );
    let error = server.bind(NS, "unlucky", &uid, "gpu-a").await;
    assert!(error.contains("remove an earlier placement"), "{error}");
    let state = server.state().await;
    assert!(state.pod(&uid).is_none(), "{}", state.0);
    assert_eq!(total_usage(&state), Usage::default());
    assert_eq!(lock_of(&api, "gpu-a"), None, "node lock released");
    assert!(api_pod(&api, NS, "unlucky")["spec"]["nodeName"].is_null());

    // The Binding fails: reservation, annotations and node lock are all rolled back.
    server.filter_one(&api, NS, "unlucky", &["gpu-a"]).await;
    // The pod watch is down while the bind runs (its first re-watches fail), so the
    // events of the bind's own writes arrive after the rollback, as they do when
    // the watch lags under load.
    assert!(api.wait_for_watches(3, Duration::from_secs(5)).await);
    api.inject_errors("GET /api/v1/pods?&watch=true", 500, 2);
    api.drop_watches();
    api.inject_errors(
        &format!("POST /api/v1/namespaces/{NS}/pods/unlucky/binding"),
        500,
        1,
    );
    let error = server.bind(NS, "unlucky", &uid, "gpu-a").await;
    assert!(!error.is_empty(), "bind must report the failed Binding");
    let p = api_pod(&api, NS, "unlucky");
    assert!(p["spec"]["nodeName"].is_null(), "{p}");
    assert_allocation_cleared(&p);
    assert_eq!(
        lock_of(&api, "gpu-a"),
        None,
        "node lock released after a failed bind"
    );
    // A marker created after the rollback: once the server tracks it, the watch
    // has delivered every event of the bind and of its rollback.
    let marker_devices = format!("{},NVIDIA,1000,1:;", gpu_id("gpu-b", 0));
    let marker = uid_of(&create_pod(
        &api,
        running_pod(NS, "marker", "gpu-b", &marker_devices, 1),
    ));
    let (state, ok) = server
        .wait_state(Duration::from_secs(15), |s| s.pod(&marker).is_some())
        .await;
    assert!(ok, "marker tracked: {}", state.0);
    let state = server.state().await;
    assert!(
        state.pod(&uid).is_none() && state.gpu_usage(&gpu_id("gpu-a", 0)) == Usage::default(),
        "after a failed bind the pod holds no GPUs (its annotations are gone from the \
         cluster), yet the ledger has: {}",
        serde_json::to_string(&state.pod(&uid)).unwrap_or_default()
    );

    // And the next attempt works.
    server.schedule(&api, NS, "unlucky", &["gpu-a"]).await;
}

/// A server over one node `gpu-a` with one GPU, and a pod `name` whose `/filter`
/// reserved that GPU whole. Returns the pod's UID.
async fn whole_gpu_reserved_for(name: &str) -> (FakeApiServer, LiveServer, String) {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    let server = LiveServer::start(&api, &[]).await;
    create_pod(&api, gpu_pod(NS, name, 1, 10000, 100));
    let uid = uid_of(&api_pod(&api, NS, name));
    server.filter_one(&api, NS, name, &["gpu-a"]).await;
    (api, server, uid)
}

/// The GPU of `gpu-a` is still booked whole by one pod.
async fn assert_whole_gpu_booked(server: &LiveServer) {
    let state = server.state().await;
    assert_eq!(
        state.gpu_usage(&gpu_id("gpu-a", 0)),
        Usage {
            used: 1,
            usedmem: 10000,
            usedcores: 100
        },
        "the GPU stays booked: {}",
        state.0
    );
}

#[tokio::test]
async fn a_binding_whose_answer_is_lost_keeps_the_bound_pods_gpus() {
    let (api, server, uid) = whole_gpu_reserved_for("lucky").await;
    let devices = Some(format!("{},NVIDIA,10000,100:;", gpu_id("gpu-a", 0)));

    // The API server binds the pod, but a gateway times out on the way back.
    api.inject_lost_answers(
        &format!("POST /api/v1/namespaces/{NS}/pods/lucky/binding"),
        504,
        1,
    );
    let error = server.bind(NS, "lucky", &uid, "gpu-a").await;
    assert_eq!(error, "", "the pod was bound, so the bind succeeded");
    let p = api_pod(&api, NS, "lucky");
    assert_eq!(p["spec"]["nodeName"], "gpu-a", "{p}");
    assert_eq!(
        annotation(&p, "hami.io/vgpu-devices-to-allocate").map(str::to_string),
        devices,
        "the device plugin still finds the allocation: {p}"
    );
    assert_eq!(
        annotation(&p, "hami.io/bind-phase"),
        Some("allocating"),
        "{p}"
    );
    assert!(
        lock_of(&api, "gpu-a").is_some(),
        "the node lock waits for the device plugin"
    );
    assert_whole_gpu_booked(&server).await;

    // A second pod cannot take the GPU the bound pod holds whole.
    create_pod(&api, gpu_pod(NS, "second", 1, 10000, 10));
    let second = server
        .filter(&api_pod(&api, NS, "second"), &["gpu-a"])
        .await;
    assert!(second["FailedNodes"]["gpu-a"].is_string(), "{second}");
}

#[tokio::test]
async fn a_failed_binding_that_cannot_be_checked_keeps_the_gpus_and_frees_the_node() {
    let (api, server, uid) = whole_gpu_reserved_for("unsure").await;

    // The Binding fails, and so does reading the pod back (the bind itself uses
    // the pod /filter was sent): nobody can tell whether the pod is bound.
    let pod_path = format!("GET /api/v1/namespaces/{NS}/pods/unsure");
    api.inject_errors(&pod_path, 500, 1);
    api.inject_errors(
        &format!("POST /api/v1/namespaces/{NS}/pods/unsure/binding"),
        500,
        1,
    );
    let error = server.bind(NS, "unsure", &uid, "gpu-a").await;
    assert!(error.contains("stay booked"), "{error}");
    // The allocation rides on the Binding: the pod has it if and only if it is bound.
    let p = api_pod(&api, NS, "unsure");
    assert!(p["spec"]["nodeName"].is_null(), "{p}");
    assert!(
        annotation(&p, "hami.io/vgpu-devices-to-allocate").is_none(),
        "nothing of the allocation is on a pod the Binding did not reach: {p}"
    );
    assert_eq!(lock_of(&api, "gpu-a"), None, "the node is not left locked");
    assert_whole_gpu_booked(&server).await;

    // The pod was not bound after all: kube-scheduler's retry places it.
    let node = server.schedule(&api, NS, "unsure", &["gpu-a"]).await;
    assert_eq!(node, "gpu-a");
    assert_eq!(api_pod(&api, NS, "unsure")["spec"]["nodeName"], "gpu-a");
}

#[tokio::test]
async fn dropped_watches_lose_nothing() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 2, 10);
    let server = LiveServer::start(&api, &[]).await;
    assert!(api.wait_for_watches(3, Duration::from_secs(5)).await);

    // A pod created right after the watches dropped still counts.
    api.drop_watches();
    let devices = format!("{},NVIDIA,12000,15:;", gpu_id("gpu-a", 0));
    let p = create_pod(&api, running_pod(NS, "after-drop", "gpu-a", &devices, 1));
    let uid = uid_of(&p);
    let (state, ok) = server
        .wait_state(Duration::from_secs(10), |s| s.pod(&uid).is_some())
        .await;
    assert!(
        ok,
        "pod created while the watch was down is tracked: {}",
        state.0
    );
    assert_eq!(
        state.gpu_usage(&gpu_id("gpu-a", 0)),
        Usage {
            used: 1,
            usedmem: 12000,
            usedcores: 15
        }
    );
    // A filter sees that usage: a pod needing a whole card goes to the other GPU.
    create_pod(&api, gpu_pod(NS, "whole", 1, 0, 100));
    server.schedule(&api, NS, "whole", &["gpu-a"]).await;
    let whole = annotation(
        &api_pod(&api, NS, "whole"),
        "hami.io/vgpu-devices-allocated",
    )
    .expect("allocated")
    .to_string();
    assert!(
        whole.starts_with(&gpu_id("gpu-a", 1)),
        "exclusive pod avoids the used GPU: {whole}"
    );

    // A pod deleted right after the watches dropped is released.
    api.drop_watches();
    api.delete("Pod", Some(NS), "after-drop");
    let (state, ok) = server
        .wait_state(Duration::from_secs(10), |s| s.pod(&uid).is_none())
        .await;
    assert!(
        ok,
        "pod deleted while the watch was down is released: {}",
        state.0
    );
    assert_eq!(state.gpu_usage(&gpu_id("gpu-a", 0)), Usage::default());
}

#[tokio::test]
async fn expired_watch_history_relists_and_releases_vanished_pods() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 2, 10);
    let gone_devices = format!("{},NVIDIA,5000,5:;", gpu_id("gpu-a", 0));
    let gone = uid_of(&create_pod(
        &api,
        running_pod(NS, "gone", "gpu-a", &gone_devices, 1),
    ));
    let server = LiveServer::start(&api, &[]).await;
    assert!(server.state().await.pod(&gone).is_some());
    assert!(api.wait_for_watches(3, Duration::from_secs(5)).await);

    // While the watch is down the pod vanishes and the history is compacted, so the
    // server must re-list; the re-list must release what it no longer finds.
    // The first re-watch fails, so the server cannot see the changes live.
    api.inject_errors("GET /api/v1/pods?&watch=true", 500, 1);
    api.drop_watches();
    api.delete("Pod", Some(NS), "gone");
    let new_devices = format!("{},NVIDIA,7000,7:;", gpu_id("gpu-a", 1));
    let new = uid_of(&create_pod(
        &api,
        running_pod(NS, "new", "gpu-a", &new_devices, 1),
    ));
    api.compact();
    let (state, ok) = server
        .wait_state(Duration::from_secs(15), |s| {
            s.pod(&gone).is_none() && s.pod(&new).is_some()
        })
        .await;
    assert!(
        ok,
        "after a re-list: 'gone' released, 'new' tracked: {}",
        state.0
    );
    assert_eq!(state.gpu_usage(&gpu_id("gpu-a", 0)), Usage::default());
    assert_eq!(state.gpu_usage(&gpu_id("gpu-a", 1)).usedmem, 7000);
    let pod_lists = api
        .request_log()
        .iter()
        .filter(|(m, p, s)| {
            m == "GET" && p.starts_with("/api/v1/pods?") && !p.contains("watch=") && *s == 200
        })
        .count();
    assert!(
        pod_lists >= 2,
        "the expired watch made the server re-list pods: {:?}",
        api.request_log()
    );
}

#[tokio::test]
async fn pod_deleted_or_recreated_between_filter_and_bind() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    let server = LiveServer::start(&api, &[]).await;

    create_pod(&api, gpu_pod(NS, "short-lived", 1, 40000, 50));
    let node = server.filter_one(&api, NS, "short-lived", &["gpu-a"]).await;
    let uid = uid_of(&api_pod(&api, NS, "short-lived"));
    api.delete("Pod", Some(NS), "short-lived");
    let error = server.bind(NS, "short-lived", &uid, &node).await;
    assert!(!error.is_empty(), "bind of a deleted pod must fail");
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.pod(&uid).is_none() && total_usage(s) == Usage::default()
        })
        .await;
    assert!(ok, "the deleted pod's reservation is freed: {}", state.0);
    assert_eq!(
        lock_of(&api, "gpu-a"),
        None,
        "no node lock for a pod that is gone"
    );

    // Same name, new pod: the old UID's bind is refused and frees the old hold.
    create_pod(&api, gpu_pod(NS, "reborn", 1, 40000, 50));
    server.filter_one(&api, NS, "reborn", &["gpu-a"]).await;
    let old_uid = uid_of(&api_pod(&api, NS, "reborn"));
    api.delete("Pod", Some(NS), "reborn");
    let fresh = create_pod(&api, gpu_pod(NS, "reborn", 1, 40000, 50));
    let error = server.bind(NS, "reborn", &old_uid, "gpu-a").await;
    assert!(!error.is_empty(), "bind with the old UID must fail");
    assert!(
        api_pod(&api, NS, "reborn")["spec"]["nodeName"].is_null(),
        "the new pod is not bound"
    );
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.pod(&old_uid).is_none() && total_usage(s) == Usage::default()
        })
        .await;
    assert!(ok, "{}", state.0);
    // The new pod schedules normally.
    assert_eq!(uid_of(&fresh), uid_of(&api_pod(&api, NS, "reborn")));
    server.schedule(&api, NS, "reborn", &["gpu-a"]).await;
}

#[tokio::test]
async fn stale_node_locks_are_released_or_taken_over() {
    let api = FakeApiServer::start().await;
    for n in ["gpu-a", "gpu-b", "gpu-c"] {
        add_node(&api, n, 1, 10);
    }
    let server = LiveServer::start(&api, &[]).await;
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    // gpu-c: locked by a live pod in the middle of its bind: must stay. Locked
    // first, so that any view of the nodes that shows a later lock shows this one.
    let mut holder = gpu_pod(NS, "holder", 1, 1000, 1);
    holder["metadata"]["annotations"] = serde_json::json!({"hami.io/bind-phase": "allocating"});
    create_pod(&api, holder);
    let live = format!("{now},{NS},holder");
    set_annotations(
        &api,
        "Node",
        None,
        "gpu-c",
        &[("hami.io/mutex.lock", Some(&live))],
    );
    // gpu-a and gpu-b: locked by a pod that no longer exists.
    let ghost = format!("{now},{NS},ghost");
    set_annotations(
        &api,
        "Node",
        None,
        "gpu-a",
        &[("hami.io/mutex.lock", Some(&ghost))],
    );
    set_annotations(
        &api,
        "Node",
        None,
        "gpu-b",
        &[("hami.io/mutex.lock", Some(&ghost))],
    );
    let locked_at = Instant::now();

    // A bind takes the dead lock over at once.
    create_pod(&api, gpu_pod(NS, "taker", 1, 1000, 1));
    let started = Instant::now();
    server.schedule(&api, NS, "taker", &["gpu-b"]).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "no wait on a dead owner's lock"
    );
    let (_, _, holder_b) = parse_lock(&lock_of(&api, "gpu-b").expect("lock"));
    assert_eq!(holder_b, "taker");

    // The leader (a single replica leads) releases the dead lock within a
    // housekeeping period (15 s) plus slack.
    let released = api
        .wait_until(Duration::from_secs(25), |a| {
            a.get("Node", None, "gpu-a")
                .is_some_and(|n| annotation(&n, "hami.io/mutex.lock").is_none())
        })
        .await;
    assert!(
        released,
        "stale lock on gpu-a still there after {:?}; log:\n{}",
        locked_at.elapsed(),
        server.log_tail(20)
    );
    eprintln!("stale lock released after {:?}", locked_at.elapsed());
    // The housekeeping pass that released gpu-a's lock saw it in its view of the
    // nodes, so it saw gpu-c's earlier lock too and judged it. That pass began
    // before the release was seen here, so it is among those counted as started
    // now; once as many have completed, it has finished with gpu-c.
    let started = server
        .metric("vgpu_scheduler_node_housekeeping_passes_started_total")
        .await;
    assert!(started >= 1, "a pass released the lock");
    server
        .wait_metric(
            "vgpu_scheduler_node_housekeeping_passes_completed_total",
            started,
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        lock_of(&api, "gpu-c").as_deref(),
        Some(live.as_str()),
        "a live owner's lock stays"
    );
}

#[tokio::test]
async fn unbound_reservation_expires_and_leaves_no_annotations() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    let server = LiveServer::start(&api, &["--reservation-ttl", "2s"]).await;
    create_pod(&api, gpu_pod(NS, "forgotten", 1, 60000, 70));
    server.filter_one(&api, NS, "forgotten", &["gpu-a"]).await;
    let uid = uid_of(&api_pod(&api, NS, "forgotten"));
    let p = api_pod(&api, NS, "forgotten");
    // The placement is written by the bind: the filter wrote nothing.
    for key in OUR_ANNOTATIONS {
        assert!(annotation(&p, key).is_none(), "{key} set by filter: {p}");
    }
    let (state, ok) = server
        .wait_state(Duration::from_secs(8), |s| s.pod(&uid).is_none())
        .await;
    assert!(ok, "reservation expired: {}", state.0);
    assert_eq!(total_usage(&state), Usage::default());
    assert!(
        api.wait_until(Duration::from_secs(5), |a| {
            a.get("Pod", Some(NS), "forgotten").is_some_and(|p| {
                OUR_ANNOTATIONS.iter().all(|k| annotation(&p, k).is_none())
                    && label(&p, "hami.io/vgpu-node").is_none()
            })
        })
        .await,
        "annotations of the expired reservation cleared: {}",
        api_pod(&api, NS, "forgotten")
    );
    // The cleared pod is not re-tracked by the watch event of that clearing: the
    // server has applied that event once it has applied a later one.
    watch_barrier(&api, &server).await;
    let state = server.state().await;
    assert!(state.pod(&uid).is_none(), "{}", state.0);
    assert_eq!(total_usage(&state), Usage::default());
}

/// A re-list that starts before a pod is filtered and ends after must not drop the
/// reservation: the list simply predates the pod. (More than 500 pods make the
/// re-list take two pages; API latency keeps the window open long enough.)
#[tokio::test]
async fn relist_keeps_reservations_made_while_listing() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    for i in 0..600 {
        let filler = for_create(
            support::pod(NS, &format!("web-{i:03}"))
                .container(support::container("nginx", &[]))
                .build(),
        );
        api.create(filler);
    }
    let server = LiveServer::start(&api, &[]).await;
    assert!(api.wait_for_watches(3, Duration::from_secs(10)).await);

    // Force a re-list: the watches drop, the history they would resume from is
    // compacted, and every request is slow.
    let latency = Duration::from_millis(1500);
    api.set_latency(latency);
    api.clear_request_log();
    api.drop_watches();
    set_annotations(&api, "Pod", Some(NS), "web-000", &[("touched", Some("1"))]);
    api.compact();
    let first_page_listed = api
        .wait_until(Duration::from_secs(15), |a| {
            a.request_log().iter().any(|(m, p, s)| {
                m == "GET"
                    && p.starts_with("/api/v1/pods?")
                    && p.contains("limit=")
                    && !p.contains("continue=")
                    && !p.contains("watch=")
                    && *s == 200
            })
        })
        .await;
    assert!(first_page_listed, "no re-list: {:?}", api.request_log());

    // Between the first page and the end of the re-list: a new pod is filtered.
    create_pod(&api, gpu_pod(NS, "during-relist", 1, 0, 100));
    let node = server
        .filter_one(&api, NS, "during-relist", &["gpu-a"])
        .await;
    assert_eq!(node, "gpu-a");
    let uid = uid_of(&api_pod(&api, NS, "during-relist"));
    // Sample the ledger until the re-list is provably over: its last page was
    // served, and a pod created after that (delivered by the watch that follows
    // the list, so after the list was applied) is tracked.
    let last_page_served = |a: &FakeApiServer| {
        a.request_log().iter().any(|(m, p, s)| {
            m == "GET" && p.starts_with("/api/v1/pods?") && p.contains("continue=") && *s == 200
        })
    };
    let mut dropped_at = None;
    let mut marker: Option<BarrierMarker> = None;
    let watch_from = std::time::Instant::now();
    loop {
        let state = server.state().await;
        if state.pod(&uid).is_none() {
            dropped_at = Some(watch_from.elapsed());
            break;
        }
        match &marker {
            Some(m) if m.seen_in(&state) => break,
            Some(_) => {}
            None if last_page_served(&api) => marker = Some(BarrierMarker::create(&api)),
            None => {}
        }
        assert!(
            watch_from.elapsed() < Duration::from_secs(30),
            "the re-list did not end (last page served: {}); log:\n{}",
            last_page_served(&api),
            server.log_tail(15)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Some(at) = dropped_at {
        // Show the consequence: the same GPU goes to a second exclusive pod.
        create_pod(&api, gpu_pod(NS, "second", 1, 0, 100));
        let second = api_pod(&api, NS, "second");
        let answer = server.filter(&second, &["gpu-a"]).await;
        panic!(
            "the re-list released the reservation of {NS}/during-relist {at:?} after its /filter \
             (the pod exists; it was created after the list's snapshot). A second exclusive pod's \
             /filter on the same single GPU then answered: {answer}\nserver log:\n{}",
            server.log_tail(15)
        );
    }
    api.set_latency(Duration::ZERO);
    if let Some(m) = marker {
        m.remove(&api, &server).await;
    }
    let state = server.state().await;
    assert_eq!(state.expect_pod(&uid)["phase"], "Reserved");
}

/// The periodic resync compares the ledger with a full pod list. Whatever happens
/// between that list's snapshot and its application is newer than the list: a pod
/// filtered, bound or deleted in that window must keep (or lose) its GPUs as the
/// watch says, not as the older list says. Thousands of small pods make the list
/// slow enough to act inside the window; a few resync rounds are tried.
#[tokio::test]
async fn resync_does_not_apply_a_stale_list_over_newer_changes() {
    const ROUNDS: usize = 6;
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-b", 2, 10);
    // One node per round: a bind's node lock stays until a device plugin would
    // release it, and none runs here.
    for round in 0..ROUNDS {
        add_node(&api, &format!("pool-{round}"), 2, 10);
    }
    for i in 0..3000 {
        let filler = for_create(
            support::pod(NS, &format!("web-{i:04}"))
                .container(support::container("nginx", &[]))
                .build(),
        );
        api.create(filler);
    }
    let server = LiveServer::start(&api, &["--resync-period", "1s"]).await;
    let is_resync_list =
        |p: &str| p.starts_with("/api/v1/pods") && !p.contains("limit=") && !p.contains("watch=");
    let mut problems = Vec::new();
    for round in 0..ROUNDS {
        // Before the next snapshot: a running pod, and a pending pod to bind later.
        let devices = format!("{},NVIDIA,20000,20:;", gpu_id("gpu-b", 0));
        let doomed = format!("doomed-{round}");
        let doomed_uid = uid_of(&create_pod(
            &api,
            running_pod(NS, &doomed, "gpu-b", &devices, 1),
        ));
        let late = format!("late-bind-{round}");
        create_pod(&api, gpu_pod(NS, &late, 1, 10000, 10));
        let (s, ok) = server
            .wait_state(Duration::from_secs(5), |s| s.pod(&doomed_uid).is_some())
            .await;
        assert!(ok, "{}", s.0);
        api.clear_request_log();
        assert!(
            api.wait_until(Duration::from_secs(5), |a| a
                .request_log()
                .iter()
                .any(|(m, p, _)| m == "GET" && is_resync_list(p)))
                .await,
            "no resync list within 5 s"
        );
        // That resync has listed, so it has finished or it is the one under way:
        // once one more than now have finished, it has applied its list.
        let resync_applied = server.resyncs().await + 1;
        // Inside the window: delete one pod, filter a new one, bind an old one.
        api.delete("Pod", Some(NS), &doomed);
        let fresh = format!("fresh-{round}");
        create_pod(&api, gpu_pod(NS, &fresh, 1, 10000, 10));
        let pool = format!("pool-{round}");
        server.filter_one(&api, NS, &fresh, &[pool.as_str()]).await;
        let fresh_uid = uid_of(&api_pod(&api, NS, &fresh));
        let late_node = server.filter_one(&api, NS, &late, &[pool.as_str()]).await;
        let late_uid = uid_of(&api_pod(&api, NS, &late));
        assert_eq!(server.bind(NS, &late, &late_uid, &late_node).await, "");
        // Watch the ledger until this resync was applied.
        let mut doomed_gone_seen = false;
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(
                Instant::now() < until,
                "round {round}: the resync never finished"
            );
            // Read before the state, so the last sample follows the application.
            let done = server.resyncs().await >= resync_applied;
            let s = server.state().await;
            if s.pod(&fresh_uid).is_none() {
                problems.push(format!("round {round}: the reservation of {fresh} (filtered after the list) was released"));
                break;
            }
            if s.pod(&late_uid).is_none() {
                problems.push(format!(
                    "round {round}: {late} (bound after the list) lost its GPUs"
                ));
                break;
            }
            match s.pod(&doomed_uid) {
                None => doomed_gone_seen = true,
                Some(_) if doomed_gone_seen => {
                    problems.push(format!(
                        "round {round}: {doomed} (deleted after the list) came back with its GPUs"
                    ));
                    break;
                }
                Some(_) => {}
            }
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if !problems.is_empty() {
            break;
        }
    }
    assert!(
        problems.is_empty(),
        "the resync applied an older list over newer changes:\n{}\nserver log:\n{}",
        problems.join("\n"),
        server
            .log()
            .lines()
            .filter(|l| l.contains("resync:"))
            .take(10)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
