//! `vgpu-scheduler queues`: a dry run over a cluster file, and the same tables read
//! from a running server's `/debug/queues` (verifying its certificate).

mod support;

use serde_json::{Value, json};
use std::process::Command;
use support::{Server, cluster_text, gpu_container, h100, node, pod};

/// Node n1 with two whole H100 cards.
fn two_card_node() -> Value {
    let gpus: Vec<_> = (0..2)
        .map(|i| h100(&support::gpu_uuid("n1", i), i).count(1))
        .collect();
    node("n1", &gpus, &[])
}

fn cluster() -> Vec<Value> {
    let mut docs = vec![
        two_card_node(),
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": "research"},
               "spec": {"weight": 1, "capability": {"nvidia.com/gpu": "4"}}}),
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "big", "namespace": "ml", "uid": "pg-big"},
               "spec": {"minMember": 3, "queue": "research"}}),
    ];
    for i in 0..3 {
        let mut p = pod("ml", &format!("big-{i}"))
            .container(gpu_container("w", 1, 80000, 0))
            .build();
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "big"});
        p["spec"]["schedulerName"] = json!("vgpu-scheduler");
        p["spec"]["schedulingGates"] = json!([{"name": "vgpu-scheduler.io/gang"}]);
        docs.push(p);
    }
    docs
}

fn queues(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .arg("queues")
        .args(args)
        .output()
        .expect("run vgpu-scheduler queues");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_dry_run_prints_queues_and_why_each_gang_waits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, cluster_text(&cluster())).unwrap();
    let (ok, out, err) = queues(&["--cluster-file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("QUEUE") && out.contains("research"), "{out}");
    let gang = out
        .lines()
        .find(|l| l.starts_with("ml/big"))
        .unwrap_or_else(|| panic!("no gang line: {out}"));
    assert!(gang.contains("Inqueue"), "{gang}");
    assert!(gang.contains("0/3"), "{gang}");
    assert!(gang.contains("tasks in gang unschedulable"), "{gang}");

    let (ok, out, _) = queues(&["--cluster-file", file.to_str().unwrap(), "--json"]);
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["gangs"][0]["reason"], "NotEnoughResources", "{v}");
}

