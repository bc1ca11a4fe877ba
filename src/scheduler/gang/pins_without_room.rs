//! Pinned members whose node has no room for them. A full node frees up as its
//! pods finish, so a pinned member waits; but kube-scheduler keeps a pod whose
//! only allowed node is full Pending (Unschedulable) for as long as it stays
//! full, and the pin can never be lifted. Once a member has found no room on its
//! node for the gang timeout (how long any planned member may wait for its bind),
//! it is treated as a broken pin (`broken_pins`): evicted for its controller to
//! recreate, and planned again with its gang.

use foldhash::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Since when each pinned member has found no room on its node.
#[derive(Debug, Default)]
pub struct PinsWithoutRoom(HashMap<String, Instant>);

impl PinsWithoutRoom {
    /// Notes whether member `uid` has room on its node `now`; how long it has
    /// gone without, once that is at least `wait`.
    pub fn observe(
        &mut self,
        uid: &str,
        has_room: bool,
        now: Instant,
        wait: Duration,
    ) -> Option<Duration> {
        if has_room {
            self.0.remove(uid);
            return None;
        }
        let since = *self.0.entry(uid.to_string()).or_insert(now);
        let waited = now.saturating_duration_since(since);
        (waited >= wait).then_some(waited)
    }

    /// Forgets every member not in `pinned` (bound, gone, or no longer pinned).
    pub fn retain(&mut self, pinned: &HashSet<String>) {
        self.0.retain(|uid, _| pinned.contains(uid));
    }
}
