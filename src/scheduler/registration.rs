//! Turning a Node's HAMi annotations into the GPUs we may place pods on.

use crate::annotations::{DEVICE_CORDON, NODE_REGISTER, NODE_SCORE};
use crate::device::pair_score::{attach_pair_scores, decode_pair_scores};
use crate::device::register_codec::decode_register_annotation;
use crate::ledger::NodeEntry;
use k8s_openapi::api::core::v1::Node;

/// Low-cardinality reason for nodes without a usable registration.
pub const NODE_UNREGISTERED: &str = "node unregistered";
/// Low-cardinality reason for nodes whose registration annotation is malformed.
pub const NODE_REGISTRATION_INVALID: &str = "node GPU registration invalid";

/// Decodes a node's GPUs. A malformed annotation disables this node's GPUs with the
/// reason logged and kept for `/debug/state`; it never fails anything else.
pub fn node_entry(node: &Node, previous: Option<&NodeEntry>) -> NodeEntry {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let annotations = node.metadata.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
    let register_raw = get(NODE_REGISTER);
    let score_raw = get(NODE_SCORE);
    let cordoned = get(DEVICE_CORDON)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();

    if let Some(prev) = previous
        && prev.register_raw == register_raw
        && prev.score_raw == score_raw
    {
        let mut same = prev.clone();
        same.cordoned = cordoned;
        return same;
    }

    let mut entry = NodeEntry {
        devices: Vec::new(),
        registration_error: None,
        cordoned,
        register_raw: register_raw.clone(),
        score_raw: score_raw.clone(),
    };
    let Some(raw) = register_raw else {
        entry.registration_error = Some(format!("annotation {NODE_REGISTER} not found"));
        return entry;
    };
    match decode_register_annotation(&raw) {
        Ok(mut devices) => {
            if let Some(scores) = score_raw {
                match decode_pair_scores(&scores) {
                    Ok(scores) => attach_pair_scores(&mut devices, &scores),
                    Err(e) => {
                        tracing::warn!(node = name, error = %e, "ignoring malformed {NODE_SCORE} annotation; topology-aware placement treats all pairs as unconnected");
                    }
                }
            }
            entry.devices = devices;
        }
        Err(e) => {
            tracing::warn!(node = name, error = %e, "node GPUs disabled: malformed {NODE_REGISTER} annotation");
            entry.registration_error = Some(format!("malformed {NODE_REGISTER} annotation: {e}"));
        }
    }
    entry
}

/// The reason shown to kube-scheduler for a node that cannot take vGPU pods at all.
pub fn unusable_reason(entry: &NodeEntry) -> Option<&'static str> {
    match &entry.registration_error {
        Some(e) if e.starts_with("annotation ") => Some(NODE_UNREGISTERED),
        Some(_) => Some(NODE_REGISTRATION_INVALID),
        None if entry.devices.is_empty() => Some(NODE_UNREGISTERED),
        None => None,
    }
}
