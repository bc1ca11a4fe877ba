//! Live mode end to end against the fake kube-apiserver: readiness only after the
//! watches synced, webhook -> filter -> bind with every annotation, lock, Binding and
//! Event in the cluster, and GPUs released when the pod finishes, is deleted, or
//! (only) once a terminating pod is gone.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::time::Duration;
use support::{Usage, base64_decode, container};

const NS: &str = "team-a";

/// A pod as the API server hands it to the mutating webhook on CREATE.
fn admitted_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {
            "containers": [container("cuda", &[
                ("nvidia.com/gpu", "1"),
                ("nvidia.com/gpumem", "20000"),
                ("nvidia.com/gpucores", "30"),
            ])],
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30,
        },
    })
}

fn review(pod: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b6f5c2e-3a43-4a8e-9d7c-1f2e3d4c5b6a",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"],
            "namespace": NS,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
        }
    })
}

/// Runs the webhook on `pod` and applies its JSON patch.
async fn admit(server: &LiveServer, pod: &Value) -> Value {
    let (status, answer) = server.post_json("/mutate", &review(pod)).await;
    assert_eq!(status, 200, "/mutate: {answer}");
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    assert_eq!(response["patchType"], "JSONPatch", "{answer}");
    let bytes = base64_decode(response["patch"].as_str().expect("patch"));
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("RFC 6902 patch");
    let mut out = pod.clone();
    json_patch::patch(&mut out, &patch).expect("patch applies");
    out
}

fn event_with<'a>(events: &'a [Value], reason: &str) -> Option<&'a Value> {
    events.iter().find(|e| e["reason"] == reason)
}

