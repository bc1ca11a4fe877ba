//! Volcano-compatible queue policy: Queue and PodGroup objects, the scheduler
//! configuration, and the queue plugins (proportion, capacity, capacity-card,
//! overcommit) behind one façade, [`session::QueueSession`].
//!
//! Everything here is pure computation on values the caller provides: no I/O, no
//! async, no Kubernetes client. The watcher or the cluster file reads the objects,
//! the planner builds a session per pass and asks it.

pub mod capacity;
pub mod card_quota;
pub mod conf;
pub mod objects;
pub mod overcommit;
pub mod proportion;
pub mod resources;
pub mod session;

pub use conf::SchedulerConf;
pub use objects::{PodGroupSpec, QueueSpec, QueueState};
pub use resources::Resources;
pub use session::{QueueInput, QueueReport, QueueSession, Rejection};
