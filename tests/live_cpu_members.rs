//! Gang members that ask for no vGPU, end to end against the fake
//! kube-apiserver. kube-scheduler never asks the extender about such a pod, so
//! the planner fits it by its requests and pins it to its planned node in the
//! update that lifts its gate: a gang of GPU workers and a CPU-only launcher
//! starts whole or not at all, and every member lands where it was planned;
//! members whose required pod anti-affinity repels each other are planned (and
//! pinned) onto different nodes.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};

const NS: &str = "ml";
const PLANNED_NODE: &str = "vgpu-scheduler.io/planned-node";

/// A pod bound to `node` requesting `cpu` CPUs, started by someone else.
fn running_cpu_pod(name: &str, node: &str, cpu: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx:1.27",
            "resources": {"requests": {"cpu": cpu.to_string(), "memory": "1Gi"}}}]},
        "status": {"phase": "Running"}
    })
}

/// A gated gang member asking only for CPU and memory, as the webhook leaves it.
fn cpu_member(name: &str, group: &str, cpu: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS,
            "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"schedulerName": SCHEDULER,
            "schedulingGates": [{"name": GANG_GATE}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions":
                    [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
            "containers": [{"name": "launcher", "image": "mpioperator/openmpi:0.6.0",
                "resources": {"requests": {"cpu": cpu.to_string(), "memory": "4Gi"}}}]}
    })
}

/// Whether `node` satisfies one requirement of a node selector term.
fn requirement_holds(r: &Value, node: &Value, by_field: bool) -> bool {
    let value = if by_field {
        (r["key"] == "metadata.name")
            .then(|| node["metadata"]["name"].as_str())
            .flatten()
    } else {
        r["key"]
            .as_str()
            .and_then(|k| node["metadata"]["labels"][k].as_str())
    };
    let values: Vec<&str> = r["values"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match r["operator"].as_str() {
        Some("In") => value.is_some_and(|v| values.contains(&v)),
        Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
        Some("Exists") => value.is_some(),
        Some("DoesNotExist") => value.is_none(),
        other => panic!("operator {other:?} not expected in these pods"),
    }
}

/// The nodes kube-scheduler's NodeAffinity filter lets the pod onto.
fn nodes_affinity_allows(api: &FakeApiServer, pod: &Value, nodes: &[&str]) -> Vec<String> {
    let terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"]
        .as_array()
        .cloned();
    nodes
        .iter()
        .filter(|name| {
            let node = api.get("Node", None, name).expect("node");
            let term_holds = |t: &Value| {
                let all = |field: &str, by_field: bool| {
                    t[field]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|r| requirement_holds(r, &node, by_field))
                };
                all("matchExpressions", false) && all("matchFields", true)
            };
            terms.as_ref().is_none_or(|ts| ts.iter().any(term_holds))
        })
        .map(|n| n.to_string())
        .collect()
}

/// Waits for the Warning event that says why pinned member `name` was evicted
/// (it is written once the eviction is done).
/// Waits for the gang member `name` to be released, and checks it is pinned to
/// `node`: its plan names it, and of both test nodes its affinity allows only it.
async fn released_and_pinned_to(api: &FakeApiServer, server: &LiveServer, name: &str, node: &str) {
    wait_for(server, &format!("{name} released"), || {
        !gang_gated(api, NS, name)
    })
    .await;
    let pod = api_pod(api, NS, name);
    assert_eq!(annotation(&pod, PLANNED_NODE), Some(node), "{pod}");
    assert_eq!(
        nodes_affinity_allows(api, &pod, &["n1", "n2"]),
        vec![node.to_string()]
    );
}

async fn eviction_says(api: &FakeApiServer, server: &LiveServer, name: &str, why: &str) {
    wait_for(server, "the eviction to say why", || {
        api.events_for(NS, name).iter().any(|e| {
            e["reason"] == "PinnedNodeRefuses"
                && e["message"].as_str().is_some_and(|m| m.contains(why))
        })
    })
    .await;
}

