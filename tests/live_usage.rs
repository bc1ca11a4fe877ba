//! The usage plugin end to end against the fake kube-apiserver and its
//! metrics.k8s.io (metrics-server): configured through `--scheduler-config`, a
//! node whose measured CPU is above the threshold is refused by `/filter` with the
//! reason and the pod lands on a cooler node; once metrics-server's figures for it
//! are old, or metrics-server is gone, the node is no longer refused and
//! `/debug/state` says why.

mod fake_apiserver;
mod live_support;
mod support;

use chrono::Utc;
use fake_apiserver::{FakeApiServer, MetricsApi};
use live_support::*;
use serde_json::Value;
use std::time::Duration;

const NS: &str = "ml";

/// Volcano's configuration with usage next to the usual plugins, as the plugin's
/// guide writes it.
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
  - name: usage
    enablePredicate: true
    arguments:
      usage.weight: 5
      cpu.weight: 1
      memory.weight: 1
      thresholds:
        cpu: 80
        mem: 80
";

const REFUSED: &str = "node CPU usage is above the 80 percent threshold (usage)";

/// How long a change at the fake may take to show in the server (several lists).
const SEEN: Duration = Duration::from_secs(15);

/// n1 and n2 with two whole GPUs each (63 CPUs and 500 GiB allocatable); metrics-
/// server reports n1 at 60 CPUs (95 %) and n2 at 6 (10 %), both measured now.
fn cluster() -> FakeApiServer {
    let api = FakeApiServer::start_blocking();
    add_node(&api, "n1", 2, 1);
    add_node(&api, "n2", 2, 1);
    api.set_metrics_api(MetricsApi::Served);
    api.set_node_usage("n1", "60", "100Gi", Utc::now());
    api.set_node_usage("n2", "6", "100Gi", Utc::now());
    api
}

async fn start(api: &FakeApiServer, conf: &SchedulerConfFile) -> LiveServer {
    LiveServer::start(
        api,
        &[
            "--scheduler-config",
            conf.path.to_str().expect("utf-8 path"),
            "--node-metrics-interval",
            "100ms",
            "--schedule-period",
            "100ms",
        ],
    )
    .await
}

/// `/debug/state`'s view of the node's measured usage.
fn measured(state: &support::State, node: &str) -> Value {
    state.node(node)["measuredUsage"].clone()
}

/// Waits until the node's measured usage satisfies `pred`; returns it.
async fn wait_measured(
    server: &LiveServer,
    node: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let (state, held) = server.wait_state(SEEN, |s| pred(&measured(s, node))).await;
    assert!(
        held,
        "{node}: {what} not seen; measuredUsage {}; log:\n{}",
        measured(&state, node),
        server.log_tail(30)
    );
    measured(&state, node)
}

/// A pending pod of one whole GPU for this scheduler.
fn new_pod(api: &FakeApiServer, name: &str) -> Value {
    let mut p = gpu_pod(NS, name, 1, 80000, 0);
    p["spec"]["schedulerName"] = serde_json::json!(SCHEDULER);
    create_pod(api, p)
}

