//! The usage plugin through the real binary in cluster-file mode: the file's
//! `NodeMetrics` (alone or as metrics-server's `NodeMetricsList`) are the nodes'
//! measured usage, so `/filter` refuses the busy node, sends the pod to the cooler
//! one, and `/debug/state` shows each node's usage or why it has none.

mod support;

use serde_json::{Value, json};
use support::*;

const NS: &str = "ml";

const CONF: &str = "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: usage
    arguments:
      thresholds: {cpu: 80, mem: 80}
";

/// Node names, in order; each has one H100 and 63 CPUs, 500 GiB allocatable.
const NODES: [&str; 4] = ["busy", "cool", "garbled", "unmeasured"];

fn cluster() -> Vec<Value> {
    let mut docs: Vec<Value> = NODES
        .iter()
        .enumerate()
        .map(|(i, n)| node(n, &[h100(&gpu_uuid(n, 0), i as u32)], &[]))
        .collect();
    // One object on its own, the others as `kubectl get --raw
    // /apis/metrics.k8s.io/v1beta1/nodes` prints them (items without kind).
    docs.push(json!({
        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
        "metadata": {"name": "busy"},
        "timestamp": "2025-06-01T10:00:03Z", "window": "20.05s",
        "usage": {"cpu": "58500m", "memory": "120Gi"}
    }));
    docs.push(json!({
        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetricsList", "metadata": {},
        "items": [
            {"metadata": {"name": "cool"}, "timestamp": "2025-06-01T10:00:03Z",
             "window": "20.05s", "usage": {"cpu": "6300m", "memory": "50Gi"}},
            {"metadata": {"name": "garbled"}, "timestamp": "2025-06-01T10:00:03Z",
             "window": "20.05s", "usage": {"cpu": "lots", "memory": "50Gi"}}
        ]
    }));
    docs
}

fn gpu_pod(name: &str) -> Value {
    pod(NS, name).gpus(1, 0, 0).build()
}

#[tokio::test]
async fn the_cluster_files_node_metrics_refuse_the_busy_node() {
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("volcano-scheduler.conf");
    std::fs::write(&conf, CONF).expect("write scheduler config");
    let server = Server::start(
        cluster(),
        &["--scheduler-config", conf.to_str().expect("utf-8 path")],
    )
    .await;

    let answer = server.filter(&gpu_pod("alone"), &["busy"]).await;
    assert_eq!(
        answer["FailedNodes"],
        json!({"busy": "node CPU usage is above the 80 percent threshold (usage)"}),
        "{answer}"
    );
    let answer = server.filter(&gpu_pod("both"), &["busy", "cool"]).await;
    assert_eq!(answer["NodeNames"], json!(["cool"]), "{answer}");
    // A node whose usage is unreadable or missing is not refused.
    for n in ["garbled", "unmeasured"] {
        let answer = server.filter(&gpu_pod(&format!("on-{n}")), &[n]).await;
        assert_eq!(answer["NodeNames"], json!([n]), "{answer}");
    }

    let state = server.state().await;
    let usage = |n: &str| state.node(n)["measuredUsage"].clone();
    let busy = usage("busy");
    assert_eq!(
        (&busy["used"], &busy["cpuPercent"], &busy["memoryPercent"]),
        (&json!(true), &json!(92.86), &json!(24.0)),
        "{busy}"
    );
    assert_eq!(usage("cool")["cpuPercent"], 10.0);
    let garbled = usage("garbled");
    assert_eq!(garbled["used"], false);
    assert!(
        garbled["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("usage.cpu: ")),
        "{garbled}"
    );
    assert_eq!(
        usage("unmeasured"),
        json!({"used": false, "reason": "the cluster file has no NodeMetrics for this node"})
    );
    assert_eq!(
        state.0["nodeMetrics"],
        json!({"source": "cluster file", "staleAfterSeconds": 300})
    );
}

/// The run `docs/plugins/usage.md` opens with: the example cluster and the
/// example configuration.
#[tokio::test]
async fn the_example_cluster_keeps_pods_off_its_busy_node() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cluster = std::fs::read_to_string(format!("{root}/examples/cluster.yaml"))
        .expect("examples/cluster.yaml");
    let conf = format!("{root}/examples/usage/volcano-scheduler.conf");
    let server = Server::start_with(ServerOptions {
        cluster_text: Some(cluster),
        args: vec!["--scheduler-config".into(), conf],
        ..Default::default()
    })
    .await;
    // Small enough to fit gpu-a100-b also once the planner has placed the
    // example's gang there (it runs in the background meanwhile).
    let pod = |name: &str| pod("default", name).gpus(1, 500, 0).build();
    let answer = server.filter(&pod("one"), &["gpu-h100-a"]).await;
    assert_eq!(
        answer["FailedNodes"]["gpu-h100-a"],
        "node CPU usage is above the 80 percent threshold (usage)",
        "{answer}"
    );
    let answer = server
        .filter(&pod("two"), &["gpu-h100-a", "gpu-a100-b"])
        .await;
    assert_eq!(answer["NodeNames"], json!(["gpu-a100-b"]), "{answer}");
    let state = server.state().await;
    assert_eq!(
        state.node("gpu-h100-a")["measuredUsage"]["cpuPercent"],
        93.75
    );
}