/// Binds the pod as kube-scheduler does for a pod the extender is not asked
/// about: through `pods/binding`.
async fn kube_scheduler_binds(api: &FakeApiServer, name: &str, node: &str) {
    let pod = api_pod(api, NS, name);
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": NS, "uid": uid_of(&pod)},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let response = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/namespaces/{NS}/pods/{name}/binding",
            api.url()
        ))
        .bearer_auth(api.token())
        .json(&binding)
        .send()
        .await
        .expect("binding request");
    assert_eq!(response.status().as_u16(), 201, "binding {name} to {node}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_with_a_cpu_only_launcher_starts_whole_or_not_at_all_where_it_was_planned() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    // 63 CPUs allocatable each; 61 taken: room for a one-CPU worker on each
    // node, none for a four-CPU launcher.
    api.create(running_cpu_pod("busy-n1", "n1", 61));
    api.create(running_cpu_pod("busy-n2", "n2", 61));
    api.create(gang_podgroup(NS, "mpi", 3));
    create_pod(&api, gated_member(NS, "worker-0", "mpi"));
    create_pod(&api, gated_member(NS, "worker-1", "mpi"));
    create_pod(&api, cpu_member("launcher", "mpi", 4));
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;

    wait_for(&server, "the PodGroup to say why it waits", || {
        api.get("PodGroup", Some(NS), "mpi").is_some_and(|g| {
            g["status"]["conditions"][0]["reason"] == "NotEnoughResources"
                && g["status"]["conditions"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Insufficient cpu"))
        })
    })
    .await;
    for name in ["worker-0", "worker-1", "launcher"] {
        assert!(gang_gated(&api, NS, name), "{name} must not start alone");
        assert!(annotation(&api_pod(&api, NS, name), PLANNED_NODE).is_none());
    }

    // Room on n2: the whole gang is planned and released, the launcher pinned.
    api.delete("Pod", Some(NS), "busy-n2");
    wait_for(&server, "every gate lifted", || {
        ["worker-0", "worker-1", "launcher"]
            .iter()
            .all(|name| !gang_gated(&api, NS, name))
    })
    .await;
    let launcher = api_pod(&api, NS, "launcher");
    assert_eq!(
        annotation(&launcher, PLANNED_NODE),
        Some("n2"),
        "{launcher}"
    );
    assert_eq!(
        nodes_affinity_allows(&api, &launcher, &["n1", "n2"]),
        vec!["n2".to_string()],
        "the launcher's own affinity kept, narrowed to its planned node: {launcher}"
    );
    kube_scheduler_binds(&api, "launcher", "n2").await;
    for worker in ["worker-0", "worker-1"] {
        let planned = annotation(&api_pod(&api, NS, worker), "hami.io/vgpu-node")
            .expect("planned node")
            .to_string();
        let node = server.schedule(&api, NS, worker, &["n1", "n2"]).await;
        assert_eq!(node, planned, "{worker} follows its plan");
    }
    assert_eq!(api_pod(&api, NS, "launcher")["spec"]["nodeName"], "n2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_pinned_to_a_node_that_then_refuses_it_is_evicted_and_its_replacement_planned_elsewhere()
 {
    let api = FakeApiServer::start().await;
    let n1 = add_node(&api, "n1", 1, 1);
    api.create(gang_podgroup(NS, "ps", 1));
    let mut owned = cpu_member("ps-0", "ps", 2);
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job", "name": "ps", "uid": "6f1d3c0e-8a47-4b7e-9d1c-2f3a4b5c6d7e", "controller": true}]);
    create_pod(&api, owned);
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for(&server, "ps-0 released and pinned", || {
        !gang_gated(&api, NS, "ps-0")
    })
    .await;
    let pinned = api_pod(&api, NS, "ps-0");
    assert_eq!(
        nodes_affinity_allows(&api, &pinned, &["n1"]),
        vec!["n1".to_string()]
    );

    // Before kube-scheduler binds it, n1 is tainted against it: the pod can be
    // neither gated again nor re-pinned, so it goes for its controller to recreate.
    let mut tainted = api.get("Node", None, "n1").unwrap_or(n1);
    tainted["spec"]["taints"] =
        json!([{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]);
    api.update(tainted);
    wait_for(&server, "ps-0 evicted", || {
        api.evicted_pods()
            .iter()
            .any(|p| *p == format!("{NS}/ps-0"))
    })
    .await;
    assert!(
        api.get("Pod", Some(NS), "ps-0").is_none(),
        "a Pending pod goes at once"
    );

    // The controller's replacement is gated by the webhook and planned again, on a
    // node that takes it.
    add_node(&api, "n2", 1, 1);
    create_pod(&api, cpu_member("ps-0-retry", "ps", 2));
    released_and_pinned_to(&api, &server, "ps-0-retry", "n2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_member_is_released_before_the_launcher_is_pinned() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    api.create(gang_podgroup(NS, "mpi", 2));
    create_pod(&api, gated_member(NS, "worker-0", "mpi"));
    create_pod(&api, cpu_member("launcher", "mpi", 4));
    // The launcher's plan is written; the update that pins it and lifts its
    // gate fails once.
    let launcher_patch = format!("PATCH /api/v1/namespaces/{NS}/pods/launcher");
    api.inject_errors_after(&launcher_patch, 1, 500, 1);
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for(&server, "every gate lifted", || {
        !gang_gated(&api, NS, "worker-0") && !gang_gated(&api, NS, "launcher")
    })
    .await;
    let patches = |pod: &str| -> Vec<(usize, u16)> {
        let path = format!("/api/v1/namespaces/{NS}/pods/{pod}");
        api.request_log()
            .iter()
            .enumerate()
            .filter(|(_, (method, p, _))| method == "PATCH" && p.split('?').next() == Some(&path))
            .map(|(i, (_, _, status))| (i, *status))
            .collect()
    };
    let launcher = patches("launcher");
    let statuses: Vec<u16> = launcher.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        statuses,
        vec![200, 500, 200],
        "plan, refused pin, pin: {launcher:?}"
    );
    let worker = patches("worker-0");
    let (worker_gate, _) = *worker.last().expect("the worker's gate was lifted");
    assert!(
        worker_gate > launcher[2].0,
        "the worker's gate is lifted only after the launcher is pinned: launcher {launcher:?}, worker {worker:?}"
    );
    let pinned = api_pod(&api, NS, "launcher");
    assert_eq!(
        nodes_affinity_allows(&api, &pinned, &["n1"]),
        vec!["n1".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_that_repel_each_other_are_pinned_to_two_nodes_where_binpack_would_stack_them()
{
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    // n1 is the fuller node: binpack alone puts both members there.
    api.create(running_cpu_pod("busy-n1", "n1", 30));
    api.create(gang_podgroup(NS, "ps", 2));
    for name in ["ps-0", "ps-1"] {
        let mut member = cpu_member(name, "ps", 2);
        member["metadata"]["labels"] = json!({"app": "ps"});
        member["spec"]["affinity"]["podAntiAffinity"] = json!({
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "ps"}},
                "topologyKey": "kubernetes.io/hostname"}]});
        create_pod(&api, member);
    }
    let conf = SchedulerConfFile::new(&conf_fixture::priority_gang_then(
        "enqueue, allocate, backfill",
        &[("predicates", &[]), ("binpack", &[])],
    ));
    let server = LiveServer::start_planning(&api, &conf).await;
    wait_for(&server, "both members released", || {
        !gang_gated(&api, NS, "ps-0") && !gang_gated(&api, NS, "ps-1")
    })
    .await;
    let mut pinned_to = Vec::new();
    for name in ["ps-0", "ps-1"] {
        let pod = api_pod(&api, NS, name);
        let allowed = nodes_affinity_allows(&api, &pod, &["n1", "n2"]);
        assert_eq!(allowed.len(), 1, "{name} pinned to one node: {pod}");
        assert_eq!(annotation(&pod, PLANNED_NODE), Some(allowed[0].as_str()));
        kube_scheduler_binds(&api, name, &allowed[0]).await;
        pinned_to.push(allowed[0].clone());
    }
    pinned_to.sort();
    assert_eq!(pinned_to, vec!["n1".to_string(), "n2".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_member_repelled_by_a_pod_bound_to_its_node_since_is_evicted_and_planned_elsewhere()
 {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    api.create(gang_podgroup(NS, "ps", 1));
    let mut owned = cpu_member("ps-0", "ps", 2);
    owned["metadata"]["labels"] = json!({"app": "ps"});
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job", "name": "ps", "uid": "6f1d3c0e-8a47-4b7e-9d1c-2f3a4b5c6d7e", "controller": true}]);
    create_pod(&api, owned);
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for(&server, "ps-0 released and pinned", || {
        !gang_gated(&api, NS, "ps-0")
    })
    .await;
    assert_eq!(
        annotation(&api_pod(&api, NS, "ps-0"), PLANNED_NODE),
        Some("n1")
    );

    // Before ps-0 is bound, kube-scheduler (which did not see the unbound ps-0
    // on n1) binds a pod there that repels it.
    let mut guard = running_cpu_pod("guard", "n1", 1);
    guard["spec"]["affinity"] = json!({"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "ps"}},
            "topologyKey": "kubernetes.io/hostname"}]}});
    api.create(guard);
    wait_for(&server, "ps-0 evicted", || {
        api.evicted_pods()
            .iter()
            .any(|p| *p == format!("{NS}/ps-0"))
    })
    .await;
    eviction_says(
        &api,
        &server,
        "ps-0",
        "didn't satisfy existing pods anti-affinity rules",
    )
    .await;

    add_node(&api, "n2", 1, 1);
    let mut retry = cpu_member("ps-0-retry", "ps", 2);
    retry["metadata"]["labels"] = json!({"app": "ps"});
    create_pod(&api, retry);
    released_and_pinned_to(&api, &server, "ps-0-retry", "n2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_waiting_for_a_pod_its_affinity_follows_is_planned_next_to_it_once_it_runs() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    api.create(gang_podgroup(NS, "web", 1));
    let mut follower = cpu_member("web-0", "web", 2);
    follower["spec"]["affinity"]["podAffinity"] = json!({
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "cache"}},
            "topologyKey": "kubernetes.io/hostname"}]});
    create_pod(&api, follower);
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for(
        &server,
        "the PodGroup to say it waits for pod affinity",
        || {
            api.get("PodGroup", Some(NS), "web").is_some_and(|g| {
                g["status"]["conditions"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("didn't match pod affinity rules"))
            })
        },
    )
    .await;
    assert!(gang_gated(&api, NS, "web-0"));

    // The pod it follows starts on n2, taking room there and freeing none.
    let mut cache = running_cpu_pod("cache", "n2", 1);
    cache["metadata"]["labels"] = json!({"app": "cache"});
    api.create(cache);
    released_and_pinned_to(&api, &server, "web-0", "n2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_preferring_a_running_pods_company_is_pinned_to_its_node() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    // The preferred pod runs on n2; n1 is otherwise as good (and first by name).
    let mut cache = running_cpu_pod("cache", "n2", 1);
    cache["metadata"]["labels"] = json!({"app": "cache"});
    api.create(cache);
    api.create(running_cpu_pod("busy-n1", "n1", 1));
    api.create(gang_podgroup(NS, "web", 1));
    let mut member = cpu_member("web-0", "web", 2);
    member["spec"]["affinity"]["podAffinity"] = json!({
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "cache"}},
                "topologyKey": "kubernetes.io/hostname"}}]});
    create_pod(&api, member);
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    released_and_pinned_to(&api, &server, "web-0", "n2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_follows_a_pod_in_the_namespaces_its_namespace_selector_picks_by_label() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    add_node(&api, "n2", 1, 1);
    for (name, team) in [("infra", "platform"), ("staging", "qa")] {
        api.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"team": team}}}));
    }
    // A cache in a namespace of the wrong team on n1, one of the right team on n2.
    for (name, namespace, node) in [("cache-qa", "staging", "n1"), ("cache", "infra", "n2")] {
        let mut cache = running_cpu_pod(name, node, 1);
        cache["metadata"]["namespace"] = json!(namespace);
        cache["metadata"]["labels"] = json!({"app": "cache"});
        api.create(cache);
    }
    api.create(gang_podgroup(NS, "web", 1));
    let mut follower = cpu_member("web-0", "web", 2);
    follower["spec"]["affinity"]["podAffinity"] = json!({
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "cache"}},
            "namespaceSelector": {"matchLabels": {"team": "platform"}},
            "topologyKey": "kubernetes.io/hostname"}]});
    create_pod(&api, follower);
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;
    wait_for(&server, "web-0 released", || !gang_gated(&api, NS, "web-0")).await;
    let pod = api_pod(&api, NS, "web-0");
    assert_eq!(annotation(&pod, PLANNED_NODE), Some("n2"), "{pod}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_member_whose_node_stays_full_is_evicted_after_the_gang_timeout() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 1, 1);
    api.create(gang_podgroup(NS, "web", 1));
    let mut owned = cpu_member("web-0", "web", 8);
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1",
        "kind": "Job", "name": "web", "uid": "0b7a3c52-1d4e-4f6a-9b8c-7d6e5f4a3b2c", "controller": true}]);
    create_pod(&api, owned);
    let server = LiveServer::start(
        &api,
        &["--schedule-period", "200ms", "--gang-timeout", "2s"],
    )
    .await;
    wait_for(&server, "web-0 released and pinned", || {
        !gang_gated(&api, NS, "web-0")
    })
    .await;
    // Before web-0 is bound, a pod kube-scheduler placed takes n1's room (63 CPUs).
    api.create(running_cpu_pod("hog", "n1", 60));
    wait_for(&server, "web-0 evicted", || {
        api.evicted_pods()
            .iter()
            .any(|p| *p == format!("{NS}/web-0"))
    })
    .await;
    eviction_says(&api, &server, "web-0", "no room for it").await;
}
