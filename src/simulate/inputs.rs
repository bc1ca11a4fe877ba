//! What a report is of, in words for its first lines: a report read a week
//! later, or passed on, must say which cluster and which workload it replayed,
//! over how long, and with which version.

use super::summary::Inputs;
use super::workload::Workload;
use crate::cluster::file::ClusterObject;
use crate::device::register_codec::decode_register_annotation;
use std::collections::BTreeMap;
use std::time::Duration;

/// The node annotation HAMi's device plugin registers NVIDIA cards with.
const REGISTER: &str = "hami.io/node-nvidia-register";

/// Describes the inputs: `source` is where the cluster came from.
pub fn describe(
    source: &str,
    cluster: &[ClusterObject],
    workload_file: &str,
    workload: &Workload,
    jobs: usize,
    sample_every: Duration,
) -> Inputs {
    let mut nodes = 0usize;
    let mut cards: BTreeMap<String, usize> = BTreeMap::new();
    let mut queues = Vec::new();
    for object in cluster {
        match object {
            ClusterObject::Node(node) => {
                nodes += 1;
                let register = node
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(REGISTER));
                for device in register
                    .and_then(|r| decode_register_annotation(r).ok())
                    .unwrap_or_default()
                {
                    *cards.entry(device.model).or_default() += 1;
                }
            }
            ClusterObject::Queue(q) => {
                if let Some(name) = q.pointer("/metadata/name").and_then(|n| n.as_str()) {
                    queues.push(name.to_string());
                }
            }
            _ => {}
        }
    }
    let cards = cards
        .iter()
        .map(|(model, n)| format!("{n} {model}"))
        .collect::<Vec<_>>()
        .join(", ");
    let queues = if queues.is_empty() {
        "no queues".to_string()
    } else {
        format!("queues {}", queues.join(", "))
    };
    Inputs {
        cluster: format!("{source}: {nodes} nodes; cards: {cards}; {queues}"),
        workload: format!(
            "{workload_file}: {} lines, {jobs} jobs",
            workload.arrivals.len()
        ),
        horizon: workload.horizon.map_or_else(
            || "until the last job ends or nothing can move".to_string(),
            |h| humantime::format_duration(h).to_string(),
        ),
        sample_every: humantime::format_duration(sample_every).to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}
