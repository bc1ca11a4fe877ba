//! Volcano-compatible scheduling: Queue and PodGroup objects, the scheduler
//! configuration, the framework (sessions, statements, tiers of plugins), the
//! actions and the plugins, and the arithmetic of the queue plugins.
//!
//! Everything here is pure computation on values the caller provides: no I/O, no
//! async, no Kubernetes client, no clock. The watcher or the cluster file reads the
//! objects, the gang layer builds a session's state per cycle and runs it.

pub mod action_configurations;
pub mod actions;
pub mod capacity;
pub mod card_quota;
pub mod conf;
#[cfg(test)]
pub(crate) mod conf_fixture;
pub mod crd;
mod dim_amounts;
pub mod disruption_budget;
pub mod framework;
pub mod go_duration;
pub mod objects;
pub mod overcommit;
pub mod plugins;
pub mod proportion;
pub mod quota_usage;
pub mod refused_plugins;
pub mod resource_quota;
pub mod task_topology;
pub mod topology;
#[cfg(test)]
mod volcano_tables;
pub mod waiting_time;
#[cfg(test)]
mod water_fill_reference_tests;
/// Resource amounts (moved to the crate root; the old path stays).
pub use crate::resources;

pub use conf::SchedulerConf;
pub use framework::{QueueReport, Rejection};
pub use objects::{PodGroupSpec, QueueSpec, QueueState};
pub use resources::Resources;

/// Parses `volcano-scheduler.conf` and checks every plugin's arguments.
pub use plugins::registry::load as load_conf;
