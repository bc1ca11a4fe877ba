//! An action: one step of a scheduling cycle (enqueue, allocate, backfill, and the
//! eviction actions), run on a session in the order the configuration lists them.

use super::session::Session;
use std::fmt;

/// One configured action.
pub trait Action: fmt::Debug + Send + Sync {
    /// The action's name in the configuration.
    fn name(&self) -> &'static str;

    /// Runs the action on the session.
    fn execute(&self, session: &mut Session);
}
