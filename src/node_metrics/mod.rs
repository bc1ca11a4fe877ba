//! Measured node usage: how much CPU and memory each node actually uses, as
//! metrics-server reports it through the `metrics.k8s.io/v1beta1` API (`NodeMetrics`
//! objects), or as a cluster file states it. Requests say what pods asked for; this
//! says what the node is doing, for the `usage` plugin that keeps new pods off
//! nodes that are busy in fact.
//!
//! - [`sample`]: one `NodeMetrics` object read into a sample, or why it cannot be;
//! - [`book`]: every node's last sample, and why a node has none;
//! - [`reading`]: a sample judged at a moment against the node's allocatable
//!   (percentages, age, staleness), what plugins and `/debug/state` show.
//!
//! Live mode lists the API periodically (`cluster::kube::node_metrics_poll`): it has
//! no watch.

pub mod book;
pub mod reading;
pub mod sample;

pub use book::{MetricsEntry, MetricsSource, NodeMetricsBook};
pub use reading::{MeasuredUsage, STALE_AFTER, UsagePercent, UsageReading};
pub use sample::{NodeMetricsSample, SampleTime, decode_node_metrics};
