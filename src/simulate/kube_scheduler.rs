//! A stand-in for kube-scheduler in front of the extender: one pod at a time,
//! every GPU node a candidate (kube-scheduler's own filters pass them all: the
//! replayed pods ask nothing of CPU or memory that GPU nodes lack), the
//! extender's `/filter`, then its `/prioritize` (highest score; ties to the first
//! node the filter kept), then `/bind`. The same calls, with the same arguments,
//! that kube-scheduler makes over HTTPS.

use crate::extender::node_names::NodeNames;
use crate::extender::wire::{ExtenderArgs, ExtenderBindingArgs, HostPriority};
use crate::scheduler::Scheduler;
use k8s_openapi::api::core::v1::Pod;

/// Why a pod was not placed this time, in the words of the step that refused
/// it: `extender filter: 0/8 nodes are available: ...` or `extender bind: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaced(pub String);

/// The extender's `/filter`, named as the step that refused.
pub const FILTER: &str = "extender filter";

/// The extender's `/bind`, named as the step that refused.
pub const BIND: &str = "extender bind";

/// Runs one scheduling cycle for the pod; the node it was bound to.
pub async fn schedule_one(
    scheduler: &Scheduler,
    pod: &Pod,
    candidates: &NodeNames,
) -> Result<String, Unplaced> {
    let args = || ExtenderArgs {
        pod: Some(pod.clone()),
        nodes: None,
        node_names: Some(candidates.clone()),
    };
    let filtered = scheduler.filter(args()).await;
    if !filtered.error.is_empty() {
        return Err(Unplaced(format!("{FILTER}: {}", filtered.error)));
    }
    let kept = filtered.node_names.unwrap_or_default();
    if kept.is_empty() {
        return Err(Unplaced(format!(
            "{FILTER}: {}",
            summarise(&filtered.failed_nodes)
        )));
    }
    let node = if kept.len() == 1 {
        kept[0].clone()
    } else {
        let mut narrowed = NodeNames::with_capacity(kept.len());
        for name in &kept {
            narrowed.push(name);
        }
        let scores = scheduler
            .prioritize(ExtenderArgs {
                node_names: Some(narrowed),
                ..args()
            })
            .unwrap_or_default();
        pick(&kept, &scores)
    };
    let bound = scheduler
        .bind(ExtenderBindingArgs {
            pod_name: pod.metadata.name.clone(),
            pod_namespace: pod.metadata.namespace.clone(),
            pod_uid: pod.metadata.uid.clone(),
            node: Some(node.clone()),
        })
        .await;
    if bound.error.is_empty() {
        Ok(node)
    } else {
        Err(Unplaced(format!("{BIND}: {}", bound.error)))
    }
}

/// The node kube-scheduler binds: the highest `/prioritize` score among the
/// nodes the filter kept (its own scores being equal for these pods), ties to
/// the first kept.
pub fn pick(kept: &[String], scores: &[HostPriority]) -> String {
    kept.iter()
        .enumerate()
        .max_by_key(|(i, name)| {
            let score = scores
                .iter()
                .find(|s| &s.host == *name)
                .map_or(0, |s| s.score);
            (score, std::cmp::Reverse(*i))
        })
        .map(|(_, name)| name.clone())
        .unwrap_or_default()
}

/// Every reason among the refused nodes, most nodes first, as kube-scheduler
/// summarises them (`0/8 nodes are available: 5 <reason>, 3 <reason>.`).
pub fn summarise(failed: &std::collections::BTreeMap<String, String>) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for reason in failed.values() {
        *counts.entry(reason.as_str()).or_default() += 1;
    }
    let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if counts.is_empty() {
        return "no node is available".into();
    }
    let each: Vec<String> = counts
        .iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    format!(
        "0/{} nodes are available: {}.",
        failed.len(),
        each.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_told_with_its_nodes_most_first() {
        let failed = [
            ("a", "CardInsufficientMemory"),
            ("b", "NodeUnfitPod"),
            ("c", "NodeUnfitPod"),
        ]
        .into_iter()
        .map(|(n, r)| (n.to_string(), r.to_string()))
        .collect();
        assert_eq!(
            summarise(&failed),
            "0/3 nodes are available: 2 NodeUnfitPod, 1 CardInsufficientMemory."
        );
    }
}