#[test]
fn the_dry_run_says_how_the_configuration_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, cluster_text(&cluster())).unwrap();
    let conf = dir.path().join("volcano-scheduler.conf");
    std::fs::write(
        &conf,
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: proportion\n  - name: capacity\n",
    )
    .unwrap();
    let (ok, out, err) = queues(&[
        "--cluster-file",
        file.to_str().unwrap(),
        "--scheduler-config",
        conf.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("note: proportion and capacity are both enabled; capacity decides"),
        "{out}"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let (ok, _, err) = queues(&[]);
    assert!(!ok);
    assert!(
        err.contains("--server") && err.contains("--cluster-file"),
        "{err}"
    );
    let (ok, _, err) = queues(&["--cluster-file", "/nonexistent/cluster.yaml"]);
    assert!(!ok);
    assert!(err.contains("cannot read cluster file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_tables_come_from_a_running_server() {
    let server = Server::start(cluster(), &["--schedule-period", "100ms"]).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &server.root_pem).unwrap();
    let mut out = String::new();
    for _ in 0..50 {
        let (ok, text, err) =
            queues(&["--server", &server.base, "--ca-file", ca.to_str().unwrap()]);
        assert!(ok, "{err}");
        out = text;
        if out.contains("ml/big") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(out.contains("ml/big") && out.contains("Inqueue"), "{out}");
    // An unverified self-signed certificate is refused unless --insecure.
    let (ok, _, err) = queues(&["--server", &server.base]);
    assert!(!ok, "verified against the system roots?");
    assert!(err.contains("GET"), "{err}");
    let (ok, _, _) = queues(&["--server", &server.base, "--insecure"]);
    assert!(ok);
}

/// A gang whose PodGroup names a queue that does not exist, and a queue pod naming
/// another: both wait, and /filter, /debug/queues and `queues` say why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_in_a_queue_that_does_not_exist_says_so() {
    let mut docs = cluster();
    docs.push(
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "lost", "namespace": "ml", "uid": "pg-lost"},
               "spec": {"minMember": 1, "queue": "nowhere"}}),
    );
    let member = |name: &str, annotations: Value| {
        let mut p = pod("ml", name)
            .container(gpu_container("w", 1, 1000, 0))
            .build();
        p["metadata"]["annotations"] = annotations;
        p["spec"]["schedulerName"] = json!("vgpu-scheduler");
        p
    };
    let lost = member("lost-0", json!({"scheduling.k8s.io/group-name": "lost"}));
    let stray = member(
        "stray",
        json!({"scheduling.volcano.sh/queue-name": "ghost"}),
    );
    docs.push(lost.clone());
    let server = Server::start(docs, &["--schedule-period", "100ms"]).await;

    let answer = server.filter(&lost, &["n1"]).await;
    assert_eq!(
        answer["FailedNodes"]["n1"], "gang ml/lost: queue \"nowhere\" does not exist",
        "{answer}"
    );
    let answer = server.filter(&stray, &["n1"]).await;
    assert_eq!(
        answer["FailedNodes"]["n1"], "gang pod ml/stray: queue \"ghost\" does not exist",
        "{answer}"
    );

    let mut gangs = Value::Null;
    for _ in 0..100 {
        let (_, text) = server.get("/debug/queues").await;
        gangs = serde_json::from_str::<Value>(&text).expect("JSON")["gangs"].clone();
        if gangs.as_array().is_some_and(|g| g.len() == 3) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let message = |gang: &str| {
        gangs
            .as_array()
            .and_then(|g| g.iter().find(|v| v["gang"] == gang))
            .map(|v| v["message"].clone())
            .unwrap_or_else(|| panic!("no gang {gang}: {gangs:#}"))
    };
    assert_eq!(message("ml/lost"), "queue \"nowhere\" does not exist");
    assert_eq!(message("ml/stray"), "queue \"ghost\" does not exist");

    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &server.root_pem).unwrap();
    let (ok, out, err) = queues(&["--server", &server.base, "--ca-file", ca.to_str().unwrap()]);
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("ml/lost"))
        .unwrap_or_else(|| panic!("no gang line: {out}"));
    assert!(line.contains("queue \"nowhere\" does not exist"), "{line}");
}

/// A cluster file may hold Kubernetes' own PodGroups with the Workloads they were
/// made from: a PodGroup takes what it leaves unsaid from its template, as it
/// does from a live cluster's.
#[test]
fn a_cluster_files_native_podgroup_takes_what_it_leaves_unsaid_from_its_workload() {
    let mut docs = vec![
        two_card_node(),
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
               "metadata": {"name": "job-0", "namespace": "ml", "uid": "pg-job-0"},
               "spec": {"podGroupTemplateRef": {"workload":
                   {"workloadName": "job", "podGroupTemplateName": "workers"}},
                   "schedulingPolicy": {"gang": {"minCount": 2}}}}),
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
               "metadata": {"name": "job", "namespace": "ml"},
               "spec": {"podGroupTemplates": [{"name": "workers",
                   "schedulingPolicy": {"gang": {"minCount": 2}},
                   "disruptionMode": "PodGroup"}]}}),
    ];
    for i in 0..2 {
        let mut p = pod("ml", &format!("job-{i}"))
            .container(gpu_container("w", 1, 80000, 0))
            .build();
        p["spec"]["schedulerName"] = json!("vgpu-scheduler");
        p["spec"]["schedulingGroup"] = json!({"podGroupName": "job-0"});
        p["spec"]["schedulingGates"] = json!([{"name": "vgpu-scheduler.io/gang"}]);
        docs.push(p);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, cluster_text(&docs)).unwrap();
    let (ok, out, err) = queues(&["--cluster-file", file.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let gang = v["gangs"]
        .as_array()
        .and_then(|gangs| gangs.iter().find(|g| g["gang"] == "ml/job-0"))
        .unwrap_or_else(|| panic!("no native gang: {v}"));
    assert_eq!(gang["workload"], "ml/job", "{gang}");
    assert_eq!(gang["disruptionMode"], "PodGroup", "{gang}");
    assert_eq!(gang["minMember"], 2, "{gang}");
}
