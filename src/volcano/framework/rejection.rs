//! Why a queue refuses a job or a task: one typed value, built by the plugin that
//! refused and rendered in one place.

use crate::volcano::resources::{Excess, format_amount};
use serde::Serialize;
use std::fmt;

/// The `plugin` of a rejection for a queue that does not exist.
pub const UNKNOWN_QUEUE: &str = "queue";

/// Why a queue refuses a job or a task. The dimension says what to fix: a resource
/// name, `card/<name>`, `state`, `hierarchy`, or `queue` for a queue that does not
/// exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// The plugin that refused (`proportion`, `capacity`, `overcommit`,
    /// `capacity-card`, ...), the action for a queue that is not Open when no quota
    /// plugin runs, or `queue` for an unknown queue.
    pub plugin: &'static str,
    /// The queue asked about.
    pub queue: String,
    /// What is exceeded or wrong.
    pub dimension: String,
    /// Human-readable detail, e.g. `nvidia.com/gpu would be 10 > capability 8`.
    pub message: String,
}

impl Rejection {
    /// A queue that does not exist.
    pub fn unknown_queue(queue: &str) -> Self {
        Self {
            plugin: UNKNOWN_QUEUE,
            queue: queue.to_owned(),
            dimension: "queue".to_owned(),
            message: format!("queue {queue:?} does not exist"),
        }
    }

    /// An amount over a limit: `<dim> would be <amount> > <label> <limit><suffix>`,
    /// where the suffix names an ancestor queue whose limit it is.
    /// Refuses for a queue that is not Open: a Closed or Closing queue takes
    /// nothing new, neither by allocation nor by reclaiming from others (Volcano's
    /// proportion and capacity check the state in both).
    pub fn unless_open(plugin: &'static str, q: &super::queue::QueueInfo) -> Result<(), Self> {
        if q.spec.state == crate::volcano::objects::QueueState::Open {
            return Ok(());
        }
        Err(Self {
            plugin,
            queue: q.name().to_owned(),
            dimension: "state".to_owned(),
            message: format!("state is {}, not Open", q.spec.state.as_str()),
        })
    }

    pub fn exceeded(
        plugin: &'static str,
        queue: &str,
        x: Excess,
        label: &str,
        ancestor: Option<&str>,
    ) -> Self {
        Self {
            plugin,
            queue: queue.to_owned(),
            message: format!(
                "{} would be {} > {label} {}{}",
                x.dimension,
                format_amount(&x.dimension, x.amount),
                format_amount(&x.dimension, x.limit),
                of_ancestor(ancestor)
            ),
            dimension: x.dimension,
        }
    }
}

/// ` of ancestor queue "<name>"`, or nothing for the queue itself.
pub fn of_ancestor(ancestor: Option<&str>) -> String {
    match ancestor {
        Some(name) => format!(" of ancestor queue {name:?}"),
        None => String::new(),
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.plugin == UNKNOWN_QUEUE {
            return f.write_str(&self.message);
        }
        write!(
            f,
            "queue {:?}: {} ({})",
            self.queue, self.message, self.plugin
        )
    }
}

impl std::error::Error for Rejection {}
