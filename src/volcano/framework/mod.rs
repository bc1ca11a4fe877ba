//! A Volcano-style scheduling framework: a session opened on a snapshot of the
//! cluster runs the configured actions; actions ask the configured plugins through
//! named extension points, tier by tier; every change goes through a statement that
//! commits or discards as a whole.
//!
//! - [`plugin::Plugin`]: the extension points, each optional.
//! - [`registry`]: building the configured tiers from a table of plugins by
//!   name (the table is `registry` in `volcano::plugins`).
//! - [`tiers::Tiers`]: how the plugins' answers combine.
//! - [`session::Session`] over a [`state::SessionState`]; [`statement::Statement`].
//! - [`action::Action`]: enqueue, allocate, backfill (in `volcano::actions`).
//!
//! Everything here is pure computation on the snapshot: no I/O, no locks, no
//! clock. The caller builds the state, runs the session and writes what it decided.

pub mod action;
pub mod allocate_hints;
pub mod arguments;
pub(crate) mod changed_nodes;
pub mod charge;
pub mod gang_eviction;
pub mod job;
pub mod job_figures;
pub mod job_map;
pub mod kept_per_job;
pub mod map_diff;
pub mod nodes;
pub mod outcome;
pub mod plain_choice;
pub mod plugin;
pub mod pod_affinity_view;
pub mod queue;
pub mod registry;
pub mod rejection;
pub mod releasing_minimum;
pub mod report;
pub mod score_order;
pub mod session;
pub mod session_memory;
pub mod shared_namespaces;
pub mod state;
pub mod statement;
pub mod tiers;
pub(crate) mod unsettled_jobs;
pub mod victims;

#[cfg(test)]
mod kept_figures_reuse_tests;
#[cfg(test)]
mod node_rooms_tests;
#[cfg(test)]
mod queue_policy_tests;
#[cfg(test)]
mod score_order_tests;
#[cfg(test)]
mod session_memory_tests;
#[cfg(test)]
mod statement_tests;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tiers_tests;

pub use action::Action;
pub use job::{GangKey, JobInfo, TaskInfo, TaskStatus};
pub use outcome::{EvictAction, GangPhase, GangVerdict, SessionOutcome, Verdicts};
pub use plugin::{Plugin, Vote};
pub use queue::QueueInfo;
pub use rejection::Rejection;
pub use report::QueueReport;
pub use session::Session;
pub use state::SessionState;
pub use statement::Statement;
pub use tiers::Tiers;
