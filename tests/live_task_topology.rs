//! The task-topology plugin end to end against the fake kube-apiserver, with
//! the PodGroup and pods a Volcano Job of parameter servers and workers makes
//! (the Job's annotations copied onto its PodGroup, each pod's role in
//! `volcano.sh/task-spec`): each ps is bound to a node of its own with the
//! worker it attracts, where binpack alone would stack both ps on one node; with
//! the spread policy the ps and its workers still end on one node; and a
//! topology naming a role the job does not have leaves the gang scheduled as if
//! it had none, with a warning saying why.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const NS: &str = "ml";

/// Volcano's configuration with task-topology weighted as in its plugin guide.
const CONF: &str = "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: task-topology
    arguments:
      task-topology.weight: 10
";

/// A TensorFlow-style job `tf`: its PodGroup with the topology annotations, and
/// for each `(role, replicas)` the pods Volcano's job controller creates
/// (`tf-<role>-<i>`, role in the `volcano.sh/task-spec` annotation and label),
/// gated as the webhook leaves them, each asking for one whole GPU.
fn tf_job(api: &FakeApiServer, topology: Value, roles: &[(&str, u32)], pod_annotations: Value) {
    let replicas: u32 = roles.iter().map(|(_, n)| n).sum();
    api.create(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "tf", "namespace": NS, "annotations": topology},
        "spec": {"minMember": replicas, "queue": "default"}
    }));
    for (role, n) in roles {
        for i in 0..*n {
            let mut p = gpu_pod(NS, &format!("tf-{role}-{i}"), 1, 80000, 0);
            let mut annotations = json!({
                "scheduling.k8s.io/group-name": "tf",
                "volcano.sh/task-spec": role,
            });
            if let (Some(all), Some(extra)) =
                (annotations.as_object_mut(), pod_annotations.as_object())
            {
                all.extend(extra.clone());
            }
            p["metadata"]["annotations"] = annotations;
            p["metadata"]["labels"] = json!({"volcano.sh/task-spec": role});
            p["spec"]["schedulerName"] = json!(SCHEDULER);
            p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
            create_pod(api, p);
        }
    }
}

/// Waits for the gang to be released, then plays kube-scheduler for each pod
/// (`/filter`, `/bind`) and the device plugin; returns each pod's bound node as
/// the API server has it.
async fn bind_all(
    api: &FakeApiServer,
    server: &LiveServer,
    pods: &[&str],
    nodes: &[&str],
) -> BTreeMap<String, String> {
    wait_for(server, "the gang released", || {
        pods.iter().all(|p| !gang_gated(api, NS, p))
    })
    .await;
    let mut bound = BTreeMap::new();
    for name in pods {
        server.schedule(api, NS, name, nodes).await;
        device_plugin_allocated(api, NS, name);
        let node = api_pod(api, NS, name)["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        bound.insert(name.to_string(), node);
    }
    bound
}

fn on(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .collect()
}

const PS_WORKERS: [&str; 4] = ["tf-ps-0", "tf-ps-1", "tf-worker-0", "tf-worker-1"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ps_is_bound_to_a_node_of_its_own_with_its_worker() {
    let api = FakeApiServer::start().await;
    // Two nodes of two GPUs: binpack alone fills n1 with both ps (their names
    // come first) and leaves the workers to n2.
    add_node(&api, "n1", 2, 1);
    add_node(&api, "n2", 2, 1);
    tf_job(
        &api,
        json!({
            "volcano.sh/task-topology-affinity": "ps,worker",
            "volcano.sh/task-topology-anti-affinity": "ps",
        }),
        &[("ps", 2), ("worker", 2)],
        json!({}),
    );
    let conf = SchedulerConfFile::new(CONF);
    let server = LiveServer::start_planning(&api, &conf).await;
    let bound = bind_all(&api, &server, &PS_WORKERS, &["n1", "n2"]).await;
    assert_eq!(
        bound,
        on(&[
            ("tf-ps-0", "n1"),
            ("tf-worker-0", "n1"),
            ("tf-ps-1", "n2"),
            ("tf-worker-1", "n2"),
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_spread_policy_the_ps_and_its_workers_still_share_a_node() {
    let api = FakeApiServer::start().await;
    for n in ["n1", "n2", "n3"] {
        add_node(&api, n, 4, 1);
    }
    // Spread alone would give each of the three pods a node of its own.
    tf_job(
        &api,
        json!({
            "volcano.sh/task-topology-affinity": "ps,worker",
            "volcano.sh/task-topology-task-order": "ps,worker",
        }),
        &[("ps", 1), ("worker", 2)],
        json!({"hami.io/node-scheduler-policy": "spread"}),
    );
    let conf = SchedulerConfFile::new(CONF);
    let server = LiveServer::start_planning(&api, &conf).await;
    let pods = ["tf-ps-0", "tf-worker-0", "tf-worker-1"];
    let bound = bind_all(&api, &server, &pods, &["n1", "n2", "n3"]).await;
    assert_eq!(
        bound,
        on(&[
            ("tf-ps-0", "n1"),
            ("tf-worker-0", "n1"),
            ("tf-worker-1", "n1")
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_naming_a_missing_role_is_ignored_with_a_warning() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    add_node(&api, "n2", 2, 1);
    // The job has no chief: Volcano refuses the whole topology, and so does
    // this scheduler, which places the gang by binpack alone.
    tf_job(
        &api,
        json!({
            "volcano.sh/task-topology-affinity": "ps,chief",
            "volcano.sh/task-topology-anti-affinity": "ps",
        }),
        &[("ps", 2), ("worker", 2)],
        json!({}),
    );
    let conf = SchedulerConfFile::new(CONF);
    let server = LiveServer::start_planning(&api, &conf).await;
    let bound = bind_all(&api, &server, &PS_WORKERS, &["n1", "n2"]).await;
    assert_eq!(
        bound,
        on(&[
            ("tf-ps-0", "n1"),
            ("tf-ps-1", "n1"),
            ("tf-worker-0", "n2"),
            ("tf-worker-1", "n2"),
        ])
    );
    let warning = "no task of the job has the role";
    server
        .wait_log_count(warning, 1, Duration::from_secs(5))
        .await;
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains(warning))
        .unwrap_or_default();
    assert!(
        line.contains("ml/tf") && line.contains("chief") && line.contains("task-topology-affinity"),
        "the warning names the job, the role and the annotation: {line}"
    );
    let (code, _) = server.get("/readyz").await;
    assert_eq!(code, 200, "the server keeps serving");
}
