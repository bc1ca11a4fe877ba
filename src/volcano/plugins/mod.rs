//! Volcano's plugins, one file each. Each exposes `build`, the constructor the
//! framework calls with the plugin's configuration entry; [`registry`] lists them
//! by name.

pub mod binpack;
pub mod capacity;
pub mod capacity_card;
mod capacity_reclaim;
pub mod cdp;
pub mod conformance;
pub mod drf;
mod drf_hierarchy;
pub mod gang;
mod kept_water_fill;
pub mod network_topology_aware;
mod node_resource;
pub mod nodegroup;
#[cfg(test)]
mod nodegroup_session_tests;
pub mod nodeorder;
pub mod overcommit;
pub mod pdb;
mod pod_charge;
pub mod predicates;
pub mod priority;
pub mod proportion;
mod queue_tree;
pub mod registry;
pub mod resource_strategy_fit;
pub mod resourcequota;
pub mod sla;
pub mod task_topology;
pub mod usage;
