//! The chart's Grafana dashboard (`charts/vgpu-scheduler/dashboards/`), as the
//! real `helm` renders it into a ConfigMap for Grafana's dashboard sidecar, and
//! checked against what a real server exports: every panel target and variable
//! query parses as PromQL, and every metric, label and literal label value it
//! uses is in the `/metrics` of `vgpu-scheduler serve` run on the examples
//! (`examples/cluster.yaml` after a `/filter` and a `/bind`, with its gang planned;
//! `examples/tidal/`, whose reclaim evicts; `examples/mig/`). The checker itself
//! is shown to catch misspelt metrics, labels, values, legends and variables.

mod dashboard;
mod helm;
mod support;

use dashboard::catalog::Catalog;
use dashboard::{check_dashboard, grafana};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use support::{Server, ServerOptions};

const NAMESPACE: &str = "vgpu-system";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

// ---------------------------------------------------------------------------
// The chart
// ---------------------------------------------------------------------------

/// Every object `helm template` renders with `overrides`.
fn render(namespace: &str, overrides: &Value) -> Vec<Value> {
    let files = helm::template(
        &helm::chart_dir(),
        &helm::Release {
            name: "vgpu-scheduler",
            namespace,
            kube_version: "v1.33.0",
        },
        overrides,
    );
    let mut objects = Vec::new();
    for (file, text) in files {
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let yaml = serde_yaml_ng::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{file}: invalid YAML: {e}"));
            if !yaml.is_null() {
                objects.push(serde_json::to_value(yaml).expect("JSON-compatible YAML"));
            }
        }
    }
    objects
}

/// The ConfigMaps labelled `key: value`, as Grafana's sidecar selects them.
fn sidecar_config_maps<'a>(objects: &'a [Value], key: &str, value: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"][key] == value)
        .collect()
}

/// The dashboard JSON of the one ConfigMap labelled `key: value`.
fn dashboard_in(objects: &[Value], key: &str, value: &str) -> (Value, Value) {
    let maps = sidecar_config_maps(objects, key, value);
    assert_eq!(
        maps.len(),
        1,
        "one ConfigMap labelled {key}={value}: {maps:#?}"
    );
    let map = maps[0].clone();
    let data = map["data"].as_object().expect("ConfigMap data");
    assert_eq!(data.len(), 1, "one dashboard file: {:?}", data.keys());
    let (file, text) = data.iter().next().unwrap();
    assert!(file.ends_with(".json"), "the sidecar loads *.json: {file}");
    let dashboard: Value = serde_json::from_str(text.as_str().expect("text"))
        .unwrap_or_else(|e| panic!("{file} is not JSON: {e}"));
    (map, dashboard)
}

/// The dashboard as the chart renders it with `dashboard.enabled`.
fn rendered_dashboard() -> Value {
    let objects = render(NAMESPACE, &json!({"dashboard": {"enabled": true}}));
    dashboard_in(&objects, "grafana_dashboard", "1").1
}

#[test]
fn the_dashboard_is_off_by_default_and_on_it_is_a_config_map_for_the_sidecar() {
    if !helm::available("the_dashboard_is_off_by_default_and_on_it_is_a_config_map_for_the_sidecar")
    {
        return;
    }
    let default = render(NAMESPACE, &json!({}));
    assert!(
        sidecar_config_maps(&default, "grafana_dashboard", "1").is_empty(),
        "no dashboard unless asked for"
    );
    let objects = render(NAMESPACE, &json!({"dashboard": {"enabled": true}}));
    assert_eq!(
        objects.len(),
        default.len() + 1,
        "the ConfigMap is all it adds"
    );
    let (map, dashboard) = dashboard_in(&objects, "grafana_dashboard", "1");
    assert_eq!(map["metadata"]["namespace"], NAMESPACE);
    assert_eq!(map["metadata"]["name"], "vgpu-scheduler-dashboard");
    // The file in the chart, byte for byte.
    let file: Value = serde_json::from_str(&read(
        "charts/vgpu-scheduler/dashboards/vgpu-scheduler.json",
    ))
    .unwrap();
    assert_eq!(dashboard, file);
    assert_eq!(dashboard["uid"], "vgpu-scheduler");
    assert_eq!(dashboard["title"], "vgpu-scheduler");
}

