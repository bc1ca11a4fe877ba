//! What the watches cost: every event sent to a watcher, counted per resource
//! with its bytes, as a real API server serializes and sends each change to
//! every watcher it matches. A write's cost to the control plane is mostly this
//! fan-out: a Node patch sends the whole Node, with HAMi's register
//! annotations, to every Node watcher. BOOKMARKs are not counted.

use std::collections::BTreeMap;

/// Events and bytes sent to watchers of one resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub events: u64,
    pub bytes: u64,
}

/// Watch events sent since the count was last cleared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchTraffic {
    /// Resource plural (`pods`, `nodes`, ...) -> what was sent.
    pub sent: BTreeMap<String, Sent>,
}

impl WatchTraffic {
    /// One event line of `bytes` sent to a watcher of `resource`.
    pub(super) fn add(&mut self, resource: &str, bytes: usize) {
        let sent = self.sent.entry(resource.to_string()).or_default();
        sent.events += 1;
        sent.bytes += bytes as u64;
    }

    /// What watchers of `resource` were sent.
    pub fn of(&self, resource: &str) -> Sent {
        self.sent.get(resource).copied().unwrap_or_default()
    }

    /// What every watcher was sent.
    pub fn total(&self) -> Sent {
        self.sent.values().fold(Sent::default(), |a, s| Sent {
            events: a.events + s.events,
            bytes: a.bytes + s.bytes,
        })
    }
}
