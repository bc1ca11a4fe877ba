//! `serve --record-trace` in cluster-file mode, end to end: pods admitted by
//! the webhook, then filtered and bound over HTTPS as kube-scheduler does, are
//! written to the trace as they arrive and bind; `simulate --workload <the trace>` on the same cluster file
//! replays the same pods and, with the same policy, binds them to the same
//! nodes and GPUs, the same way every time.

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Server, ServerOptions, container, encode_devices, gpu_container, pod};

const CLUSTER: &str = "examples/simulate/cluster.yaml";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Pods of several sizes: slices of a card with different memory, a whole
/// card, two cards, and one that asks for an H200.
fn pods() -> Vec<Value> {
    vec![
        pod("default", "slice-20g").gpus(1, 20000, 25).build(),
        pod("default", "slice-40g").gpus(1, 40000, 50).build(),
        pod("default", "slice-10g").gpus(1, 10000, 10).build(),
        pod("default", "whole")
            .container(container("main", &[("nvidia.com/gpu", "1")]))
            .build(),
        pod("default", "pair").gpus(2, 60000, 0).build(),
        pod("default", "on-h200")
            .annotation("nvidia.com/use-gputype", "H200")
            .container(gpu_container("main", 1, 100000, 0))
            .build(),
    ]
}

/// The pod as the API server stores it after the server's webhook (`/mutate`)
/// admitted it: what kube-scheduler then sends to `/filter`.
async fn admitted(server: &Server, pod: &Value) -> Value {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": support::uid_for(&format!("review/{}", pod["metadata"]["name"])),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": pod["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": pod,
        }
    });
    let (status, answer) = server.post_json("/mutate", &review).await;
    assert_eq!(status, 200, "{answer}");
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    let Some(patch) = response["patch"].as_str() else {
        return pod.clone();
    };
    let patch: json_patch::Patch =
        serde_json::from_slice(&support::base64_decode(patch)).expect("a JSON patch");
    let mut admitted = pod.clone();
    json_patch::patch(&mut admitted, &patch).expect("the patch applies");
    admitted
}

/// The trace's lines once it holds at least `n` (the writer writes every 200 ms).
async fn trace_lines(path: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let complete: Vec<&str> = match text.rfind('\n') {
            Some(end) => text[..end].lines().collect(),
            None => Vec::new(),
        };
        if complete.len() >= n {
            return complete
                .iter()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "the trace has {} lines, not {n}:\n{text}",
            complete.len()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The rows of a report CSV after its header (fields with commas are quoted).
fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().skip(1).map(csv_fields).collect()
}

fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            (c, _) => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_trace_replays_the_same_pods_onto_the_same_nodes_and_gpus() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.jsonl");
    let server = Server::start_with(ServerOptions {
        cluster_text: Some(std::fs::read_to_string(repo().join(CLUSTER)).expect("cluster")),
        args: vec!["--record-trace".into(), trace.display().to_string()],
        ..Default::default()
    })
    .await;
    let nodes: Vec<String> = server
        .state()
        .await
        .node_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    // (pod, node, GPUs) as the server placed them.
    let mut placed = Vec::new();
    for p in pods() {
        let p = admitted(&server, &p).await;
        let answer = server.filter(&p, &nodes).await;
        let node = support::chosen_node(&answer);
        let bound = server.bind(&p, &node).await;
        assert!(bound.get("Error").is_none(), "{bound}");
        let state = server.state().await;
        let devices = encode_devices(state.expect_pod(support::pod_uid(&p)));
        placed.push((format!("default/{}", support::pod_name(&p)), node, devices));
    }
    assert!(
        placed
            .iter()
            .any(|(pod, node, _)| pod == "default/on-h200" && node.contains("h200")),
        "{placed:?}"
    );

    // One line per arrival and per bind, in that order for each pod.
    let lines = trace_lines(&trace, 2 * placed.len()).await;
    assert_eq!(lines.len(), 2 * placed.len(), "{lines:#?}");
    for (i, (key, node, _)) in placed.iter().enumerate() {
        let arrived = &lines[2 * i]["pod"];
        assert_eq!(
            format!(
                "default/{}",
                arrived["metadata"]["name"].as_str().unwrap_or("")
            ),
            *key
        );
        assert!(arrived.get("status").is_none(), "{arrived}");
        assert!(arrived["metadata"].get("resourceVersion").is_none());
        let bound = &lines[2 * i + 1];
        assert_eq!(bound["bound"], key.as_str(), "{bound}");
        assert_eq!(bound["node"], node.as_str(), "{bound}");
        for line in [&lines[2 * i], bound] {
            let at = line["at"].as_str().unwrap_or_default();
            assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{line}");
        }
    }
    let h200 = lines
        .iter()
        .find(|l| l["pod"]["metadata"]["name"] == "on-h200")
        .expect("the H200 pod");
    assert_eq!(
        h200["pod"]["metadata"]["annotations"],
        serde_json::json!({"nvidia.com/use-gputype": "H200"}),
        "its own annotation kept, nothing placement wrote"
    );

    let report = simulate(&trace, &dir.path().join("report"));
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    assert_eq!(summary["variants"][0]["jobs"], placed.len());
    assert_eq!(summary["variants"][0]["placed"], placed.len());
    let jobs: Vec<String> = csv_rows(&report.join("jobs.csv"))
        .into_iter()
        .map(|row| row[1].clone())
        .collect();
    let keys: Vec<String> = placed.iter().map(|(k, _, _)| k.clone()).collect();
    assert_eq!(jobs, keys, "one job per recorded pod, in arrival order");
    let replayed: Vec<(String, String, String)> = csv_rows(&report.join("bindings.csv"))
        .into_iter()
        .map(|row| (row[2].clone(), row[3].clone(), row[4].clone()))
        .collect();
    assert_eq!(replayed, placed, "the replay binds as the server did");

    let again = simulate(&trace, &dir.path().join("again"));
    for file in ["summary.json", "jobs.csv", "bindings.csv"] {
        let read = |dir: &Path| std::fs::read(dir.join(file)).expect("report file");
        assert!(
            read(&report) == read(&again),
            "{file} differs between two replays of one trace"
        );
    }
}

