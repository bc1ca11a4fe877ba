//! What changed in the gang book since the planner last copied it. A planning
//! cycle with thousands of gangs waiting costs what changed only if the book
//! says what changed: every way a member or PodGroup enters, changes or leaves
//! the book goes through [`super::book::GangBook`]'s methods, which note it
//! here, and the planner takes the notes when it copies the book.

use foldhash::HashSet;

/// Members (by pod UID) and PodGroups (by namespace and name) added, changed or
/// removed since the notes were last taken.
#[derive(Debug, Clone, Default)]
pub struct BookChanges {
    /// Pod UIDs of members added, changed in place or removed.
    pub members: HashSet<String>,
    /// PodGroups (Volcano's or Kubernetes' own) added, changed or removed.
    pub groups: HashSet<(String, String)>,
}

impl BookChanges {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.groups.is_empty()
    }
}
