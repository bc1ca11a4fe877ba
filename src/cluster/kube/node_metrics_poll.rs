//! Lists nodes' measured usage from `metrics.k8s.io/v1beta1` (metrics-server) every
//! `--node-metrics-interval`, while a configured plugin reads it. The API has no
//! watch, so it is polled; each list replaces the scheduler's samples.
//!
//! A cluster without metrics-server answers 404 (no such API) or 503 (the API is
//! registered but its server is down): that is said once in the log, nodes are
//! judged without usage and say why, and the list is tried again each period. A
//! 403 means this scheduler may not read it (RBAC): the same, with what to grant.

use crate::scheduler::Scheduler;
use crate::scheduler::node_metrics::NodeMetricsList;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// One list may take this long before it counts as failed (the samples held then
/// age; the next period tries again).
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// metrics-server's node resource.
fn node_metrics_resource() -> ApiResource {
    ApiResource {
        group: "metrics.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "metrics.k8s.io/v1beta1".into(),
        kind: "NodeMetrics".into(),
        plural: "nodes".into(),
    }
}

/// Starts the poller.
pub fn start(client: Client, scheduler: Arc<Scheduler>, every: Duration) -> JoinHandle<()> {
    let api: Api<DynamicObject> = Api::all_with(client, &node_metrics_resource());
    tokio::spawn(async move {
        let mut collecting = false;
        // The last problem logged, so a lasting one is said once.
        let mut logged: Option<String> = None;
        loop {
            if scheduler.needs_node_metrics() {
                if !collecting {
                    tracing::info!(every = ?every, "listing node usage from metrics.k8s.io");
                    collecting = true;
                }
                let list = list(&api).await;
                log_change(&list, &mut logged);
                scheduler.apply_node_metrics_list(list);
            } else if collecting {
                tracing::info!("node usage no longer needed; not listing metrics.k8s.io");
                scheduler.stop_node_metrics();
                collecting = false;
                logged = None;
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// One list, with what a failure means.
async fn list(api: &Api<DynamicObject>) -> NodeMetricsList {
    let answer = tokio::time::timeout(LIST_TIMEOUT, api.list(&ListParams::default())).await;
    let failed = |problem: String, gone: bool| NodeMetricsList::Failed { problem, gone };
    match answer {
        Ok(Ok(list)) => NodeMetricsList::Listed(
            list.items
                .iter()
                .filter_map(|item| serde_json::to_value(item).ok())
                .collect(),
        ),
        Ok(Err(kube::Error::Api(status))) if matches!(status.code, 404 | 503) => failed(
            format!(
                "metrics.k8s.io is not served (HTTP {}: {}): is metrics-server installed and running?",
                status.code,
                status.message.trim()
            ),
            true,
        ),
        Ok(Err(kube::Error::Api(status))) if status.code == 403 => failed(
            format!(
                "not allowed to list metrics.k8s.io nodes (HTTP 403): grant the scheduler's ClusterRole list on them; {}",
                status.message.trim()
            ),
            true,
        ),
        Ok(Err(error)) => failed(
            format!("listing metrics.k8s.io nodes failed: {error}"),
            false,
        ),
        Err(_) => failed(
            format!(
                "listing metrics.k8s.io nodes took longer than {}",
                humantime::format_duration(LIST_TIMEOUT)
            ),
            false,
        ),
    }
}

/// Logs a list's problem when it is new, and the recovery once.
fn log_change(list: &NodeMetricsList, logged: &mut Option<String>) {
    match list {
        NodeMetricsList::Failed { problem, .. } => {
            if logged.as_deref() != Some(problem.as_str()) {
                tracing::warn!(%problem, "node usage unavailable: nodes are judged without it");
                *logged = Some(problem.clone());
            }
        }
        NodeMetricsList::Listed(items) => {
            if logged.take().is_some() {
                tracing::info!(
                    nodes = items.len(),
                    "node usage listed again from metrics.k8s.io"
                );
            }
        }
    }
}
