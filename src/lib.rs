//! vgpu-scheduler: a kube-scheduler HTTP extender and mutating admission webhook that
//! places shared-GPU (vGPU) pods on nodes and on specific GPUs, wire-compatible with
//! HAMi's device plugin and annotations.

pub mod annotations;
pub mod app;
pub mod background;
pub mod body_budget;
pub mod body_pace;
pub mod certs;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod device;
pub mod extender;
pub mod fit;
pub mod freshness;
pub mod gang;
pub mod ledger;
pub mod log_fields;
pub mod log_json_escape;
pub mod log_writer;
pub mod metadata_copy;
pub mod metrics;
pub mod node_load;
pub mod node_lock;
pub mod node_metrics;
pub mod object_namespace;
pub mod placement;
pub mod policy;
pub mod quantity;
pub mod queues_cli;
pub mod rank_index;
pub mod refusal;
pub mod resources;
#[cfg(test)]
mod resources_model_tests;
pub mod run;
pub mod scheduler;
pub mod server;
pub mod simulate;
pub mod trace;
pub mod usage;
pub mod volcano;
pub mod webhook;
