//! What the task-topology tests build their jobs and relations from.

use super::relations::RoleRelations;
use crate::volcano::framework::testing::gpu_task;
use crate::volcano::framework::{GangKey, TaskInfo};
use crate::volcano::task_topology::{TaskTopology, TopologyAnnotations};
use std::collections::BTreeSet;

/// The job `ns/tf` the tests place.
pub fn key() -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: "tf".into(),
        single: false,
    }
}

/// A waiting task of `role` asking for one whole GPU.
pub fn waiting(role: &str, i: usize) -> TaskInfo {
    let mut t = gpu_task(&key(), &format!("{role}-{i}"), 1);
    t.role = Some(role.into());
    t
}

/// The relations the annotations state among `roles` (which must be valid).
pub fn relations_among(
    roles: &[&str],
    affinity: &str,
    anti: &str,
    order: Option<&str>,
) -> RoleRelations {
    let annotations = TopologyAnnotations {
        affinity: Some(affinity.into()),
        anti_affinity: Some(anti.into()),
        task_order: order.map(str::to_owned),
    };
    let roles: BTreeSet<&str> = roles.iter().copied().collect();
    RoleRelations::of(&TaskTopology::read(&annotations, &roles).expect("valid"))
}
