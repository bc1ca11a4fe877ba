//! Gang and queue scheduling, Volcano style, around an extender that sees one pod
//! at a time: the webhook gates gang and queue pods at creation, a planner places
//! whole gangs against queue shares and quotas, writes each member's GPUs onto the
//! pod and lifts the gates of all members together; `/filter` then honours the
//! plan and `/bind` can hold strict gangs until enough members arrive.
//!
//! This layer holds what the planner knows (the book), turns it into a session's
//! state (`snapshot`), runs the session (`plan`) and renders what it decided
//! (`status`, `view`). The scheduler writes the decisions.

pub mod affine_pods;
pub mod barrier;
pub mod book;
pub mod book_changes;
pub mod cycle_stages;
pub mod eviction_view;
pub mod filter_only;
pub mod gang_verdicts;
pub mod hint_world;
pub mod job_cache;
pub mod kept_holdings;
pub mod kept_nodes;
pub mod kept_state;
#[cfg(test)]
mod member_kept_pod_tests;
pub mod memberless_group;
pub mod membership;
pub mod native_group;
pub mod native_sources;
pub mod never_ready_jobs;
pub mod node_sums;
pub mod pin;
pub mod pipelined_plan;
pub mod plan;
pub mod planner_book;
pub mod priority_classes;
pub mod queue_metrics;
pub mod queue_totals;
pub mod queueing_hints;
pub mod registered_gpus;
pub mod room_sensitive_jobs;
pub mod scheduling_group;
pub mod snapshot;
mod spec_group_tap;
pub mod status;
pub mod task_cache;
pub mod victim_facts;
pub mod view;
pub mod watched_members;
pub mod workload_template;

pub use view::GangView;

/// Pod annotation: when the planner's reservation for the pod ends (Unix seconds).
/// It survives restarts, so a rebuilt ledger keeps the reservation exactly as long.
pub const PLAN_DEADLINE: &str = "vgpu-scheduler.io/gang-plan-deadline";

/// Pod annotation on a gang or queue pod that asks for no vGPU: the node the
/// planner chose for it. Written before its gate is lifted (with the pin, see
/// [`pin`]), so the plan survives a restart and the next cycles count the pod on
/// that node until it is bound there.
pub const PLANNED_NODE: &str = "vgpu-scheduler.io/planned-node";

/// PodGroup annotation: `"true"` holds every member at `/bind` until minMember
/// members arrived there (all-or-nothing start), `"false"` opts out of the flag.
pub const STRICT: &str = "vgpu-scheduler.io/gang-strict";
