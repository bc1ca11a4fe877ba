//! Volcano-compatible queue policy: Queue and PodGroup objects, the scheduler
//! configuration, and the queue plugins (proportion, capacity, capacity-card,
//! overcommit).
//!
//! Everything here is pure computation on values the caller provides: no I/O, no
//! async, no Kubernetes client.

pub mod capacity;
pub mod card_quota;
pub mod conf;
pub mod objects;
pub mod overcommit;
pub mod proportion;
pub mod resources;