#[tokio::test]
async fn pod_flows_through_webhook_filter_bind_and_is_released() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 2, 10);
    add_node(&api, "gpu-b", 2, 10);
    // The first two pod lists fail: the server must stay unready until one succeeds.
    api.inject_errors("GET /api/v1/pods", 500, 2);
    let mut server = LiveServer::start_with(
        &api,
        LiveOptions {
            no_wait: true,
            // HAMi's success events too, which this test checks.
            args: vec!["--placement-events=all".into()],
            ..Default::default()
        },
    )
    .await;

    // Not ready yet: /readyz 503 and /filter an explicit error, no hang.
    let mut probed_filter = false;
    let deadline = std::time::Instant::now() + READY_TIMEOUT;
    loop {
        assert!(std::time::Instant::now() < deadline, "{}", server.log());
        if server.ensure_client()
            && let Ok(resp) = server.client.get(server.url("/readyz")).send().await
        {
            let code = resp.status().as_u16();
            let pod_list_ok = api.request_log().iter().any(|(m, p, s)| {
                m == "GET" && p.starts_with("/api/v1/pods") && !p.contains("watch=") && *s == 200
            });
            if code == 200 {
                assert!(
                    pod_list_ok,
                    "/readyz 200 before any pod list succeeded: {:?}",
                    api.request_log()
                );
                break;
            }
            assert_eq!(code, 503, "/readyz before sync");
            if !probed_filter && !pod_list_ok {
                let early = gpu_pod(NS, "early", 1, 1000, 10);
                let mut early = early;
                early["metadata"]["uid"] = json!("9d1f0a44-1c7b-4e0e-8c53-3f4c7d2b9a10");
                let started = std::time::Instant::now();
                let answer = server.filter(&early, &["gpu-a"]).await;
                assert!(
                    answer["Error"]
                        .as_str()
                        .is_some_and(|e| e.contains("not loaded")),
                    "/filter before sync must answer an explicit error: {answer}"
                );
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "no hang before sync"
                );
                probed_filter = true;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        probed_filter,
        "the server became ready before the injected list errors were used"
    );

    // Webhook: the pod gets our scheduler name; create it as the API server would.
    let admitted = admit(&server, &admitted_pod("train-1")).await;
    assert_eq!(admitted["spec"]["schedulerName"], SCHEDULER, "{admitted}");
    let stored = create_pod(&api, admitted);
    assert_eq!(stored["spec"]["schedulerName"], SCHEDULER);
    let uid = uid_of(&stored);

    // Filter.
    let answer = server.filter(&stored, &["gpu-a", "gpu-b"]).await;
    let node = answer["NodeNames"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no node chosen: {answer}"))
        .to_string();
    // Nothing is written at /filter: the placement goes with the bind phase.
    let p = api_pod(&api, NS, "train-1");
    assert_eq!(annotation(&p, "hami.io/vgpu-node"), None, "{p}");
    let state = server.state().await;
    assert_eq!(state.expect_pod(&uid)["phase"], "Reserved", "{}", state.0);
    assert!(
        api.wait_until(Duration::from_secs(5), |a| {
            event_with(&a.events_for(NS, "train-1"), "FilteringSucceed").is_some()
        })
        .await,
        "FilteringSucceed event: {:?}",
        api.events_for(NS, "train-1")
    );

    // Bind.
    let error = server.bind(NS, "train-1", &uid, &node).await;
    assert_eq!(error, "", "bind failed; log:\n{}", server.log_tail(30));
    let p = api_pod(&api, NS, "train-1");
    assert_eq!(p["spec"]["nodeName"], node.as_str(), "{p}");
    assert_eq!(
        annotation(&p, "hami.io/bind-phase"),
        Some("allocating"),
        "{p}"
    );
    assert_eq!(
        annotation(&p, "hami.io/vgpu-node"),
        Some(node.as_str()),
        "{p}"
    );
    assert_eq!(label(&p, "hami.io/vgpu-node"), Some(node.as_str()), "{p}");
    let vgpu_time: i64 = annotation(&p, "hami.io/vgpu-time")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("hami.io/vgpu-time: {p}"));
    assert!(
        (chrono::Utc::now().timestamp() - vgpu_time).abs() < 60,
        "{p}"
    );
    let to_allocate = annotation(&p, "hami.io/vgpu-devices-to-allocate").expect("to-allocate");
    let allocated = annotation(&p, "hami.io/vgpu-devices-allocated").expect("allocated");
    assert_eq!(to_allocate, allocated);
    let devices = decode_allocation(allocated);
    assert_eq!(devices.len(), 1, "one GPU: {allocated}");
    let (gpu, usage) = devices.iter().next().expect("one device");
    assert!(
        gpu == &gpu_id(&node, 0) || gpu == &gpu_id(&node, 1),
        "GPU {gpu} is on {node}"
    );
    assert_eq!(
        *usage,
        Usage {
            used: 1,
            usedmem: 20000,
            usedcores: 30
        }
    );
    let bind_time: i64 = annotation(&p, "hami.io/bind-time")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("hami.io/bind-time: {p}"));
    assert!((chrono::Utc::now().timestamp() - bind_time).abs() < 60);
    let n = api.get("Node", None, &node).expect("node");
    let lock = annotation(&n, "hami.io/mutex.lock").unwrap_or_else(|| panic!("no node lock: {n}"));
    let (taken, lock_ns, lock_pod) = parse_lock(lock);
    assert_eq!((lock_ns.as_str(), lock_pod.as_str()), (NS, "train-1"));
    assert!((chrono::Utc::now().timestamp() - taken.timestamp()).abs() < 60);
    assert!(
        api.wait_until(Duration::from_secs(5), |a| {
            event_with(&a.events_for(NS, "train-1"), "BindingSucceed").is_some()
        })
        .await
    );
    let events = api.events_for(NS, "train-1");
    for reason in ["FilteringSucceed", "BindingSucceed"] {
        let e = event_with(&events, reason).expect("event");
        assert_eq!(e["source"]["component"], SCHEDULER, "{reason}: {e}");
        assert_eq!(e["involvedObject"]["kind"], "Pod", "{e}");
        assert_eq!(
            e["involvedObject"]["uid"],
            uid.as_str(),
            "describe finds it: {e}"
        );
        assert_eq!(e["type"], "Normal", "{e}");
    }
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.pod(&uid).is_some_and(|p| p["phase"] == "Bound")
        })
        .await;
    assert!(ok, "pod Bound in /debug/state: {}", state.0);
    assert_eq!(state.gpu_usage(gpu), *usage);

    // The kubelet runs the pod to completion: GPUs released.
    device_plugin_allocated(&api, NS, "train-1");
    api.set_pod_phase(NS, "train-1", "Succeeded");
    let (state, ok) = server
        .wait_state(Duration::from_secs(10), |s| {
            s.pod(&uid).is_none() && total_usage(s) == Usage::default()
        })
        .await;
    assert!(ok, "GPUs of a Succeeded pod released: {}", state.0);
}