/// Runs `simulate` of the trace on the example cluster with binpack; the
/// report's directory.
fn simulate(trace: &Path, report: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .current_dir(repo())
        .args(["simulate", "--quiet", "--cluster-file", CLUSTER])
        .arg("--workload")
        .arg(trace)
        .args(["--variant", "binpack:--node-scheduler-policy=binpack"])
        .arg("--report")
        .arg(report)
        .output()
        .expect("run vgpu-scheduler simulate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report.to_path_buf()
}

#[test]
fn a_trace_file_that_cannot_be_written_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("no-such-dir").join("trace.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .current_dir(repo())
        .args([
            "serve",
            "--cluster-file",
            CLUSTER,
            "--http-bind",
            "127.0.0.1:0",
        ])
        .arg("--self-signed-dir")
        .arg(dir.path().join("tls"))
        .arg("--record-trace")
        .arg(&trace)
        .output()
        .expect("run vgpu-scheduler serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("--record-trace {}", trace.display()))
            && err.contains("cannot append to the file"),
        "{err}"
    );
}

/// A trace file that takes nothing (a pipe nobody reads, as a stuck disk):
/// pods with large annotations are still filtered and answered, and SIGTERM
/// still stops the server, after waiting a bounded time for the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_file_that_takes_nothing_does_not_keep_the_server_from_stopping() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.fifo");
    let c_path = std::ffi::CString::new(trace.as_os_str().as_encoded_bytes()).expect("a path");
    // SAFETY: a NUL-terminated path; creates a named pipe nobody reads.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
    let mut server = Server::start_with(ServerOptions {
        cluster_text: Some(std::fs::read_to_string(repo().join(CLUSTER)).expect("cluster")),
        args: vec!["--record-trace".into(), trace.display().to_string()],
        ..Default::default()
    })
    .await;
    let state = server.state().await;
    let nodes: Vec<&str> = state.node_names();
    // Far more than the pipe and the writer's buffer hold.
    for i in 0..24 {
        let p = pod("default", &format!("bulky-{i}"))
            .annotation("example.com/state", &"x".repeat(100 * 1024))
            .gpus(1, 1000, 0)
            .build();
        let p = admitted(&server, &p).await;
        let answer = server.filter(&p, &nodes).await;
        support::chosen_node(&answer);
    }
    let status = server
        .terminate(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("did not stop after SIGTERM:\n{}", server.log()));
    assert!(status.success(), "{status}:\n{}", server.log());
    assert!(
        server
            .log()
            .contains("the trace file did not take what was left to write in time"),
        "{}",
        server.log()
    );
}
