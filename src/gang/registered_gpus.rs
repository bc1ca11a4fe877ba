//! What a member held on a node is charged reads of the node: the GPUs its
//! device plugin registered (their UUIDs, models and memory), never what they
//! hold. A placement replaces the node's entry (its usage changed) while the
//! registered GPUs stay as they were; the members already held there are
//! charged the same, so their tasks and jobs need not be built again. Only a
//! new registration (cards swapped, MIG geometry or memory changed) does.

use crate::ledger::NodeEntry;
use std::sync::Arc;

/// Whether two entries of a node register the same GPUs: the same entry, or
/// equal devices.
pub fn same_registered_gpus(a: &Arc<NodeEntry>, b: &Arc<NodeEntry>) -> bool {
    Arc::ptr_eq(a, b) || a.devices == b.devices
}
