//! Kubernetes' own gangs (`scheduling.k8s.io/v1alpha2` PodGroups, pods naming
//! them in `spec.schedulingGroup`) end to end against the fake kube-apiserver
//! with the GenericWorkload gate on: a gang that fits binds whole, one that does
//! not binds nobody and holds no GPU while a pod that fits binds at once, native
//! and Volcano PodGroups share a queue, a restart while a native gang waits loses
//! nothing, and a server without the APIs works as before.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};

const NS: &str = "ml";
const ARGS: &[&str] = &["--schedule-period", "200ms"];

/// A native PodGroup as a 1.36 workload controller creates it.
fn native_podgroup(name: &str, min: u32) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": "workers"}},
            "schedulingPolicy": {"gang": {"minCount": min}},
            "disruptionMode": "PodGroup"
        }
    })
}

/// The Workload the group was made from.
fn workload(name: &str, min: u32) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"podGroupTemplates": [{"name": "workers",
            "schedulingPolicy": {"gang": {"minCount": min}}}]}
    })
}

/// A member of `mem` MiB naming `group` in `spec.schedulingGroup`, as the
/// webhook leaves it (our scheduler and our gate) when `gated`, or as it reaches
/// kube-scheduler when the webhook never saw it.
fn native_member(name: &str, group: &str, mem: u64, gated: bool) -> Value {
    let mut p = gpu_pod(NS, name, 1, mem, 0);
    p["spec"]["schedulerName"] = json!(SCHEDULER);
    p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
    if gated {
        p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
    }
    p
}

fn start_api() -> FakeApiServer {
    let api = FakeApiServer::start_blocking();
    api.set_workload_apis(true);
    api
}

/// The gang's entry in `/debug/queues`, once the planner has seen it.
async fn gang_view(server: &LiveServer, gang: &str) -> Value {
    gang_view_where(server, gang, "", |_| true).await
}

/// The gang as `/debug/queues` shows it once it shows it as `wanted` says.
async fn gang_view_where(
    server: &LiveServer,
    gang: &str,
    what: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let find = |body: &str| -> Option<Value> {
        let view: Value = serde_json::from_str(body).ok()?;
        view["gangs"]
            .as_array()?
            .iter()
            .find(|g| g["gang"] == gang && g["minMember"] != 1 && wanted(g))
            .cloned()
    };
    let body = wait_for_page(
        server,
        "/debug/queues",
        &format!("gang {gang} {what}"),
        |b| find(b).is_some(),
    )
    .await;
    find(&body).expect("the page just showed the gang")
}

