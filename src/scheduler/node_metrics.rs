//! The scheduler's side of measured node usage: taking in what a cluster file or a
//! list from metrics.k8s.io says, and whether anything needs it collected.

use super::Scheduler;
use crate::node_metrics::{
    MetricsSource, NodeMetricsBook, NodeMetricsSample, SampleTime, decode_node_metrics,
};
use serde_json::Value;
use std::sync::Arc;

/// The plugin that reads measured usage.
const USAGE_PLUGIN: &str = "usage";

/// What one list of metrics.k8s.io nodes gave.
#[derive(Debug)]
pub enum NodeMetricsList {
    /// The `NodeMetrics` items.
    Listed(Vec<Value>),
    /// The list failed. `gone`: the API is not there for this scheduler (not
    /// served, or not allowed), so the samples held are dropped; otherwise they are
    /// kept and age.
    Failed { problem: String, gone: bool },
}

impl Scheduler {
    /// Whether a configured plugin reads measured usage, so it must be collected.
    pub fn needs_node_metrics(&self) -> bool {
        self.node_judge().conf.enabled(USAGE_PLUGIN)
    }

    /// Node usage comes from the cluster file's `NodeMetrics` objects (a node the
    /// file gives none is said to have none).
    pub fn node_metrics_from_cluster_file(&self) {
        *self.ledger.write().load_mut().measured_mut() =
            NodeMetricsBook::new(MetricsSource::ClusterFile);
    }

    /// Takes in a `NodeMetrics` object of a cluster file. A file is a snapshot:
    /// its usage counts as measured now, when it is read.
    pub fn apply_node_metrics(&self, object: &Value) {
        let decoded = match decode_node_metrics(object, SampleTime::LoadedAt(self.clock.wall())) {
            Ok(decoded) => decoded,
            Err(problem) => {
                tracing::warn!(%problem, "ignoring a NodeMetrics object");
                return;
            }
        };
        if let Err(problem) = &decoded.sample {
            tracing::warn!(node = %decoded.node, %problem, "unreadable NodeMetrics: the node's usage is not used");
        }
        let mut ledger = self.ledger.write();
        let book = ledger.load_mut().measured_mut();
        if *book.source() == MetricsSource::NotCollected {
            *book = NodeMetricsBook::new(MetricsSource::ClusterFile);
        }
        book.insert(decoded.node, decoded.sample);
    }

    /// Takes in a list from metrics.k8s.io.
    pub fn apply_node_metrics_list(&self, list: NodeMetricsList) {
        match list {
            NodeMetricsList::Listed(items) => {
                // Built before the ledger is locked: `/filter` waits for a swap only.
                let book = NodeMetricsBook::listed(listed_samples(&items), self.clock.wall());
                self.ledger.write().load_mut().set_measured(Arc::new(book));
            }
            NodeMetricsList::Failed { problem, gone } => self
                .ledger
                .write()
                .load_mut()
                .measured_mut()
                .list_failed(problem, gone),
        }
    }

    /// Nothing needs node usage any more: forget it.
    pub fn stop_node_metrics(&self) {
        let mut ledger = self.ledger.write();
        if *ledger.load().measured().source() != MetricsSource::NotCollected {
            ledger.load_mut().measured_mut().stop();
        }
    }
}

/// The samples of a list, by node; unreadable items keep their node's reason
/// (an item naming no node is left out, and logged).
fn listed_samples(items: &[Value]) -> Vec<(String, Result<NodeMetricsSample, String>)> {
    items
        .iter()
        .filter_map(
            |item| match decode_node_metrics(item, SampleTime::Reported) {
                Ok(decoded) => Some((decoded.node, decoded.sample)),
                Err(problem) => {
                    tracing::debug!(%problem, "metrics.k8s.io item left out");
                    None
                }
            },
        )
        .collect()
}