#[tokio::test]
async fn a_large_rejection_and_a_long_node_name_reach_the_cluster() {
    let api = FakeApiServer::start().await;
    let names: Vec<String> = (0..120).map(|i| format!("rack-{i:03}-gpu-node")).collect();
    for name in &names {
        add_node(&api, name, 1, 10);
    }
    // Longer than a label value may be (63), as a node name may be (253).
    let long = format!("{}.compute.internal", "ip-10-0-0-1".repeat(6));
    let mut far_node = gpu_node(&long, 1, 10);
    // The kubelet's hostname label is the short host name.
    far_node["metadata"]["labels"]["kubernetes.io/hostname"] = json!("ip-10-0-0-1");
    api.create(far_node);
    let server = LiveServer::start(&api, &[]).await;

    // Nothing fits anywhere: every node is rejected, where kube-scheduler's
    // preemption will not try to make room, and the event still gets recorded.
    create_pod(&api, gpu_pod(NS, "too-big", 1, 200000, 10));
    let stored = api_pod(&api, NS, "too-big");
    let uid = uid_of(&stored);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let answer = server.filter(&stored, &candidates).await;
    assert_eq!(
        answer["FailedNodes"].as_object().map(|m| m.len()),
        Some(120),
        "{answer}"
    );
    assert_eq!(
        answer["FailedAndUnresolvableNodes"], answer["FailedNodes"],
        "GPU shortage is not for preemption to solve: {answer}"
    );
    assert!(
        api.wait_until(Duration::from_secs(5), |a| {
            event_with(&a.events_for(NS, "too-big"), "FilteringFailed").is_some()
        })
        .await,
        "the API server took the FilteringFailed event"
    );
    let events = api.events_for(NS, "too-big");
    let failed = event_with(&events, "FilteringFailed").expect("event");
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("no available node, 120 nodes do not meet"),
        "{message}"
    );
    assert!(message.len() <= 1024, "{}", message.len());
    assert_eq!(failed["involvedObject"]["uid"], uid.as_str(), "{failed}");

    // A node name too long for the vgpu-node label: the placement still lands.
    create_pod(&api, gpu_pod(NS, "far", 1, 1000, 10));
    let node = server.schedule(&api, NS, "far", &[long.as_str()]).await;
    assert_eq!(node, long);
    let p = api_pod(&api, NS, "far");
    assert_eq!(
        annotation(&p, "hami.io/vgpu-node"),
        Some(long.as_str()),
        "{p}"
    );
    assert_eq!(label(&p, "hami.io/vgpu-node"), None, "{p}");
    assert_eq!(p["spec"]["nodeName"], long.as_str(), "{p}");
}

