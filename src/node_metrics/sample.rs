//! One node's measured CPU and memory, read from a `NodeMetrics` object
//! (`metrics.k8s.io/v1beta1`), the shape metrics-server serves:
//!
//! ```yaml
//! apiVersion: metrics.k8s.io/v1beta1
//! kind: NodeMetrics
//! metadata: {name: gpu-node-1}
//! timestamp: "2025-06-01T10:00:00Z"   # when the measurement window ended
//! window: 20.05s                      # how long it covers
//! usage: {cpu: 3250m, memory: 81920Mi}
//! ```
//!
//! An object whose usage cannot be read still names its node: the node then has
//! no usable sample, and the reason says what was wrong, instead of the whole list
//! being thrown away.

use crate::resources::parse_milli;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;

/// What a node's kubelet measured over a short window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeMetricsSample {
    /// CPU in use, milli-cores.
    pub cpu_milli: i64,
    /// Memory in use (the working set), in milli-units like every memory figure
    /// the scheduler keeps, so it divides by allocatable as it is.
    pub memory_milli: i64,
    /// When the measurement ended: its age counts from here.
    pub timestamp: DateTime<Utc>,
    /// How long the measurement covers, when the object says.
    pub window: Option<Duration>,
}

/// Which moment a sample counts as measured at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleTime {
    /// The object's own `timestamp` (required): what metrics-server serves.
    Reported,
    /// This moment, whatever the object says: a cluster file is a snapshot, read
    /// when it loads, and its timestamps would make every example stale.
    LoadedAt(DateTime<Utc>),
}

/// A `NodeMetrics` object read: the node it is about, and its sample or why the
/// sample cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedNodeMetrics {
    /// `metadata.name`: the node.
    pub node: String,
    /// The sample, or what is wrong with the object.
    pub sample: Result<NodeMetricsSample, String>,
}

/// Reads a `NodeMetrics` object. `Err` only when it names no node (nothing can be
/// said about any node then); any other problem is the node's `sample` error.
pub fn decode_node_metrics(object: &Value, time: SampleTime) -> Result<DecodedNodeMetrics, String> {
    let node = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("NodeMetrics without metadata.name")?;
    Ok(DecodedNodeMetrics {
        node: node.to_owned(),
        sample: sample_of(object, time),
    })
}

fn sample_of(object: &Value, time: SampleTime) -> Result<NodeMetricsSample, String> {
    // A quantity is a string, or a bare number as Kubernetes also reads it (what
    // a hand-written `cpu: 90` becomes).
    let quantity = |dim: &str| -> Result<i64, String> {
        let text = match object.pointer(&format!("/usage/{dim}")) {
            None => return Err(format!("no usage.{dim}")),
            Some(Value::String(text)) => text.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => return Err(format!("usage.{dim}: {other} is not a quantity")),
        };
        parse_milli(dim, &text).map_err(|e| format!("usage.{dim}: {e}"))
    };
    let cpu_milli = quantity("cpu")?;
    let memory_milli = quantity("memory")?;
    let timestamp = match time {
        SampleTime::LoadedAt(at) => at,
        SampleTime::Reported => {
            let text = object
                .get("timestamp")
                .and_then(Value::as_str)
                .ok_or("no timestamp")?;
            DateTime::parse_from_rfc3339(text)
                .map_err(|e| format!("timestamp {text:?}: {e}"))?
                .with_timezone(&Utc)
        }
    };
    // The window only informs: a malformed one does not spoil the figures.
    let window = object
        .get("window")
        .and_then(Value::as_str)
        .and_then(|w| crate::volcano::go_duration::parse_nanos(w).ok())
        .and_then(|nanos| u64::try_from(nanos).ok())
        .map(Duration::from_nanos);
    Ok(NodeMetricsSample {
        cpu_milli,
        memory_milli,
        timestamp,
        window,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An item of `kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes` on a
    /// metrics-server 0.7 cluster: nanocores and kibibytes.
    fn served() -> Value {
        json!({
            "metadata": {"name": "gpu-node-1", "creationTimestamp": "2025-06-01T10:00:21Z",
                         "labels": {"kubernetes.io/hostname": "gpu-node-1"}},
            "timestamp": "2025-06-01T10:00:03Z",
            "window": "20.05s",
            "usage": {"cpu": "3250123456n", "memory": "83886080Ki"}
        })
    }

    #[test]
    fn a_served_object_reads_as_milli_units_at_its_timestamp() {
        let d = decode_node_metrics(&served(), SampleTime::Reported).unwrap();
        assert_eq!(d.node, "gpu-node-1");
        let s = d.sample.unwrap();
        // Nanocores round up to the next milli-core.
        assert_eq!(s.cpu_milli, 3251);
        assert_eq!(s.memory_milli, 80 * (1 << 30) * 1000);
        assert_eq!(s.timestamp.to_rfc3339(), "2025-06-01T10:00:03+00:00");
        assert_eq!(s.window, Some(Duration::from_millis(20_050)));
    }

    #[test]
    fn a_cluster_file_sample_counts_from_when_the_file_loaded() {
        let loaded = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut object = served();
        object.as_object_mut().unwrap().remove("timestamp");
        let s = decode_node_metrics(&object, SampleTime::LoadedAt(loaded))
            .unwrap()
            .sample
            .unwrap();
        assert_eq!(s.timestamp, loaded);
    }

    #[test]
    fn garbage_spoils_the_nodes_sample_and_says_what() {
        let cases = [
            (json!({"cpu": "lots", "memory": "1Gi"}), None, "usage.cpu"),
            (
                json!({"cpu": "1", "memory": [12]}),
                None,
                "usage.memory: [12] is not",
            ),
            (json!({"cpu": "-1", "memory": "1Gi"}), None, "usage.cpu"),
            (json!({"cpu": "1"}), None, "no usage.memory"),
            (
                json!({"cpu": "1", "memory": "1Gi"}),
                Some("yesterday"),
                "timestamp \"yesterday\"",
            ),
        ];
        for (usage, timestamp, want) in cases {
            let mut object = served();
            object["usage"] = usage;
            if let Some(t) = timestamp {
                object["timestamp"] = json!(t);
            }
            let d = decode_node_metrics(&object, SampleTime::Reported).unwrap();
            assert_eq!(d.node, "gpu-node-1");
            let e = d.sample.unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        let mut object = served();
        object["usage"] = json!({"cpu": 90, "memory": 1.5e9});
        let s = decode_node_metrics(&object, SampleTime::Reported).unwrap();
        let s = s.sample.unwrap();
        assert_eq!((s.cpu_milli, s.memory_milli), (90_000, 1_500_000_000_000));
        let mut object = served();
        object["window"] = json!("a while");
        let s = decode_node_metrics(&object, SampleTime::Reported).unwrap();
        assert_eq!(s.sample.unwrap().window, None, "a bad window only informs");
        assert!(decode_node_metrics(&json!({"usage": {}}), SampleTime::Reported).is_err());
    }
}