#[test]
fn the_sidecar_label_namespace_and_annotations_are_values() {
    if !helm::available("the_sidecar_label_namespace_and_annotations_are_values") {
        return;
    }
    let overrides = json!({"dashboard": {
        "enabled": true,
        "namespace": "monitoring",
        "label": "example.com/dashboard",
        "labelValue": "vgpu",
        "labels": {"team": "gpu"},
        "annotations": {"grafana_folder": "GPU"}
    }});
    helm::lint(&helm::chart_dir(), &overrides);
    let objects = render(NAMESPACE, &overrides);
    assert!(sidecar_config_maps(&objects, "grafana_dashboard", "1").is_empty());
    let (map, _) = dashboard_in(&objects, "example.com/dashboard", "vgpu");
    assert_eq!(map["metadata"]["namespace"], "monitoring");
    assert_eq!(map["metadata"]["labels"]["team"], "gpu");
    assert_eq!(map["metadata"]["annotations"]["grafana_folder"], "GPU");
}

/// Grafana wiring users rely on: one `datasource` variable of Prometheus type
/// that every panel and query uses, so the dashboard works whatever the data
/// source is called; unique panel ids; every panel titled and placed.
#[test]
fn every_panel_reads_the_datasource_variable() {
    if !helm::available("every_panel_reads_the_datasource_variable") {
        return;
    }
    let dashboard = rendered_dashboard();
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    let datasource: Vec<&Value> = variables
        .iter()
        .filter(|v| v["type"] == "datasource")
        .collect();
    assert_eq!(datasource.len(), 1, "{datasource:?}");
    assert_eq!(datasource[0]["name"], "datasource");
    assert_eq!(datasource[0]["query"], "prometheus");
    let wanted = json!({"type": "prometheus", "uid": "${datasource}"});
    for v in variables.iter().filter(|v| v["type"] == "query") {
        assert_eq!(v["datasource"], wanted, "variable {}", v["name"]);
    }
    let mut ids = BTreeSet::new();
    for panel in grafana::all_panels(&dashboard) {
        let title = panel["title"].as_str().unwrap_or("");
        assert!(!title.is_empty(), "untitled panel: {panel}");
        assert!(
            ids.insert(panel["id"].as_u64().expect("panel id")),
            "{title}: id taken"
        );
        assert!(
            panel["gridPos"]["w"].as_u64().is_some(),
            "{title}: no gridPos"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"], wanted, "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(t["datasource"], wanted, "{title}: {t}");
        }
    }
}

// ---------------------------------------------------------------------------
// What the server exports
// ---------------------------------------------------------------------------