/// The members `p0` and `p1` of a gang of two that fits are released together,
/// each binds on the node its plan wrote, one per node.
async fn pair_binds_as_planned(api: &FakeApiServer, server: &LiveServer) {
    wait_for(server, "both gates lifted", || {
        (0..2).all(|i| !gang_gated(api, NS, &format!("p{i}")))
    })
    .await;
    let mut nodes = Vec::new();
    for i in 0..2 {
        let name = format!("p{i}");
        let planned = annotation(&api_pod(api, NS, &name), "hami.io/vgpu-node")
            .expect("planned node written before the gate is lifted")
            .to_string();
        let node = server.schedule(api, NS, &name, &["n1", "n2"]).await;
        assert_eq!(node, planned, "{name} follows its plan");
        nodes.push(node);
    }
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_gang_that_fits_is_planned_released_together_and_binds_whole() {
    let api = start_api();
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    api.create(workload("pair", 2));
    api.create(native_podgroup("pair", 2));
    for i in 0..2 {
        create_pod(&api, native_member(&format!("p{i}"), "pair", 50000, true));
    }
    let server = LiveServer::start(&api, ARGS).await;
    pair_binds_as_planned(&api, &server).await;
    let g = gang_view(&server, "ml/pair").await;
    assert_eq!(g["api"], "scheduling.k8s.io/v1alpha2", "{g}");
    assert_eq!(g["minMember"], 2, "{g}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_gang_that_cannot_fit_binds_nobody_holds_no_gpu_and_a_fitting_pod_binds_at_once() {
    let api = start_api();
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    api.create(native_podgroup("big", 3));
    // Two members as the webhook leaves them, one it never saw (kube-scheduler
    // offers that one to /filter again and again).
    create_pod(&api, native_member("b0", "big", 50000, true));
    create_pod(&api, native_member("b1", "big", 50000, true));
    create_pod(&api, native_member("b2", "big", 50000, false));
    let server = LiveServer::start(&api, ARGS).await;
    let g = gang_view(&server, "ml/big").await;
    assert_eq!(g["api"], "scheduling.k8s.io/v1alpha2", "{g}");
    assert_eq!(g["members"], 3, "{g}");
    assert_ne!(g["phase"], "Running", "{g}");
    assert!(
        g["message"].as_str().is_some_and(|m| !m.is_empty()),
        "a waiting native gang says why: {g}"
    );
    for _ in 0..5 {
        let answer = server.filter(&api_pod(&api, NS, "b2"), &["n1", "n2"]).await;
        assert!(
            answer["NodeNames"].as_array().is_none_or(|n| n.is_empty()),
            "no node for a member of a gang that cannot be placed whole: {answer}"
        );
        let text = answer.to_string();
        assert!(text.contains("gang ml/big"), "{answer}");
    }
    let state = server.state().await;
    assert_eq!(
        total_usage(&state).usedmem,
        0,
        "the waiting gang holds no GPU"
    );
    for name in ["b0", "b1"] {
        assert!(gang_gated(&api, NS, name), "{name} stays gated");
    }
    // A plain pod that fits either node binds at once.
    create_pod(&api, gpu_pod(NS, "solo", 1, 80000, 0));
    server.schedule(&api, NS, "solo", &["n1", "n2"]).await;
    wait_for_page(&server, "/metrics", "the native gang counted", |metrics| {
        metrics.contains(r#"vgpu_scheduler_queue_native_podgroups{queue="default",phase="Inqueue",reason="NotEnoughResources"} 1"#)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_and_volcano_podgroups_share_one_queue() {
    let api = start_api();
    add_node(&api, "n1", 2, 1);
    api.create(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "team"}, "spec": {"weight": 1}
    }));
    let mut volcano = gang_podgroup(NS, "vj", 1);
    volcano["spec"]["queue"] = json!("team");
    api.create(volcano);
    let mut native = native_podgroup("kj", 1);
    native["metadata"]["annotations"] = json!({"scheduling.volcano.sh/queue-name": "team"});
    api.create(native);
    create_pod(&api, gated_member(NS, "v0", "vj"));
    create_pod(&api, native_member("k0", "kj", 80000, true));
    let server = LiveServer::start(&api, ARGS).await;
    wait_for(&server, "both gangs released", || {
        !gang_gated(&api, NS, "v0") && !gang_gated(&api, NS, "k0")
    })
    .await;
    server.schedule(&api, NS, "v0", &["n1"]).await;
    device_plugin_allocated(&api, NS, "v0");
    server.schedule(&api, NS, "k0", &["n1"]).await;
    let (_, body) = server.get("/debug/queues").await;
    let view: Value = serde_json::from_str(&body).expect("JSON");
    let queue_of = |gang: &str| {
        view["gangs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| g["gang"] == gang)
            .map(|g| g["queue"].clone())
    };
    assert_eq!(queue_of("ml/vj"), Some(json!("team")), "{body}");
    assert_eq!(queue_of("ml/kj"), Some(json!("team")), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_a_native_gang_waits_loses_nothing() {
    let api = start_api();
    add_node(&api, "n1", 1, 1);
    api.create(native_podgroup("wait", 2));
    for i in 0..2 {
        create_pod(&api, native_member(&format!("w{i}"), "wait", 50000, true));
    }
    let mut server = LiveServer::start(&api, ARGS).await;
    let before = gang_view(&server, "ml/wait").await;
    assert_ne!(before["phase"], "Running", "{before}");
    server.kill();
    let server = LiveServer::start(&api, ARGS).await;
    let after = gang_view(&server, "ml/wait").await;
    assert_eq!(after["members"], 2, "{after}");
    assert_eq!(after["minMember"], 2, "{after}");
    assert_eq!(after["api"], "scheduling.k8s.io/v1alpha2", "{after}");
    for i in 0..2 {
        assert!(gang_gated(&api, NS, &format!("w{i}")));
    }
    assert_eq!(total_usage(&server.state().await).usedmem, 0);
    // Room appears: the gang is planned whole and binds.
    add_node(&api, "n2", 1, 1);
    wait_for(&server, "both gates lifted", || {
        (0..2).all(|i| !gang_gated(&api, NS, &format!("w{i}")))
    })
    .await;
    for i in 0..2 {
        server
            .schedule(&api, NS, &format!("w{i}"), &["n1", "n2"])
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_workload_apis_the_server_works_as_before() {
    let api = FakeApiServer::start_blocking();
    add_node(&api, "n1", 1, 1);
    api.create(gang_podgroup(NS, "train", 1));
    create_pod(&api, gated_member(NS, "t0", "train"));
    // The pod field of a disabled feature is dropped, as the real server drops it.
    create_pod(&api, native_member("plain", "ghost", 80000, false));
    assert!(
        api_pod(&api, NS, "plain")["spec"]
            .get("schedulingGroup")
            .is_none()
    );
    let server = LiveServer::start(&api, ARGS).await;
    wait_for(&server, "the Volcano gang released", || {
        !gang_gated(&api, NS, "t0")
    })
    .await;
    server.schedule(&api, NS, "t0", &["n1"]).await;
    assert_eq!(
        server.log_count("scheduling.k8s.io PodGroup"),
        0,
        "no watch of kinds the server does not serve: {}",
        server.log_tail(30)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_podgroup_takes_what_it_leaves_unsaid_from_its_workload_template() {
    let api = start_api();
    add_node(&api, "n1", 1, 1);
    // The controller copied the gang policy but not the disruption mode.
    let mut group = native_podgroup("job-0", 2);
    group["spec"]["podGroupTemplateRef"]["workload"]["workloadName"] = json!("job");
    group["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("disruptionMode");
    api.create(group);
    for i in 0..2 {
        create_pod(&api, native_member(&format!("j{i}"), "job-0", 50000, true));
    }
    let server = LiveServer::start(&api, ARGS).await;
    let g = gang_view(&server, "ml/job-0").await;
    assert_eq!(g["disruptionMode"], "Pod", "the API's default: {g}");
    // The Workload arrives after its PodGroup, as the watches may deliver them.
    let mut job = workload("job", 2);
    job["spec"]["podGroupTemplates"][0]["disruptionMode"] = json!("PodGroup");
    api.create(job);
    let g = gang_view_where(
        &server,
        "ml/job-0",
        "with the template's disruption mode",
        |g| g["disruptionMode"] == "PodGroup",
    )
    .await;
    assert_eq!(g["workload"], "ml/job", "{g}");
    assert_eq!(g["minMember"], 2, "what the PodGroup says wins: {g}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_serving_v1beta1_is_discovered_and_its_gang_binds_whole() {
    let api = start_api();
    api.set_workload_api_version("v1beta1");
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    api.create(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "pair", "namespace": NS},
        "spec": {"podGroupTemplates": [{"name": "workers",
            "schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": {"all": {}}}]}
    }));
    api.create(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pair", "namespace": NS},
        "spec": {"workloadRef": {"workloadName": "pair", "templateName": "workers"},
                 "schedulingPolicy": {"gang": {"minCount": 2}}}
    }));
    for i in 0..2 {
        create_pod(&api, native_member(&format!("p{i}"), "pair", 50000, true));
    }
    let server = LiveServer::start(&api, ARGS).await;
    pair_binds_as_planned(&api, &server).await;
    let g = gang_view(&server, "ml/pair").await;
    assert_eq!(g["api"], "scheduling.k8s.io/v1beta1", "{g}");
    assert_eq!(g["workload"], "ml/pair", "{g}");
    assert_eq!(g["disruptionMode"], "PodGroup", "{g}");
}
