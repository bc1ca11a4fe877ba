//! Turning a Node's HAMi annotations into the GPUs we may place pods on.

use crate::annotations::{DEVICE_CORDON, NODE_REGISTER, NODE_SCORE};
use crate::device::pair_score::{attach_pair_scores, decode_pair_scores};
use crate::device::register_codec::decode_register_annotation;
use crate::ledger::NodeEntry;
use k8s_openapi::api::core::v1::Node;

pub use crate::ledger::NODE_UNREGISTERED;
/// Low-cardinality reason for nodes whose registration annotation is malformed.
pub const NODE_REGISTRATION_INVALID: &str = "node GPU registration invalid";
/// Low-cardinality reason for nodes whose device plugin stopped answering.
pub const NODE_DEVICE_PLUGIN_NOT_READY: &str = "node GPU device plugin not ready";
/// Node annotation of the scheduler / device plugin handshake.
pub const NODE_HANDSHAKE: &str = "hami.io/node-handshake";
/// Time layout of the handshake (Go's `2006-01-02 15:04:05`, local time).
pub const HANDSHAKE_LAYOUT: &str = "%Y-%m-%d %H:%M:%S";
/// How long a `Requesting_` handshake may stay unanswered.
const HANDSHAKE_GRACE: chrono::Duration = chrono::Duration::seconds(60);

/// Whether the node's device plugin looks alive (HAMi's rule): it advertises GPUs in
/// `status.allocatable`, or our `Requesting_<time>` handshake is younger than 60 s
/// (or absent or unparsable, in which case the scheduler writes a fresh one).
pub fn device_plugin_ready(node: &Node, count_resource: &str, now: chrono::NaiveDateTime) -> bool {
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get(count_resource))
        .and_then(|q| crate::quantity::quantity_to_count(&q.0).ok())
        .unwrap_or(0);
    if allocatable > 0 {
        return true;
    }
    let Some(handshake) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_HANDSHAKE))
    else {
        return true;
    };
    if !handshake.contains("Requesting") {
        return true;
    }
    let Some((_, time)) = handshake.split_once('_') else {
        return true;
    };
    match chrono::NaiveDateTime::parse_from_str(time.trim(), HANDSHAKE_LAYOUT) {
        Ok(asked) => now - asked <= HANDSHAKE_GRACE,
        Err(_) => true,
    }
}

/// Marks the node's GPUs unusable when its device plugin is not ready.
pub fn apply_health(entry: &mut NodeEntry, ready: bool) {
    let marked = entry.unusable_reason == Some(NODE_DEVICE_PLUGIN_NOT_READY);
    if !ready && entry.unusable_reason.is_none() {
        entry.unusable_reason = Some(NODE_DEVICE_PLUGIN_NOT_READY);
        entry.registration_error = Some(
            "device plugin not reporting: handshake unanswered for 60s and no allocatable GPUs"
                .into(),
        );
    } else if ready && marked {
        entry.unusable_reason = None;
        entry.registration_error = None;
    }
}

/// Decodes a node's GPUs. A malformed annotation disables this node's GPUs with the
/// reason logged and kept for `/debug/state`; it never fails anything else.
pub fn node_entry(node: &Node, previous: Option<&NodeEntry>) -> NodeEntry {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let annotations = node.metadata.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k));
    let register_raw = get(NODE_REGISTER);
    let score_raw = get(NODE_SCORE);
    let fingerprint = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        register_raw.hash(&mut h);
        score_raw.hash(&mut h);
        h.finish()
    };
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
        && prev.source_fingerprint == Some(fingerprint)
    {
        let mut same = prev.clone();
        same.cordoned = cordoned;
        return same;
    }

    let mut entry = NodeEntry {
        devices: Vec::new(),
        registration_error: None,
        unusable_reason: None,
        cordoned,
        source_fingerprint: Some(fingerprint),
        ..NodeEntry::default()
    };
    let Some(raw) = register_raw else {
        entry.registration_error = Some(format!("annotation {NODE_REGISTER} not found"));
        entry.unusable_reason = Some(NODE_UNREGISTERED);
        return entry;
    };
    // A malformed pair-score annotation disables the node's GPUs like a malformed
    // registration, as in HAMi: the device plugin that wrote it is not to be trusted
    // with the other either.
    let devices = decode_register_annotation(raw)
        .map_err(|e| format!("malformed {NODE_REGISTER} annotation: {e}"))
        .and_then(|mut devices| {
            if let Some(scores) = score_raw {
                let scores = decode_pair_scores(scores)
                    .map_err(|e| format!("malformed {NODE_SCORE} annotation: {e}"))?;
                attach_pair_scores(&mut devices, &scores);
            }
            Ok(devices)
        });
    match devices {
        Ok(devices) => entry.devices = devices,
        Err(e) => {
            tracing::warn!(node = name, error = %e, "node GPUs disabled");
            entry.registration_error = Some(e);
            entry.unusable_reason = Some(NODE_REGISTRATION_INVALID);
        }
    }
    entry
}