/// `/filter` of the pod on n1 alone: `Ok(())` when n1 is chosen, else n1's reason.
async fn filter_on_n1(server: &LiveServer, pod: &Value) -> Result<(), String> {
    let answer = server.filter(pod, &["n1"]).await;
    match answer["NodeNames"].as_array() {
        Some(names) if !names.is_empty() => {
            assert_eq!(names[0], "n1", "{answer}");
            Ok(())
        }
        _ => Err(answer["FailedNodes"]["n1"]
            .as_str()
            .unwrap_or_default()
            .to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_node_is_refused_until_its_metrics_are_too_old() {
    let api = cluster();
    let conf = SchedulerConfFile::new(CONF);
    let server = start(&api, &conf).await;
    let n1 = wait_measured(&server, "n1", "a usable measurement", |m| m["used"] == true).await;
    assert_eq!(n1["cpuPercent"], 95.24, "{n1}");
    assert_eq!(n1["memoryPercent"], 20.0, "{n1}");
    assert_eq!(n1["windowSeconds"], 20.05, "{n1}");

    // Offered alone, the busy node is refused with the reason.
    let first = new_pod(&api, "first");
    assert_eq!(filter_on_n1(&server, &first).await, Err(REFUSED.into()));
    // Offered both, the pod lands on the cooler node (without the plugin the
    // smaller name would win the tie between two empty nodes).
    assert_eq!(
        server.schedule(&api, NS, "first", &["n1", "n2"]).await,
        "n2"
    );
    device_plugin_allocated(&api, NS, "first");

    // metrics-server stops getting fresh figures for n1: the last ones are ten
    // minutes old at the next list.
    let ten_minutes_ago = Utc::now() - chrono::Duration::minutes(10);
    api.set_node_usage("n1", "60", "100Gi", ten_minutes_ago);
    let n1 = wait_measured(&server, "n1", "the stale measurement", |m| {
        m["used"] == false
    })
    .await;
    // Ten minutes, and the few seconds the list took to come round.
    let reason = n1["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("metrics 10m") && reason.ends_with(" old (used up to 5m)"),
        "{n1}"
    );
    assert_eq!(n1["cpuPercent"], 95.24, "the figures are still shown: {n1}");
    let second = new_pod(&api, "second");
    assert_eq!(filter_on_n1(&server, &second).await, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_metrics_server_nodes_are_judged_without_usage_and_say_why() {
    let api = cluster();
    let conf = SchedulerConfFile::new(CONF);
    let server = start(&api, &conf).await;
    wait_measured(&server, "n1", "a usable measurement", |m| m["used"] == true).await;
    let first = new_pod(&api, "first");
    assert_eq!(filter_on_n1(&server, &first).await, Err(REFUSED.into()));

    // metrics-server is uninstalled: the API answers 404.
    api.set_metrics_api(MetricsApi::Absent);
    let n1 = wait_measured(&server, "n1", "the missing API", |m| {
        m["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("metrics.k8s.io is not served (HTTP 404"))
    })
    .await;
    assert_eq!(n1["used"], false, "{n1}");
    assert!(n1.get("cpuPercent").is_none(), "nothing is kept: {n1}");
    assert_eq!(filter_on_n1(&server, &first).await, Ok(()));
    let state = server.state().await;
    assert_eq!(state.0["nodeMetrics"]["source"], "metrics.k8s.io");
    assert!(
        state.0["nodeMetrics"]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("is metrics-server installed")),
        "{}",
        state.0["nodeMetrics"]
    );
    // The server keeps asking, and says so once.
    let lists = || api.requests_matching("GET", "/apis/metrics.k8s.io/v1beta1/nodes");
    let before = lists();
    wait_for(&server, "three more lists", || lists() >= before + 3).await;
    assert_eq!(
        server.log_count("node usage unavailable"),
        1,
        "{}",
        server.log_tail(20)
    );

    // Registered again but not answering (the aggregator's plain-text 503):
    // still judged without usage.
    api.set_metrics_api(MetricsApi::Unavailable);
    wait_measured(&server, "n1", "the unavailable API", |m| {
        m["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("metrics.k8s.io is not served (HTTP 503"))
    })
    .await;
    assert_eq!(filter_on_n1(&server, &first).await, Ok(()));

    // Installed again: the node is refused again.
    api.set_metrics_api(MetricsApi::Served);
    wait_measured(&server, "n1", "usage again", |m| m["used"] == true).await;
    let second = new_pod(&api, "second");
    assert_eq!(filter_on_n1(&server, &second).await, Err(REFUSED.into()));
    server
        .wait_log_count("node usage listed again", 1, SEEN)
        .await;
}

/// The configuration without usage (Volcano's default plugins).
const WITHOUT_USAGE: &str = "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_server_is_listed_only_while_the_plugin_is_configured() {
    let api = cluster();
    let conf = SchedulerConfFile::new(WITHOUT_USAGE);
    let server = start(&api, &conf).await;
    let lists = || api.requests_matching("GET", "/apis/metrics.k8s.io");
    let cycles = "vgpu_scheduler_planning_cycles_total{outcome=\"run\"}";
    // Time passes (planning cycles run) without a single list.
    let ran = server.metric(cycles).await;
    server.wait_metric(cycles, ran + 3, SEEN).await;
    assert_eq!(lists(), 0, "nothing needs node usage");
    let first = new_pod(&api, "first");
    assert_eq!(filter_on_n1(&server, &first).await, Ok(()));
    assert!(server.state().await.0.get("nodeMetrics").is_none());

    // The configuration gains the plugin (reloaded when the file changes).
    std::fs::write(&conf.path, CONF).expect("rewrite the configuration");
    wait_measured(&server, "n1", "usage once configured", |m| {
        m["used"] == true
    })
    .await;
    let second = new_pod(&api, "second");
    assert_eq!(filter_on_n1(&server, &second).await, Err(REFUSED.into()));

    // And loses it: the lists stop.
    std::fs::write(&conf.path, WITHOUT_USAGE).expect("rewrite the configuration");
    server
        .wait_log_count("node usage no longer needed", 1, SEEN)
        .await;
    let listed = lists();
    let ran = server.metric(cycles).await;
    server.wait_metric(cycles, ran + 3, SEEN).await;
    assert_eq!(lists(), listed);
    assert!(server.state().await.0.get("nodeMetrics").is_none());
}

async fn wait_for(server: &LiveServer, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + SEEN;
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; server log:\n{}",
            server.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
