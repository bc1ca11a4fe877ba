//! `vgpu-scheduler simulate --from-cluster` against the fake kube-apiserver: the
//! replay starts from the live cluster's nodes and the pods running on them, and
//! the cluster is only read.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::Value;
use std::process::Command;

/// Two jobs of one whole card each.
const WORKLOAD: &str = "
arrivals:
- name: job
  every: 1m
  count: 2
  duration: 1h
  pod: {gpus: 1}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_the_live_cluster_is_replayed_and_nothing_is_written() {
    let api = FakeApiServer::start().await;
    // Kubernetes' own gang API is served: its PodGroups and Workloads are read
    // in the version served.
    api.set_workload_apis(true);
    // One node of two whole cards; a pod another scheduler placed holds one.
    add_node(&api, "n1", 2, 1);
    let devices = format!("{},NVIDIA,81559,100:;", gpu_id("n1", 0));
    create_pod(&api, running_pod("ml", "resident", "n1", &devices, 1));
    // A pod still waiting is the live scheduler's, not the replay's.
    create_pod(&api, gpu_pod("ml", "pending", 1, 80000, 0));
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.write_kubeconfig(dir.path());
    let workload = dir.path().join("workload.yaml");
    std::fs::write(&workload, WORKLOAD).expect("workload");
    api.clear_request_log();

    let out = tokio::task::spawn_blocking({
        let (dir, kubeconfig, workload) =
            (dir.path().to_owned(), kubeconfig.clone(), workload.clone());
        move || {
            Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
                .args(["simulate", "--quiet", "--from-cluster"])
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .arg("--workload")
                .arg(&workload)
                .arg("--report")
                .arg(dir.join("report"))
                .output()
                .expect("run simulate")
        }
    })
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("report/summary.json")).expect("summary"),
    )
    .expect("json");
    let variant = &summary["variants"][0];
    // One card was free: the first job gets it, the second waits for it and
    // starts when the first finishes, an hour after it arrived less a minute.
    assert_eq!(variant["jobs"], 2, "{variant}");
    assert_eq!(variant["placed"], 2, "{variant}");
    let p99 = variant["pendingSeconds"]["p99"].as_f64().unwrap_or(0.0);
    assert!((3540.0..3541.0).contains(&p99), "{variant}");
    // Only reads reached the cluster.
    let writes: Vec<(String, String, u16)> = api
        .request_log()
        .into_iter()
        .filter(|(method, _, _)| method != "GET")
        .collect();
    assert!(writes.is_empty(), "the snapshot wrote: {writes:?}");
    assert!(api.requests_matching("GET", "/api/v1/pods") >= 1);
    for plural in ["podgroups", "workloads"] {
        let path = format!("/apis/scheduling.k8s.io/v1alpha2/{plural}");
        assert_eq!(
            api.requests_matching("GET", &path),
            1,
            "{plural} listed once in the version served: {:?}",
            api.request_log()
        );
    }
}

#[test]
fn from_cluster_and_a_cluster_file_exclude_each_other() {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .args(["simulate", "--from-cluster", "--cluster-file", "c.yaml"])
        .args(["--workload", "w.yaml", "--report", "r"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--from-cluster") && err.contains("--cluster-file"),
        "{err}"
    );
}
