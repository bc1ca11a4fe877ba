//! `examples/tidal/`: the tidal-reclaim walkthrough's files are what the
//! scheduler reads, and a dry run over its cluster file reclaims the whole
//! training gang for the waiting inference replicas.

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn example(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/tidal")
        .join(file)
}

fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(example(file)).expect("read example");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{file}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn dry_run(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .arg("queues")
        .arg("--cluster-file")
        .arg(example("cluster.yaml"))
        .arg("--scheduler-config")
        .arg(example("volcano-scheduler.conf"))
        .args(extra)
        .output()
        .expect("run vgpu-scheduler queues");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_dry_run_reclaims_the_whole_training_gang_for_inference() {
    let view: Value = serde_json::from_str(&dry_run(&["--json"])).expect("JSON");
    let mut evicted: Vec<String> = view["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .map(|e| format!("{} {} {}", e["pod"], e["action"], e["outcome"]))
        .collect();
    evicted.sort();
    let whole_gang: Vec<String> = (0..4)
        .map(|i| format!(r#""training/llm-pretrain-{i}" "reclaim" "evicted""#))
        .collect();
    assert_eq!(evicted, whole_gang, "{view}");
    for e in view["evictions"].as_array().into_iter().flatten() {
        assert_eq!(e["queue"], "queue-training");
        assert_eq!(e["serviceType"], "training");
    }
    // Both replicas are planned onto the freed cards.
    let replicas: Vec<&Value> = view["gangs"]
        .as_array()
        .expect("gangs")
        .iter()
        .filter(|g| g["queue"] == "queue-inference")
        .collect();
    assert_eq!(replicas.len(), 2, "{view}");
    for r in replicas {
        assert!(
            r["message"]
                .as_str()
                .is_some_and(|m| m.contains("pipelined")),
            "{r}"
        );
    }
}

#[test]
fn the_dry_run_prints_the_evictions_as_a_table() {
    let out = dry_run(&[]);
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("EVICTED POD"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert!(
        rows.iter().all(|r| r.contains("reclaim")
            && r.contains("evicted")
            && r.contains("for pod inference/chat-api-")),
        "{out}"
    );
}

/// The cluster file repeats the queues, classes and PodGroup of the manifests
/// a user applies; they must not drift apart.
#[test]
fn the_cluster_file_holds_the_same_queues_classes_and_podgroup_as_the_manifests() {
    let cluster = documents("cluster.yaml");
    let find = |kind: &str, name: &str| {
        cluster
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{kind} {name} missing from cluster.yaml"))
    };
    for file in ["queues.yaml", "priority-classes.yaml", "training-job.yaml"] {
        for doc in documents(file) {
            let kind = doc["kind"].as_str().expect("kind");
            if matches!(kind, "Queue" | "PriorityClass" | "PodGroup") {
                let name = doc["metadata"]["name"].as_str().expect("name");
                assert_eq!(find(kind, name), doc, "{file}: {kind} {name}");
            }
        }
    }
}

#[test]
fn every_manifest_is_a_kubernetes_object() {
    for file in [
        "queues.yaml",
        "priority-classes.yaml",
        "training-job.yaml",
        "inference-deployment.yaml",
        "cluster.yaml",
    ] {
        for doc in documents(file) {
            assert!(doc["apiVersion"].is_string(), "{file}: {doc}");
            assert!(doc["kind"].is_string(), "{file}: {doc}");
            assert!(doc["metadata"]["name"].is_string(), "{file}: {doc}");
        }
    }
}