#[tokio::test]
async fn deleted_pod_releases_and_terminating_pod_keeps_gpus_until_gone() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    add_node(&api, "gpu-b", 1, 10);
    let server = LiveServer::start(&api, &[]).await;

    // Deleted while running.
    create_pod(&api, gpu_pod(NS, "deleted", 1, 10000, 20));
    let node = server.schedule(&api, NS, "deleted", &["gpu-a"]).await;
    assert_eq!(node, "gpu-a");
    device_plugin_allocated(&api, NS, "deleted");
    let uid = uid_of(&api_pod(&api, NS, "deleted"));
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.pod(&uid).is_some_and(|p| p["phase"] == "Bound")
        })
        .await;
    assert!(ok, "{}", state.0);
    assert_eq!(state.gpu_usage(&gpu_id("gpu-a", 0)).usedmem, 10000);
    api.delete("Pod", Some(NS), "deleted");
    let (state, ok) = server
        .wait_state(Duration::from_secs(10), |s| {
            s.pod(&uid).is_none() && total_usage(s) == Usage::default()
        })
        .await;
    assert!(ok, "GPUs of a deleted pod released: {}", state.0);

    // Terminating: keeps its GPUs until the kubelet's final delete.
    create_pod(&api, gpu_pod(NS, "terminating", 1, 30000, 40));
    server.schedule(&api, NS, "terminating", &["gpu-a"]).await;
    device_plugin_allocated(&api, NS, "terminating");
    let uid = uid_of(&api_pod(&api, NS, "terminating"));
    api.begin_termination(NS, "terminating");
    assert!(
        api_pod(&api, NS, "terminating")["metadata"]["deletionTimestamp"].is_string(),
        "the fake marks the pod terminating"
    );
    // A marker created after the termination: once the server shows it, it has
    // processed the termination event too (one watch, in order).
    let marker_devices = format!("{},NVIDIA,1000,5:;", gpu_id("gpu-b", 0));
    let marker = create_pod(&api, running_pod(NS, "marker", "gpu-b", &marker_devices, 1));
    let marker_uid = uid_of(&marker);
    let (state, ok) = server
        .wait_state(Duration::from_secs(10), |s| s.pod(&marker_uid).is_some())
        .await;
    assert!(ok, "marker pod tracked: {}", state.0);
    assert_eq!(
        state.pod(&uid).map(|p| p["phase"].clone()),
        Some(json!("Bound")),
        "a terminating pod keeps its GPUs: {}",
        state.0
    );
    assert_eq!(
        state.gpu_usage(&gpu_id("gpu-a", 0)),
        Usage {
            used: 1,
            usedmem: 30000,
            usedcores: 40
        }
    );
    api.finish_deletion(NS, "terminating");
    let (state, ok) = server
        .wait_state(Duration::from_secs(10), |s| {
            s.pod(&uid).is_none() && s.gpu_usage(&gpu_id("gpu-a", 0)) == Usage::default()
        })
        .await;
    assert!(
        ok,
        "GPUs released once the terminating pod is gone: {}",
        state.0
    );
    assert_eq!(
        state.gpu_usage(&gpu_id("gpu-b", 0)),
        Usage {
            used: 1,
            usedmem: 1000,
            usedcores: 5
        },
        "the marker pod's existing allocation counts"
    );
}

/// What the node watch brings in takes effect at once: a device plugin that stopped
/// answering (handshake unanswered for over 60 s, no allocatable GPUs) makes the
/// node unschedulable, its return makes it schedulable again, and a changed
/// register annotation changes the GPUs.
#[tokio::test]
async fn node_health_and_registration_follow_the_watch() {
    let api = FakeApiServer::start().await;
    let mut silent = gpu_node("gpu-silent", 1, 10);
    let asked = (chrono::Local::now() - chrono::Duration::seconds(120))
        .format("%Y-%m-%d %H:%M:%S")
        .to_string();
    silent["metadata"]["annotations"]["hami.io/node-handshake"] =
        json!(format!("Requesting_{asked}"));
    silent["status"]["allocatable"]["nvidia.com/gpu"] = json!("0");
    api.create(silent);
    add_node(&api, "gpu-grow", 1, 10);
    let server = LiveServer::start(&api, &[]).await;

    create_pod(&api, gpu_pod(NS, "probe", 1, 1000, 1));
    let stored = api_pod(&api, NS, "probe");
    let answer = server.filter(&stored, &["gpu-silent"]).await;
    assert_eq!(
        answer["FailedNodes"]["gpu-silent"], "node GPU device plugin not ready",
        "{answer}"
    );
    let state = server.state().await;
    assert!(
        state.node("gpu-silent")["registrationError"]
            .as_str()
            .is_some_and(|e| e.contains("device plugin")),
        "{}",
        state.0
    );

    // The device plugin is back: allocatable GPUs again.
    let mut node = api.get("Node", None, "gpu-silent").expect("node");
    node["status"]["allocatable"]["nvidia.com/gpu"] = json!("10");
    api.update(node);
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.node("gpu-silent")["registrationError"].is_null()
        })
        .await;
    assert!(ok, "{}", state.0);
    assert_eq!(
        server.filter_one(&api, NS, "probe", &["gpu-silent"]).await,
        "gpu-silent"
    );

    // Two more GPUs registered on gpu-grow.
    let devices: Vec<_> = (0..3)
        .map(|i| support::h100(&gpu_id("gpu-grow", i), i))
        .collect();
    set_annotations(
        &api,
        "Node",
        None,
        "gpu-grow",
        &[(
            "hami.io/node-nvidia-register",
            Some(&support::register_annotation(&devices)),
        )],
    );
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.node("gpu-grow")["gpus"].as_array().map(Vec::len) == Some(3)
        })
        .await;
    assert!(ok, "new GPUs picked up from the watch: {}", state.0);
}