/// `/metrics` of `server` once `ready` holds of it.
async fn metrics_when(server: &Server, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, text) = server.get("/metrics").await;
        assert_eq!(status, 200, "/metrics: {text}");
        if ready(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never showed in /metrics:\n{text}\nlog:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn serve_example(cluster: &str, args: &[String]) -> Server {
    Server::start_with(ServerOptions {
        cluster_text: Some(read(cluster)),
        args: args.to_vec(),
        ..Default::default()
    })
    .await
}

/// The scrapes of servers run on the examples, driven until every family the
/// dashboard reads has samples (families without any are not even listed).
async fn scrape() -> Vec<String> {
    // examples/cluster.yaml: the README's "Try it" filter and bind, and the
    // gang the planner places at start.
    let example = serve_example("examples/cluster.yaml", &[]).await;
    let pod = json!({
        "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1"},
        "spec": {"containers": [{"name": "c", "resources": {"limits":
            {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "20000"}}}]}
    });
    let nodes = ["gpu-h100-a", "gpu-a100-b", "gpu-4090-c", "cpu-only-d"];
    let node = support::chosen_node(&example.filter(&pod, &nodes).await);
    let bound = example.bind(&pod, &node).await;
    assert!(bound.get("Error").is_none_or(|e| e == ""), "{bound}");
    let plain = metrics_when(&example, "a bind and a planned gang", |t| {
        t.contains(r#"vgpu_scheduler_request_duration_seconds_count{verb="bind"}"#)
            && t.contains("vgpu_scheduler_queue_podgroups{")
    })
    .await;
    // examples/tidal/: reclaim evicts the training gang at start.
    let conf = repo("examples/tidal/volcano-scheduler.conf");
    let tidal = serve_example(
        "examples/tidal/cluster.yaml",
        &["--scheduler-config".into(), conf.display().to_string()],
    )
    .await;
    let evicting = metrics_when(&tidal, "an eviction", |t| {
        t.contains("vgpu_scheduler_evictions_total{")
    })
    .await;
    let mig = serve_example("examples/mig/cluster.yaml", &[]).await;
    let mig = metrics_when(&mig, "a MIG instance", |t| {
        t.contains("hami_node_gpu_mig_instance_info{")
    })
    .await;
    vec![plain, evicting, mig]
}

/// Every family of the scrapes, with the labels and values seen (scraped once
/// for all the tests of this file).
fn exported() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let texts = std::thread::spawn(|| {
            tokio::runtime::Runtime::new()
                .expect("runtime")
                .block_on(scrape())
        })
        .join()
        .expect("scraping the example servers");
        let mut catalog = Catalog::default();
        for text in texts {
            catalog.merge(Catalog::parse(&text).expect("a valid exposition"));
        }
        catalog
    })
}

// ---------------------------------------------------------------------------
// The dashboard against what the server exports
// ---------------------------------------------------------------------------

#[test]
fn every_query_uses_metrics_labels_and_values_the_server_exports() {
    if !helm::available("every_query_uses_metrics_labels_and_values_the_server_exports") {
        return;
    }
    let dashboard = rendered_dashboard();
    let found = check_dashboard(&dashboard, exported());
    assert!(
        found.problems.is_empty(),
        "{} problems:\n{}",
        found.problems.len(),
        found.problems.join("\n")
    );
    // Every query was checked: each `expr` of the file, and each query variable.
    let text = dashboard.to_string();
    let query_variables = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "query")
        .count();
    assert_eq!(
        found.queries,
        text.matches(r#""expr":"#).count() + query_variables,
        "queries checked"
    );
    // What the dashboard is for: allocation per node and card type (memory,
    // cores, slots), fragmentation, queues, gangs, latency, evictions.
    for family in [
        "hami_gpu_memory_allocated_bytes",
        "hami_gpu_memory_limit_bytes",
        "hami_gpu_core_allocated_ratio",
        "hami_gpu_core_limit_ratio",
        "hami_gpu_shared_count",
        "vgpu_scheduler_gpu_slots",
        "vgpu_scheduler_queue_allocated",
        "vgpu_scheduler_queue_deserved",
        "vgpu_scheduler_queue_share",
        "vgpu_scheduler_queue_podgroups",
        "vgpu_scheduler_request_duration_seconds",
        "vgpu_scheduler_evictions",
    ] {
        assert!(found.families.contains(family), "no panel reads {family}");
    }
}

/// Replaces `from` by `to` in the first string of `value` that holds it.
fn replace_first(value: &mut Value, from: &str, to: &str) -> bool {
    match value {
        Value::String(s) if s.contains(from) => {
            *s = s.replacen(from, to, 1);
            true
        }
        Value::Array(items) => items.iter_mut().any(|v| replace_first(v, from, to)),
        Value::Object(map) => map.values_mut().any(|v| replace_first(v, from, to)),
        _ => false,
    }
}

/// The rendered dashboard with `from` replaced by `to` in one query, legend or
/// variable.
fn misspelt(from: &str, to: &str) -> Value {
    let mut dashboard = rendered_dashboard();
    assert!(
        replace_first(&mut dashboard, from, to),
        "the dashboard has no {from}"
    );
    dashboard
}

