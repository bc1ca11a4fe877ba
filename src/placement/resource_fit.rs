//! kube-scheduler's resource fit (`NodeResourcesFit`) for the planner: the
//! planner decides the node of a pod that asks for no vGPU too, and kube-scheduler
//! never asks this extender about such a pod, so nothing would catch a node
//! without room for it. Every resource the pod requests (CPU, memory, ephemeral
//! storage, extended resources) and the pod itself (a node's `pods` capacity)
//! must fit what the node has left.
//!
//! Reasons use kube-scheduler's words (`Insufficient cpu`, `Too many pods`).

use crate::resources::{Resources, pod_requests_of};
use k8s_openapi::api::core::v1::Pod;

/// The dimension a node's pod capacity goes by (`status.allocatable.pods`).
pub const POD_COUNT: &str = "pods";

/// One pod, in milli-units of [`POD_COUNT`].
const ONE_POD: i64 = 1000;

/// What a pod takes of a node: every resource it requests, and one pod slot.
pub fn pod_footprint(pod: &Pod) -> Resources {
    let mut footprint = pod_requests_of(pod, None);
    footprint.set(POD_COUNT, ONE_POD);
    footprint
}

/// Whether `want` fits a node offering `allocatable` of which `requested` is
/// taken. A node whose allocatable was never seen (no Node object yet) is not
/// judged; a node that does not offer a resource the pod asks for has none of it.
pub fn fits_node(
    allocatable: &Resources,
    requested: &Resources,
    want: &Resources,
) -> Result<(), String> {
    if allocatable.is_empty() {
        return Ok(());
    }
    let short: Vec<String> = want
        .iter()
        .filter(|(_, amount)| *amount > 0)
        .filter(|(dim, amount)| requested.get(dim).saturating_add(*amount) > allocatable.get(dim))
        .map(|(dim, _)| match dim {
            POD_COUNT => "Too many pods".to_string(),
            _ => format!("Insufficient {dim}"),
        })
        .collect();
    if short.is_empty() {
        Ok(())
    } else {
        Err(short.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(pairs: &[(&str, i64)]) -> Resources {
        Resources::from_units(pairs.iter().map(|(d, v)| (*d, *v)))
    }

    #[test]
    fn every_requested_resource_and_the_pod_slot_must_fit() {
        let allocatable = node(&[
            ("cpu", 4),
            ("memory", 8),
            ("pods", 2),
            ("example.com/fpga", 1),
        ]);
        let want = node(&[("cpu", 2), ("pods", 1)]);
        assert_eq!(fits_node(&allocatable, &node(&[("cpu", 2)]), &want), Ok(()));
        assert_eq!(
            fits_node(&allocatable, &node(&[("cpu", 3)]), &want),
            Err("Insufficient cpu".into())
        );
        assert_eq!(
            fits_node(&allocatable, &node(&[("pods", 2)]), &want),
            Err("Too many pods".into())
        );
        let fpga = node(&[("example.com/fpga", 1), ("pods", 1)]);
        assert_eq!(
            fits_node(&allocatable, &Resources::default(), &fpga),
            Ok(())
        );
        let tpu = node(&[("example.com/tpu", 1), ("pods", 1)]);
        assert_eq!(
            fits_node(&allocatable, &Resources::default(), &tpu),
            Err("Insufficient example.com/tpu".into())
        );
    }

    #[test]
    fn a_node_never_seen_is_not_judged() {
        let want = node(&[("cpu", 64), ("pods", 1)]);
        assert_eq!(
            fits_node(&Resources::default(), &Resources::default(), &want),
            Ok(())
        );
    }

    #[test]
    fn the_footprint_counts_every_request_and_one_pod() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"requests":
                {"cpu": "500m", "example.com/fpga": "1"}}}]}
        }))
        .expect("pod");
        let footprint = pod_footprint(&pod);
        assert_eq!(footprint.get("cpu"), 500);
        assert_eq!(footprint.get("example.com/fpga"), 1000);
        assert_eq!(footprint.get(POD_COUNT), 1000);
    }
}
