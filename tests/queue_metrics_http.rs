//! Queue metrics through the real binary: a pod can name any queue in its
//! annotations, so `/metrics` labels only the queues that exist (the cluster's
//! Queue objects and the default queue). Pods naming queues that do not exist add
//! no series; they are counted together instead.

mod support;

use serde_json::{Value, json};
use support::*;

const NS: &str = "ml";

/// Pods naming queues that do not exist.
const GHOSTS: usize = 60;

fn queue(name: &str) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": {"weight": 1}
    })
}

/// A one-GPU pod in `queue`.
fn pod_in_queue(name: &str, queue: &str) -> Value {
    let mut p = pod(NS, name).gpus(1, 0, 0).build();
    p["metadata"]["annotations"] = json!({"scheduling.volcano.sh/queue-name": queue});
    p
}

/// `/metrics` once a planning cycle has judged `gangs` gangs.
async fn metrics_after_planning(server: &Server, gangs: usize) -> String {
    for _ in 0..200 {
        let (_, text) = server.get("/debug/queues").await;
        let queues: Value = serde_json::from_str(&text).expect("JSON");
        if queues["gangs"].as_array().map(Vec::len) == Some(gangs) {
            let (status, metrics) = server.get("/metrics").await;
            assert_eq!(status, 200, "{metrics}");
            return metrics;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no planning cycle judged {gangs} gangs");
}

/// Series lines (not comments) that carry `queue="<name>"`, any name.
fn queue_series(metrics: &str) -> Vec<&str> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("queue=\""))
        .collect()
}

#[tokio::test]
async fn pods_naming_queues_that_do_not_exist_add_no_series() {
    let mut cluster = vec![
        node("n1", &[h100(&gpu_uuid("n1", 0), 0)], &[]),
        queue("team"),
    ];
    cluster.push(pod_in_queue("in-team", "team"));
    for i in 0..GHOSTS {
        cluster.push(pod_in_queue(&format!("lost-{i}"), &format!("ghost-{i}")));
    }
    let (server, _conf) = Server::start_with_scheduler_conf(cluster, GANG_PROPORTION_CONF).await;

    let metrics = metrics_after_planning(&server, GHOSTS + 1).await;
    let series = queue_series(&metrics);
    let ghosts: Vec<&&str> = series.iter().filter(|l| l.contains("ghost-")).collect();
    assert!(ghosts.is_empty(), "{ghosts:#?}");
    assert!(
        series
            .iter()
            .any(|l| l.starts_with("vgpu_scheduler_queue_podgroups{")
                && l.contains("queue=\"team\"")),
        "{metrics}"
    );
    // What the ghosts' gangs are doing is still counted, in one series per phase.
    assert_eq!(
        metric_value(
            &metrics,
            "vgpu_scheduler_podgroups_in_missing_queues{phase=\"Pending\"}"
        ),
        GHOSTS as u64,
        "{metrics}"
    );
}