/// `--node-label-selector`: only matching nodes are registered; a node that gets
/// the label later is picked up.
#[tokio::test]
async fn node_label_selector_limits_the_nodes() {
    let api = FakeApiServer::start().await;
    let mut labelled = gpu_node("gpu-in", 1, 10);
    labelled["metadata"]["labels"]["pool"] = json!("vgpu");
    api.create(labelled);
    add_node(&api, "gpu-out", 1, 10);
    let server = LiveServer::start(&api, &["--node-label-selector", "pool=vgpu"]).await;
    let state = server.state().await;
    assert_eq!(state.node_names(), vec!["gpu-in"], "{}", state.0);
    create_pod(&api, gpu_pod(NS, "picky", 1, 1000, 1));
    let answer = server
        .filter(&api_pod(&api, NS, "picky"), &["gpu-out"])
        .await;
    assert_eq!(
        answer["FailedNodes"]["gpu-out"], "node unregistered",
        "{answer}"
    );

    let mut out = api.get("Node", None, "gpu-out").expect("node");
    out["metadata"]["labels"]["pool"] = json!("vgpu");
    api.update(out);
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.0["nodes"].as_array().map(Vec::len) == Some(2)
        })
        .await;
    assert!(ok, "{}", state.0);
    assert_eq!(
        server.filter_one(&api, NS, "picky", &["gpu-out"]).await,
        "gpu-out"
    );
}

/// The API server takes a Binding to any node name; `/bind` refuses a node this
/// scheduler does not know instead of binding the pod to it.
#[tokio::test]
async fn bind_to_a_node_the_scheduler_does_not_know_is_refused() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    let server = LiveServer::start(&api, &[]).await;
    let mut cpu = gpu_pod(NS, "cpu-job", 1, 1000, 1);
    cpu["spec"]["containers"] = json!([container("app", &[("cpu", "1")])]);
    let cpu = create_pod(&api, cpu);
    let error = server
        .bind(NS, "cpu-job", &uid_of(&cpu), "ghost-node")
        .await;
    assert!(
        error.contains("ghost-node") && error.contains("not found"),
        "refused: {error:?}"
    );
    let stored = api_pod(&api, NS, "cpu-job");
    assert!(stored["spec"]["nodeName"].is_null(), "not bound: {stored}");
    assert_eq!(annotation(&stored, "hami.io/bind-phase"), None, "{stored}");
    // A node the scheduler knows still binds.
    assert_eq!(server.bind(NS, "cpu-job", &uid_of(&cpu), "gpu-a").await, "");
}

/// A ResourceQuota on vGPU memory from the watch limits the namespace; deleting it
/// lifts the limit.
#[tokio::test]
async fn resource_quota_from_the_watch_limits_a_namespace() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 2, 10);
    api.create(support::quota(
        NS,
        "gpu-budget",
        &[("limits.nvidia.com/gpumem", "30000")],
    ));
    let server = LiveServer::start(&api, &[]).await;
    create_pod(&api, gpu_pod(NS, "within", 1, 20000, 10));
    server.schedule(&api, NS, "within", &["gpu-a"]).await;
    create_pod(&api, gpu_pod(NS, "beyond", 1, 20000, 10));
    let answer = server
        .filter(&api_pod(&api, NS, "beyond"), &["gpu-a"])
        .await;
    assert!(
        answer["FailedNodes"]["gpu-a"]
            .as_str()
            .is_some_and(|r| r.contains("ResourceQuotaNotFit")),
        "{answer}"
    );
    let state = server.state().await;
    assert_eq!(state.0["quotas"][0]["usedMemory"], 20000, "{}", state.0);

    api.delete("ResourceQuota", Some(NS), "gpu-budget");
    let (state, ok) = server
        .wait_state(Duration::from_secs(5), |s| {
            s.0["quotas"].as_array().is_some_and(Vec::is_empty)
        })
        .await;
    assert!(ok, "{}", state.0);
    assert_eq!(
        server.filter_one(&api, NS, "beyond", &["gpu-a"]).await,
        "gpu-a"
    );
}
