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

const NS: &str = "ml";
const GATE: &str = "vgpu-scheduler.io/gang";

fn podgroup(name: &str, min: u32) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min, "queue": "default"}
    })
}

/// A member as the webhook leaves it: our scheduler, our gate, the group annotation.
fn member(name: &str, group: &str) -> Value {
    let mut p = gpu_pod(NS, name, 1, 80000, 0);
    p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": group});
    p["spec"]["schedulerName"] = json!(SCHEDULER);
    p["spec"]["schedulingGates"] = json!([{"name": GATE}]);
    p
}

fn gated(api: &FakeApiServer, name: &str) -> bool {
    api_pod(api, NS, name)["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|g| g.iter().any(|g| g["name"] == GATE))
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
        (0..3).all(|i| !gated(&api, &format!("w{i}")))
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
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    api.create(podgroup("big", 3));
    for i in 0..3 {
        create_pod(&api, member(&format!("b{i}"), "big"));
    }
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for(
        &server,
        "PodGroup condition",
        Duration::from_secs(10),
        || {
            api.get("PodGroup", Some(NS), "big")
                .is_some_and(|g| g["status"]["conditions"][0]["reason"] == "NotEnoughResources")
        },
    )
    .await;
    let group = api.get("PodGroup", Some(NS), "big").unwrap();
    assert_eq!(group["status"]["phase"], "Inqueue", "{group}");
    let message = group["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap_or("");
    assert!(message.contains("tasks in gang unschedulable"), "{message}");
    for i in 0..3 {
        assert!(gated(&api, &format!("b{i}")));
    }
    let (code, body) = server.get("/debug/queues").await;
    assert_eq!(code, 200);
    assert!(body.contains("ml/big"), "{body}");
    let (code, metrics) = server.get("/metrics").await;
    assert_eq!(code, 200);
    assert!(
        metrics.contains(r#"vgpu_scheduler_queue_podgroups{queue="default",phase="Inqueue"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vgpu_scheduler_queue_weight{queue="default"} 1"#),
        "{metrics}"
    );
    // A third GPU arrives: the gang is placed.
    add_node(&api, "n2", 1, 1);
    wait_for(&server, "gates lifted", Duration::from_secs(10), || {
        (0..3).all(|i| !gated(&api, &format!("b{i}")))
    })
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
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        (0..2).all(|i| gated(&api, &format!("w{i}"))),
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
        (0..2).all(|i| !gated(&api, &format!("w{i}")))
    })
    .await;
}
