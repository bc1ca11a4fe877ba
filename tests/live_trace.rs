//! `serve --record-trace` in live mode, against the fake kube-apiserver: a gang
//! (PodGroup and gated members) and a plain pod are scheduled and the plain pod
//! is deleted; the trace holds the PodGroup, each pod's arrival and bind, and
//! the deletion, and `simulate` replays the gang as one gang job.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const NS: &str = "ml";

fn podgroup(name: &str, min: u32) -> Value {
    gang_podgroup(NS, name, min)
}

fn member(name: &str, group: &str) -> Value {
    gated_member(NS, name, group)
}

/// The complete lines of the trace so far.
fn trace_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// `kind` lines of the trace naming `pod` (`namespace/name`, or the name of a
/// recorded pod or PodGroup).
fn count(lines: &[Value], kind: &str, pod: &str) -> usize {
    lines
        .iter()
        .filter(|l| match kind {
            "pod" | "podGroup" => l[kind]["metadata"]["name"] == pod,
            _ => l[kind] == pod,
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_trace_holds_the_gang_its_binds_and_a_deletion_and_replays_the_gang_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.jsonl");
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    add_node(&api, "n2", 2, 1);
    api.create(podgroup("train", 2));
    for i in 0..2 {
        create_pod(&api, member(&format!("w{i}"), "train"));
    }
    let mut solo = gpu_pod(NS, "solo", 1, 80000, 0);
    solo["spec"]["schedulerName"] = json!(SCHEDULER);
    create_pod(&api, solo);
    let server = LiveServer::start(
        &api,
        &[
            "--schedule-period",
            "200ms",
            "--record-trace",
            trace.to_str().expect("utf-8 path"),
        ],
    )
    .await;
    wait_for(&server, "the gang's gates lifted", || {
        (0..2).all(|i| !gang_gated(&api, NS, &format!("w{i}")))
    })
    .await;
    for name in ["w0", "w1", "solo"] {
        server.schedule(&api, NS, name, &["n1", "n2"]).await;
        device_plugin_allocated(&api, NS, name);
    }
    api.delete("Pod", Some(NS), "solo");
    wait_for(&server, "the deletion in the trace", || {
        count(&trace_lines(&trace), "gone", "ml/solo") == 1
    })
    .await;

    let lines = trace_lines(&trace);
    assert_eq!(count(&lines, "podGroup", "train"), 1, "{lines:#?}");
    for name in ["w0", "w1", "solo"] {
        assert_eq!(count(&lines, "pod", name), 1, "{name}: {lines:#?}");
        assert_eq!(
            count(&lines, "bound", &format!("{NS}/{name}")),
            1,
            "{name}: {lines:#?}"
        );
    }
    assert_eq!(lines.len(), 8, "nothing else, nothing twice: {lines:#?}");
    let w0 = lines
        .iter()
        .find(|l| l["pod"]["metadata"]["name"] == "w0")
        .expect("w0");
    assert!(
        w0["pod"]["spec"].get("schedulingGates").is_none(),
        "recorded as created, without the gate the replay's webhook adds: {w0}"
    );
    assert_eq!(
        w0["pod"]["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
        "train"
    );
    // The binds came after the arrivals, by the server's clock.
    let at = |kind: &str, pod: &str| {
        lines
            .iter()
            .find(|l| match kind {
                "pod" => l["pod"]["metadata"]["name"] == pod,
                _ => l[kind] == format!("{NS}/{pod}").as_str(),
            })
            .and_then(|l| l["at"].as_str())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .unwrap_or_else(|| panic!("{kind} {pod}"))
    };
    assert!(at("pod", "solo") <= at("bound", "solo"));
    assert!(at("bound", "solo") <= at("gone", "solo"));

    // The same nodes as a cluster file, and the trace as the workload.
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(
        &cluster,
        support::cluster_text(&[gpu_node("n1", 2, 1), gpu_node("n2", 2, 1)]),
    )
    .expect("cluster file");
    let report = dir.path().join("report");
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .args(["simulate", "--quiet"])
        .arg("--cluster-file")
        .arg(&cluster)
        .arg("--workload")
        .arg(&trace)
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run vgpu-scheduler simulate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    assert_eq!(summary["variants"][0]["jobs"], 2, "{summary}");
    assert_eq!(summary["variants"][0]["placed"], 2, "{summary}");
    let jobs = std::fs::read_to_string(report.join("jobs.csv")).expect("jobs.csv");
    let row = |job: &str| {
        jobs.lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f[1] == job)
            .unwrap_or_else(|| panic!("{job} in\n{jobs}"))
    };
    // variant,job,queue,vgpus,gang,...
    assert_eq!(row("ml/train")[3..5], ["2", "true"], "{jobs}");
    assert_eq!(row("ml/solo")[3..5], ["1", "false"], "{jobs}");
    let bindings = std::fs::read_to_string(report.join("bindings.csv")).expect("bindings.csv");
    for pod in ["ml/w0", "ml/w1", "ml/solo"] {
        assert!(bindings.contains(&format!(",{pod},")), "{pod}: {bindings}");
    }
}