/// A misspelling anywhere a user would see its effect (an empty panel, a blank
/// legend, a variable never substituted) fails the check, naming the panel.
#[test]
fn a_misspelt_metric_label_value_legend_or_variable_fails_the_check() {
    if !helm::available("a_misspelt_metric_label_value_legend_or_variable_fails_the_check") {
        return;
    }
    let cases = [
        (
            "vgpu_scheduler_gpu_slots{",
            "vgpu_scheduler_gpu_slot{",
            "no metric `vgpu_scheduler_gpu_slot`",
        ),
        (
            "vgpu_scheduler_filter_total",
            "vgpu_scheduler_filter",
            "did you mean vgpu_scheduler_filter_total",
        ),
        (
            "_seconds_bucket{verb=\"filter\"}",
            "_seconds{verb=\"filter\"}",
            "no metric `vgpu_scheduler_request_duration_seconds`",
        ),
        ("sum by (node)", "sum by (nodes)", "no label `nodes` there"),
        (
            "{verb=\"bind\"}",
            "{verbs=\"bind\"}",
            "has no label `verbs`",
        ),
        (
            "{verb=\"bind\"}",
            "{verb=\"Bind\"}",
            "no sample had this value",
        ),
        (
            "phase=~\"Pending|Inqueue\"",
            "phase=~\"Pending|Queued\"",
            "`vgpu_scheduler_queue_podgroups{phase=\"Queued\"}`",
        ),
        (
            "{{node}}",
            "{{nodename}}",
            "the legend shows `{{nodename}}`",
        ),
        (
            "queue=~\"$queue\"",
            "queue=~\"$queues\"",
            "`$queues` is not a variable",
        ),
        (
            "label_values(vgpu_scheduler_queue_allocated, queue)",
            "label_values(vgpu_scheduler_queue_allocated, queues)",
            "label_values of `queues`",
        ),
        (
            "sum by (le) (rate(",
            "sum by (verb) (rate(",
            "histogram_quantile over series without `le`",
        ),
    ];
    for (from, to, expected) in cases {
        let found = check_dashboard(&misspelt(from, to), exported());
        assert!(
            found.problems.iter().any(|p| p.contains(expected)),
            "{from} -> {to}: expected a problem with {expected:?}, got {:#?}",
            found.problems
        );
    }
}

// ---------------------------------------------------------------------------
// The checker on its own
// ---------------------------------------------------------------------------

/// A scrape shaped as the server's: a counter, a histogram, gauges whose label
/// sets differ by one label.
const EXPOSITION: &str = r#"# HELP vgpu_scheduler_bind Bind calls by outcome (bound, failed).
# TYPE vgpu_scheduler_bind counter
vgpu_scheduler_bind_total{outcome="bound"} 1
# HELP vgpu_scheduler_request_duration_seconds Time to answer a request.
# TYPE vgpu_scheduler_request_duration_seconds histogram
vgpu_scheduler_request_duration_seconds_sum{verb="filter"} 0.01
vgpu_scheduler_request_duration_seconds_count{verb="filter"} 1
vgpu_scheduler_request_duration_seconds_bucket{le="0.1",verb="filter"} 1
vgpu_scheduler_request_duration_seconds_bucket{le="+Inf",verb="filter"} 1
# TYPE hami_gpu_memory_limit_bytes gauge
hami_gpu_memory_limit_bytes{zone="vGPU",node="gpu-h100-a",device_uuid="GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc",device_index="0",device_type="NVIDIA H100 80GB HBM3"} 85520809984.0
# TYPE hami_gpu_memory_allocated_bytes gauge
hami_gpu_memory_allocated_bytes{zone="vGPU",node="gpu-h100-a",device_uuid="GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc",device_index="0",device_cores="100",device_type="NVIDIA H100 80GB HBM3"} 0.0
# TYPE vgpu_scheduler_queue_pipelined_pods gauge
# EOF
"#;

