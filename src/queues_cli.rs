//! `vgpu-scheduler queues`: the queues and gangs as tables, read from a running
//! server's `/debug/queues` or computed by planning a cluster file once.

use crate::cluster::api::ClusterApi;
use crate::cluster::file::{ClusterObject, visit_file};
use crate::cluster::memory::MemoryCluster;
use crate::config::QueuesArgs;
use crate::metrics::Metrics;
use crate::scheduler::{Scheduler, SchedulerConfig};
use anyhow::Context;
use serde_json::Value;
use std::fmt::Write;
use std::sync::Arc;

/// How long reading a server's /debug/queues may take.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs the subcommand; returns what to print.
pub async fn run(args: QueuesArgs) -> anyhow::Result<String> {
    let view = match (&args.server, &args.cluster_file) {
        (Some(server), _) => fetch(server, &args).await?,
        (None, Some(path)) => dry_run(path, args.scheduler_config.as_deref()).await?,
        (None, None) => anyhow::bail!("give --server URL or --cluster-file FILE"),
    };
    if args.json {
        return Ok(format!("{}\n", serde_json::to_string_pretty(&view)?));
    }
    Ok(render(&view))
}

async fn fetch(server: &str, args: &QueuesArgs) -> anyhow::Result<Value> {
    crate::server::install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .danger_accept_invalid_certs(args.insecure)
        .timeout(FETCH_TIMEOUT);
    if let Some(ca) = &args.ca_file {
        let pem = std::fs::read(ca).with_context(|| format!("read {}", ca.display()))?;
        builder = builder.add_root_certificate(
            reqwest::Certificate::from_pem(&pem).context("CA file is not a PEM certificate")?,
        );
    }
    if let (Some(cert), Some(key)) = (&args.client_certificate, &args.client_key) {
        let mut pem = std::fs::read(key).with_context(|| format!("read {}", key.display()))?;
        pem.push(b'\n');
        pem.extend(std::fs::read(cert).with_context(|| format!("read {}", cert.display()))?);
        builder = builder.identity(
            reqwest::Identity::from_pem(&pem)
                .context("--client-certificate/--client-key are not a PEM certificate and key")?,
        );
    }
    let url = format!("{}/debug/queues", server.trim_end_matches('/'));
    let response = builder
        .build()?
        .get(&url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    anyhow::ensure!(status.is_success(), "GET {url}: HTTP {status}");
    response
        .json()
        .await
        .with_context(|| format!("GET {url}: not JSON"))
}

async fn dry_run(path: &std::path::Path, conf: Option<&std::path::Path>) -> anyhow::Result<Value> {
    let memory = Arc::new(MemoryCluster::new(Vec::new(), Vec::new(), false));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let scheduler = Scheduler::new(SchedulerConfig::default(), api, Arc::new(Metrics::new()));
    if let Some(conf) = conf {
        scheduler.set_gang_conf(crate::scheduler::gang::driver::load_conf(conf)?);
    }
    scheduler.node_metrics_from_cluster_file();
    visit_file(path, |object| {
        scheduler.apply_cluster_object(&object);
        match object {
            ClusterObject::Node(node) => memory.insert_node(*node),
            ClusterObject::Pod(pod) => memory.insert_pod(&pod),
            _ => {}
        }
    })?;
    scheduler.run_gang_cycle().await;
    Ok(serde_json::to_value(&*scheduler.gang_view())?)
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Object(map) => {
            // A resource list: human amounts, zero dimensions left out.
            let parts: Vec<String> = map
                .iter()
                .filter_map(|(k, v)| {
                    let raw = v.as_str().map_or_else(|| v.to_string(), String::from);
                    match crate::volcano::resources::parse_milli(k, &raw) {
                        Ok(0) => None,
                        Ok(milli) => Some(format!(
                            "{}={}",
                            short_name(k),
                            crate::volcano::resources::format_amount(k, milli)
                        )),
                        Err(_) => Some(format!("{}={raw}", short_name(k))),
                    }
                })
                .collect();
            if parts.is_empty() {
                "-".into()
            } else {
                parts.join(",")
            }
        }
        other => other.to_string(),
    }
}

/// `nvidia.com/gpumem` -> `gpumem`: the vendor prefix only widens the table.
fn short_name(resource: &str) -> &str {
    resource.rsplit('/').next().unwrap_or(resource)
}

fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                if i + 1 == row.len() {
                    cell.clone()
                } else {
                    format!("{cell:<width$}", width = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// Queues, then gangs with the reason each waits, then (when there are any) the
/// pods waiting for evicted pods to leave and the last evictions.
pub fn render(view: &Value) -> String {
    let mut queues = vec![
        [
            "QUEUE",
            "STATE",
            "WEIGHT",
            "PRIORITY",
            "SHARE",
            "DESERVED",
            "ALLOCATED",
            "CAPABILITY",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for q in view["queues"].as_array().into_iter().flatten() {
        let state = match &q["state_reason"] {
            Value::String(reason) => format!("{} ({reason})", text(&q["state"])),
            _ => text(&q["state"]),
        };
        queues.push(vec![
            text(&q["name"]),
            state,
            text(&q["weight"]),
            text(&q["priority"]),
            q["share"]
                .as_f64()
                .map_or("-".into(), |s| format!("{s:.2}")),
            text(&q["deserved"]),
            text(&q["allocated"]),
            text(&q["real_capability"]),
        ]);
    }
    let mut gangs = vec![
        [
            "GANG",
            "QUEUE",
            "PHASE",
            "READY/MIN",
            "MEMBERS",
            "WHY IT WAITS",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for g in view["gangs"].as_array().into_iter().flatten() {
        let name = if g["single"] == Value::Bool(true) {
            format!("pod {}", text(&g["gang"]))
        } else if let Some(api) = g["api"].as_str() {
            // Kubernetes' own PodGroup: say so, it is not in `kubectl get pg`.
            format!("{} ({api})", text(&g["gang"]))
        } else {
            text(&g["gang"])
        };
        gangs.push(vec![
            name,
            text(&g["queue"]),
            text(&g["phase"]),
            format!("{}/{}", text(&g["ready"]), text(&g["minMember"])),
            text(&g["members"]),
            g["message"].as_str().unwrap_or("").to_string(),
        ]);
    }
    let mut out = table(&queues);
    out.push('\n');
    out.push_str(&table(&gangs));
    let pipelined = pipelined_rows(view);
    if pipelined.len() > 1 {
        out.push('\n');
        out.push_str(&table(&pipelined));
    }
    let evictions = eviction_rows(view);
    if evictions.len() > 1 {
        out.push('\n');
        out.push_str(&table(&evictions));
    }
    for note in view["configurationNotes"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "\nnote: {}", text(note));
    }
    if let Some(at) = view["plannedAt"].as_str() {
        let _ = writeln!(out, "\nplanned at {at}");
    }
    out
}

/// Pods waiting for evicted pods to leave, and whom they wait for.
fn pipelined_rows(view: &Value) -> Vec<Vec<String>> {
    let mut rows = vec![
        ["WAITING POD", "QUEUE", "NODE", "UNTIL", "WAITS FOR"]
            .map(String::from)
            .to_vec(),
    ];
    for p in view["pipelined"].as_array().into_iter().flatten() {
        let victims: Vec<String> = p["waitsFor"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let pod = text(&v["pod"]);
                if v["leaving"] == Value::Bool(true) {
                    format!("{pod} (leaving)")
                } else {
                    pod
                }
            })
            .collect();
        rows.push(vec![
            text(&p["pod"]),
            text(&p["queue"]),
            text(&p["node"]),
            text(&p["deadline"]),
            victims.join(", "),
        ]);
    }
    rows
}

/// The last evictions asked, with what became of them.
fn eviction_rows(view: &Value) -> Vec<Vec<String>> {
    let mut rows = vec![
        ["EVICTED POD", "ACTION", "QUEUE", "AT", "OUTCOME", "WHY"]
            .map(String::from)
            .to_vec(),
    ];
    for e in view["evictions"].as_array().into_iter().flatten() {
        let outcome = match e["detail"].as_str() {
            Some(detail) => format!("{} ({detail})", text(&e["outcome"])),
            None => text(&e["outcome"]),
        };
        rows.push(vec![
            text(&e["pod"]),
            text(&e["action"]),
            text(&e["queue"]),
            text(&e["at"]),
            outcome,
            text(&e["reason"]),
        ]);
    }
    rows
}
