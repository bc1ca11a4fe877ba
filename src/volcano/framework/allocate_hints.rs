//! What allocate may leave untried, and what it could not place: the session's
//! side of queueing hints (see `gang::queueing_hints`). The planner hands the
//! session the jobs that are still blocked for the reason they waited before;
//! allocate notes them with that reason instead of trying them again, and tells
//! the planner which jobs it tried and could not place, so they can be skipped
//! next time. Nothing else in the session knows of either.

use super::job::GangKey;
use std::collections::BTreeMap;

/// Jobs allocate skips, and jobs it could not place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocateHints {
    /// Jobs that cannot be placed now, with why (the message they waited with).
    pub skip: BTreeMap<GangKey, String>,
    /// Jobs allocate tried and could not place in this session, with why.
    pub unplaced: BTreeMap<GangKey, String>,
}
