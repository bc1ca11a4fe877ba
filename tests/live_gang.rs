//! Gang scheduling end to end against the fake kube-apiserver: gated pods of a
//! PodGroup are planned whole, their plans written onto the pods and their gates
//! lifted together; kube-scheduler-shaped /filter and /bind then follow the plan;
//! a restart between plan and bind loses nothing; a gang that does not fit stays
//! gated and its PodGroup says why.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::base64_decode;

const NS: &str = "ml";

fn podgroup(name: &str, min: u32) -> Value {
    gang_podgroup(NS, name, min)
}

fn member(name: &str, group: &str) -> Value {
    gated_member(NS, name, group)
}

async fn wait_for(server: &LiveServer, what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; server log:\n{}",
            server.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_gang_is_planned_released_together_and_bound_even_across_a_restart() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    add_node(&api, "n2", 2, 1);
    api.create(podgroup("train", 3));
    for i in 0..3 {
        create_pod(&api, member(&format!("w{i}"), "train"));
    }
    let mut server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for(&server, "all gates lifted", Duration::from_secs(10), || {
        (0..3).all(|i| !gang_gated(&api, NS, &format!("w{i}")))
    })
    .await;
    for i in 0..3 {
        let p = api_pod(&api, NS, &format!("w{i}"));
        assert!(
            annotation(&p, "vgpu-scheduler.io/gang-plan-deadline").is_some(),
            "plan written before the gate is lifted: {p}"
        );
    }
    // Restart between plan and bind: the plan survives on the pods.
    server.kill();
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    let mut nodes = Vec::new();
    for i in 0..3 {
        let name = format!("w{i}");
        let planned = annotation(&api_pod(&api, NS, &name), "hami.io/vgpu-node")
            .expect("planned node")
            .to_string();
        let node = server.schedule(&api, NS, &name, &["n1", "n2"]).await;
        assert_eq!(node, planned, "{name} follows its plan");
        device_plugin_allocated(&api, NS, &name);
        nodes.push(node);
    }
    // The fourth GPU is still free for an ordinary pod; nothing is double-booked.
    create_pod(&api, gpu_pod(NS, "solo", 1, 80000, 0));
    server.schedule(&api, NS, "solo", &["n1", "n2"]).await;
    let usage = cluster_usage(&api);
    assert!(usage.values().all(|u| u.used <= 1), "{usage:?}");
    wait_for(&server, "PodGroup Running", Duration::from_secs(10), || {
        api.get("PodGroup", Some(NS), "train")
            .is_some_and(|g| g["status"]["phase"] == "Running")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_does_not_fit_stays_gated_and_its_podgroup_says_why() {
    let api = gang_of_three_on_two_gpus().await;
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for_not_enough_resources(&api, &server).await;
    let group = api.get("PodGroup", Some(NS), "big").unwrap();
    assert_eq!(group["status"]["phase"], "Inqueue", "{group}");
    let message = group["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap_or("");
    assert!(message.contains("tasks in gang unschedulable"), "{message}");
    for i in 0..3 {
        assert!(gang_gated(&api, NS, &format!("b{i}")));
    }
    wait_for_page(&server, "/debug/queues", "the gang listed", |body| {
        body.contains("ml/big")
    })
    .await;
    wait_for_page(&server, "/metrics", "the queue's gauges", |metrics| {
        metrics.contains(r#"vgpu_scheduler_queue_podgroups{queue="default",phase="Inqueue"} 1"#)
            && metrics.contains(r#"vgpu_scheduler_queue_weight{queue="default"} 1"#)
    })
    .await;
    // A third GPU arrives: the gang is placed.
    add_node(&api, "n2", 1, 1);
    wait_for(&server, "gates lifted", Duration::from_secs(10), || {
        (0..3).all(|i| !gang_gated(&api, NS, &format!("b{i}")))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_podgroup_status_the_api_server_refused_is_written_in_a_later_cycle() {
    let api = gang_of_three_on_two_gpus().await;
    // The first writes of the PodGroup's status fail; the gang's verdict stays
    // the same cycle after cycle, and the status is still written.
    api.inject_errors(
        "PATCH /apis/scheduling.volcano.sh/v1beta1/namespaces/ml/podgroups/big",
        500,
        3,
    );
    let server = LiveServer::start(&api, &["--schedule-period", "100ms"]).await;
    wait_for_not_enough_resources(&api, &server).await;
    let tried = api.requests_matching("PATCH", "/namespaces/ml/podgroups/big");
    assert!(tried >= 4, "tried only {tried} times");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_pod_is_released_with_its_plan_in_one_write() {
    let api = one_queued_pod().await;
    let (server, calls) = release_solo(&api).await;
    let pod = api.get("Pod", Some(NS), "solo").expect("solo");
    let annotations = &pod["metadata"]["annotations"];
    assert!(
        annotations["hami.io/vgpu-devices-to-allocate"].is_string()
            && annotations["vgpu-scheduler.io/gang-plan-deadline"].is_string(),
        "the plan came with the release: {pod}"
    );
    // A gang of one has no member to wait for: no write of the plan before
    // the write that lifts its gate.
    // Nor a read of the pod: the update is made against the version the watch
    // showed.
    assert_eq!(calls, (1, 0), "{:?}", api.request_log());
    server.schedule(&api, NS, "solo", &["n1"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_pod_changed_since_the_watch_showed_it_is_read_and_released() {
    let api = one_queued_pod().await;
    // The release is refused as a conflict once (the pod changed meanwhile).
    api.inject_errors("PATCH /api/v1/namespaces/ml/pods/solo", 409, 1);
    let (server, calls) = release_solo(&api).await;
    assert_eq!(calls, (2, 1), "{:?}", api.request_log());
    server.schedule(&api, NS, "solo", &["n1"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_pod_whose_release_is_refused_is_planned_and_released_again() {
    let api = one_queued_pod().await;
    api.inject_errors("PATCH /api/v1/namespaces/ml/pods/solo", 500, 1);
    let (server, calls) = release_solo(&api).await;
    assert_eq!(calls.0, 2, "{:?}", api.request_log());
    server.schedule(&api, NS, "solo", &["n1"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_pod_released_by_a_write_whose_answer_was_lost_binds_once() {
    let api = one_queued_pod().await;
    // The release is made, but its answer is lost: the plan is taken back,
    // and the pod, released with it, must still bind with one GPU booked.
    api.inject_lost_answers("PATCH /api/v1/namespaces/ml/pods/solo", 504, 1);
    let (server, _) = release_solo(&api).await;
    server.schedule(&api, NS, "solo", &["n1"]).await;
    let usage = total_usage(&server.state().await);
    assert_eq!(usage.usedmem, 80000, "booked once: {usage:?}");
}

/// Starts the server and waits for it to lift `solo`'s gate; returns it with
/// the PATCHes and GETs of that pod made so far.
async fn release_solo(api: &FakeApiServer) -> (LiveServer, (usize, usize)) {
    let server = LiveServer::start(api, &["--schedule-period", "100ms"]).await;
    wait_for(&server, "gate lifted", Duration::from_secs(10), || {
        !gang_gated(api, NS, "solo")
    })
    .await;
    let calls = (
        api.requests_matching("PATCH", "/namespaces/ml/pods/solo"),
        api.requests_matching("GET", "/namespaces/ml/pods/solo"),
    );
    (server, calls)
}

/// A node of two GPUs and a gated one-GPU pod `solo` in queue `default`.
async fn one_queued_pod() -> FakeApiServer {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    let mut pod = gpu_pod(NS, "solo", 1, 80000, 0);
    pod["metadata"]["annotations"] = json!({"scheduling.volcano.sh/queue-name": "default"});
    pod["spec"]["schedulerName"] = json!(SCHEDULER);
    pod["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
    create_pod(&api, pod);
    api
}

/// A node of two GPUs and a gang `big` of three one-GPU members.
async fn gang_of_three_on_two_gpus() -> FakeApiServer {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    api.create(podgroup("big", 3));
    for i in 0..3 {
        create_pod(&api, member(&format!("b{i}"), "big"));
    }
    api
}

/// Waits until the PodGroup `big` says it waits for resources.
async fn wait_for_not_enough_resources(api: &FakeApiServer, server: &LiveServer) {
    wait_for(
        server,
        "PodGroup condition",
        Duration::from_secs(10),
        || {
            api.get("PodGroup", Some(NS), "big")
                .is_some_and(|g| g["status"]["conditions"][0]["reason"] == "NotEnoughResources")
        },
    )
    .await;
}

fn kube_scheduler_lease(holder: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "vgpu-scheduler-kube-scheduler", "namespace": "vgpu-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "renewTime": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_planner_runs_only_where_kube_scheduler_leads() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    api.create(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vgpu-system"}}),
    );
    api.create(kube_scheduler_lease("other-pod-0_8f14e45f"));
    api.create(podgroup("train", 2));
    for i in 0..2 {
        create_pod(&api, member(&format!("w{i}"), "train"));
    }
    let server = LiveServer::start_with(
        &api,
        LiveOptions::args(&[
            "--schedule-period",
            "200ms",
            "--planner-follows-lease",
            "vgpu-system/vgpu-scheduler-kube-scheduler",
        ])
        .env("POD_NAME", "this-pod-0"),
    )
    .await;
    // The follower reads the Lease every 2 s and judges each read before the
    // next, so once the fake has answered two reads, the first was judged. Of
    // the planner periods counted after that, the second decided after it too:
    // had the Lease been judged this pod's, that period would have planned.
    let lease_path = "/namespaces/vgpu-system/leases/vgpu-scheduler-kube-scheduler";
    assert!(
        api.wait_until(Duration::from_secs(10), |a| a
            .requests_matching("GET", lease_path)
            >= 2)
            .await,
        "the Lease was not read twice: {:?}",
        api.request_log()
    );
    let skipped = r#"vgpu_scheduler_planning_cycles_total{outcome="skipped"}"#;
    let since = server.metric(skipped).await;
    server
        .wait_metric(skipped, since + 2, Duration::from_secs(10))
        .await;
    assert_eq!(
        server
            .metric(r#"vgpu_scheduler_planning_cycles_total{outcome="run"}"#)
            .await,
        0,
        "another pod's kube-scheduler leads: no planning cycle here"
    );
    assert!(
        (0..2).all(|i| gang_gated(&api, NS, &format!("w{i}"))),
        "another pod's kube-scheduler leads: no planning here"
    );
    // This pod's kube-scheduler takes the lease over.
    let mut lease = api
        .get(
            "Lease",
            Some("vgpu-system"),
            "vgpu-scheduler-kube-scheduler",
        )
        .unwrap();
    lease["spec"] = kube_scheduler_lease("this-pod-0_c9f0f895")["spec"].clone();
    api.update(lease);
    wait_for(&server, "gates lifted", Duration::from_secs(10), || {
        (0..2).all(|i| !gang_gated(&api, NS, &format!("w{i}")))
    })
    .await;
}

/// A worker as a StatefulSet or Job controller hands it to the webhook on CREATE.
fn created_worker(name: &str, group: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS,
                     "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "default-scheduler",
            "restartPolicy": "Never",
            "containers": [support::container("cuda", &[
                ("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "80000")])],
        }
    })
}

/// Runs our webhook on a CREATE, applies its patch, and creates the result.
async fn admit_and_create(server: &LiveServer, api: &FakeApiServer, pod: Value) {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "6a1f0c3e-5b2d-4e8f-9a7c-3d2e1f0a9b8c",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": NS, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:statefulset-controller"},
            "object": pod, "oldObject": null, "dryRun": false}
    });
    let (status, answer) = server.post_json("/mutate", &review).await;
    assert_eq!(status, 200, "{answer}");
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    let bytes = base64_decode(response["patch"].as_str().expect("patch"));
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("JSON patch");
    let mut out = pod.clone();
    json_patch::patch(&mut out, &patch).expect("patch applies");
    create_pod(api, out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_gate_plan_and_strict_bind_end_to_end() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    add_node(&api, "n2", 1, 1);
    let mut group = podgroup("sync", 3);
    group["metadata"]["annotations"] = json!({"vgpu-scheduler.io/gang-strict": "true"});
    api.create(group);
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    // The controller creates the workers one by one; each is gated at admission,
    // and nothing is planned before the third exists.
    for i in 0..2 {
        admit_and_create(&server, &api, created_worker(&format!("s{i}"), "sync")).await;
    }
    // The planner has looked at the gang with both members and said why it waits;
    // a cycle that planned would have lifted the gates before writing the status.
    wait_for(
        &server,
        "PodGroup status counting two members",
        Duration::from_secs(10),
        || {
            api.get("PodGroup", Some(NS), "sync").is_some_and(|g| {
                g["status"]["conditions"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("2 of minMember 3 pods exist"))
            })
        },
    )
    .await;
    assert!(gang_gated(&api, NS, "s0") && gang_gated(&api, NS, "s1"));
    admit_and_create(&server, &api, created_worker("s2", "sync")).await;
    wait_for(&server, "gates lifted", Duration::from_secs(10), || {
        (0..3).all(|i| !gang_gated(&api, NS, &format!("s{i}")))
    })
    .await;
    // kube-scheduler schedules them concurrently; the strict barrier holds the
    // first binds until the third arrives, then all bind.
    let mut binds = Vec::new();
    for i in 0..3 {
        let name = format!("s{i}");
        let node = server.filter_one(&api, NS, &name, &["n1", "n2"]).await;
        let uid = uid_of(&api_pod(&api, NS, &name));
        let client = server.client.clone();
        let url = server.url("/bind");
        binds.push(tokio::spawn(async move {
            let body = json!({"PodName": name, "PodNamespace": NS, "PodUID": uid, "Node": node});
            let answer: Value = client
                .post(url)
                .json(&body)
                .send()
                .await
                .expect("bind")
                .json()
                .await
                .expect("json");
            answer
        }));
        if i < 2 {
            // The bind has reached the barrier and is held there.
            server
                .wait_log_count(
                    "bind waits at its gang's barrier for the quorum",
                    i + 1,
                    Duration::from_secs(10),
                )
                .await;
            for j in 0..=i {
                assert!(
                    api_pod(&api, NS, &format!("s{j}"))["spec"]["nodeName"].is_null(),
                    "s{j} bound before the quorum"
                );
            }
        }
    }
    // HAMi's device plugin on the nodes: it takes each bound pod's devices and
    // releases the node lock, letting the next member on the same node bind.
    while !binds.iter().all(|b| b.is_finished()) {
        for i in 0..3 {
            let name = format!("s{i}");
            let p = api_pod(&api, NS, &name);
            if p["spec"]["nodeName"].is_string()
                && annotation(&p, "hami.io/bind-phase") == Some("allocating")
            {
                device_plugin_allocated(&api, NS, &name);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for b in binds {
        let answer = b.await.expect("task");
        assert_eq!(answer["Error"].as_str().unwrap_or(""), "", "{answer}");
    }
    for i in 0..3 {
        assert!(api_pod(&api, NS, &format!("s{i}"))["spec"]["nodeName"].is_string());
    }
}