fn problems(expr: &str) -> Vec<String> {
    let catalog = Catalog::parse(EXPOSITION).unwrap();
    dashboard::promql::check(expr, &catalog).0.problems
}

#[test]
fn the_checker_reads_families_series_and_labels_off_an_exposition() {
    let catalog = Catalog::parse(EXPOSITION).unwrap();
    let bucket = catalog
        .series("vgpu_scheduler_request_duration_seconds_bucket")
        .expect("buckets");
    assert_eq!(bucket.family, "vgpu_scheduler_request_duration_seconds");
    assert_eq!(bucket.extra, ["le"]);
    assert_eq!(
        bucket.info.labels.keys().collect::<Vec<_>>(),
        ["verb"],
        "`le` belongs to the buckets only"
    );
    assert_eq!(
        catalog.series("vgpu_scheduler_bind_total").unwrap().family,
        "vgpu_scheduler_bind"
    );
    assert!(
        catalog.series("vgpu_scheduler_bind").is_none(),
        "counters are stored with _total"
    );
    let gpu = &catalog.families["hami_gpu_memory_limit_bytes"];
    assert_eq!(
        gpu.labels["device_type"],
        BTreeSet::from(["NVIDIA H100 80GB HBM3".to_string()])
    );
    assert_eq!(
        catalog.families["vgpu_scheduler_queue_pipelined_pods"].samples,
        0
    );
}

#[test]
fn the_checker_accepts_sound_queries() {
    for expr in [
        r#"histogram_quantile(0.99, sum by (le) (rate(vgpu_scheduler_request_duration_seconds_bucket{verb="filter"}[5m])))"#,
        r#"histogram_quantile(0.9, sum by (verb, le) (rate(vgpu_scheduler_request_duration_seconds_bucket[5m])))"#,
        "sum by (outcome) (rate(vgpu_scheduler_bind_total{job=~\"$job\"}[5m]))",
        "sum by (node) (hami_gpu_memory_allocated_bytes) / sum by (node) (hami_gpu_memory_limit_bytes)",
        "hami_gpu_memory_allocated_bytes / ignoring (device_cores) hami_gpu_memory_limit_bytes",
        "hami_gpu_memory_allocated_bytes / on (node, device_uuid) hami_gpu_memory_limit_bytes",
        "hami_gpu_memory_allocated_bytes * on (node, device_uuid) group_left (zone) hami_gpu_memory_limit_bytes",
        "sum by (gpu) (label_replace(hami_gpu_memory_limit_bytes, \"gpu\", \"$1\", \"device_uuid\", \"(.*)\"))",
        "count(hami_gpu_memory_limit_bytes > 0) or vector(0)",
        "sum(vgpu_scheduler_request_duration_seconds_count) / sum(vgpu_scheduler_request_duration_seconds_sum)",
    ] {
        assert_eq!(problems(expr), Vec::<String>::new(), "{expr}");
    }
}

#[test]
fn the_checker_rejects_misspelt_or_mismatched_queries() {
    for (expr, expected) in [
        (
            "sum(hami_gpu_memory_limit_byte)",
            "no metric `hami_gpu_memory_limit_byte`",
        ),
        (
            "rate(vgpu_scheduler_bind[5m])",
            "did you mean vgpu_scheduler_bind_total",
        ),
        (
            r#"hami_gpu_memory_limit_bytes{nodename="gpu-h100-a"}"#,
            "has no label `nodename`",
        ),
        (
            r#"hami_gpu_memory_limit_bytes{node="gpu-h100-b"}"#,
            "no sample had this value",
        ),
        (
            "sum by (device_cores) (hami_gpu_memory_limit_bytes)",
            "no label `device_cores` there",
        ),
        (
            "sum by (node) (sum by (device_uuid) (hami_gpu_memory_limit_bytes))",
            "no label `node` there",
        ),
        (
            "vgpu_scheduler_request_duration_seconds_count{le=\"0.1\"}",
            "has no label `le`",
        ),
        (
            "histogram_quantile(0.9, sum(rate(vgpu_scheduler_request_duration_seconds_bucket[5m])))",
            "without `le`",
        ),
        // allocated carries device_cores, the limit does not: nothing matches.
        (
            "hami_gpu_memory_allocated_bytes / hami_gpu_memory_limit_bytes",
            "no series match",
        ),
        (
            "hami_gpu_memory_allocated_bytes and hami_gpu_memory_limit_bytes",
            "no series match",
        ),
        (
            "hami_gpu_memory_allocated_bytes / on (gpu) hami_gpu_memory_limit_bytes",
            "no label `gpu` there",
        ),
        (
            "max(vgpu_scheduler_queue_pipelined_pods)",
            "had no sample in the scrape",
        ),
        ("sum by (node) (", "not PromQL"),
        (r#"{node="gpu-h100-a"}"#, "names no metric"),
    ] {
        let found = problems(expr);
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "{expr}: expected {expected:?} in {found:#?}"
        );
    }
}

#[test]
fn grafana_syntax_is_read_as_grafana_means_it() {
    assert_eq!(
        grafana::to_promql(
            "rate(x[$__rate_interval]) + rate(x[${__interval}]) + increase(x[$__range])"
        ),
        "rate(x[5m]) + rate(x[5m]) + increase(x[5m])"
    );
    assert_eq!(
        grafana::referenced_variables(
            r#"x{node=~"$node", q=~"${queue}", t="[[type]]"}[$__rate_interval]"#
        ),
        BTreeSet::from(["node".into(), "queue".into(), "type".into()])
    );
    assert_eq!(
        grafana::variable_source(
            r#"label_values(hami_gpu_memory_limit_bytes{node=~"$node"}, device_type)"#
        ),
        Ok(grafana::VariableSource::LabelValues {
            selector: Some(r#"hami_gpu_memory_limit_bytes{node=~"$node"}"#.into()),
            label: "device_type".into()
        })
    );
    assert!(grafana::variable_source("metrics(hami_.*)").is_err());
    assert_eq!(
        grafana::legend_labels("{{queue}} {{ phase }}"),
        ["queue", "phase"]
    );
}

// ---------------------------------------------------------------------------
// The README lists what the server exports
// ---------------------------------------------------------------------------

/// The README's metrics table: metric as queried -> its labels.
fn readme_metrics() -> BTreeMap<String, BTreeSet<String>> {
    let readme = read("README.md");
    let section = readme
        .split_once("\n## Metrics")
        .map(|(_, s)| s)
        .expect("README has a Metrics section");
    let section = section.split("\n## ").next().unwrap();
    let code = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    let mut out = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let labels: BTreeSet<String> = code(cells[3]).into_iter().collect();
        for name in code(cells[1]) {
            out.insert(name, labels.clone());
        }
    }
    out
}

/// Every family a server run on the examples exports is in the README's
/// metrics table under the name a query uses, with its labels (`zone`, which
/// every `hami_*` GPU gauge carries, is said once above the table).
#[test]
fn the_readme_lists_every_metric_with_its_labels() {
    let documented = readme_metrics();
    let catalog = exported();
    let mut missing = Vec::new();
    for (family, info) in &catalog.families {
        let queried = catalog
            .series_names()
            .into_iter()
            .find(|s| catalog.series(s).is_some_and(|x| x.family == family))
            .expect("a series");
        let name = match info.kind.as_str() {
            "histogram" => family.clone(),
            _ => queried,
        };
        let labels: BTreeSet<String> = info
            .labels
            .keys()
            .filter(|l| *l != "zone")
            .cloned()
            .collect();
        match documented.get(&name) {
            None => missing.push(format!("{name}: not in the table")),
            Some(listed) if *listed != labels => missing.push(format!(
                "{name}: the table lists labels {listed:?}, the server exports {labels:?}"
            )),
            Some(_) => {}
        }
    }
    assert!(
        missing.is_empty(),
        "README metrics table:\n{}",
        missing.join("\n")
    );
}
