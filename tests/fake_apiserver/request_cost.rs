//! What a request costs the fake, so that a load run can weigh each call as a
//! real control plane would (all off by default: every other test gets its
//! answers at once).
//!
//! Two parts, as on a real API server. The lane (`read_service`,
//! `write_service`) is the capacity every call shares: the API server's and
//! etcd's CPU and etcd's one commit stream, so each call holds it for its
//! service time after the calls before it, and a busy control plane answers
//! everything later. The latency (`read_latency`, `write_latency`) is what each
//! call waits for on its own (etcd's disk sync, the round trips between the
//! API server and etcd): calls in flight together overlap in it, so it bounds
//! a client that waits for one answer before its next call, not the rate of
//! many clients. A request is answered, and its change shown to watchers, once
//! it has had its turn in the lane and then its latency.

use std::time::{Duration, Instant};

/// Reads and writes, as the cost model tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// `get` and `list` (watches are not charged: opening one is rare, and
    /// the events they carry are paid for by the writes that cause them).
    Read,
    /// `create`, `update`, `patch`, `delete`.
    Write,
}

impl RequestKind {
    /// The kind of a request, `None` for one that costs nothing (a watch).
    pub fn of(method: &str, query: &str) -> Option<Self> {
        match method {
            "POST" | "PUT" | "PATCH" | "DELETE" => Some(Self::Write),
            _ if query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1") =>
            {
                None
            }
            _ => Some(Self::Read),
        }
    }
}

#[derive(Debug, Default)]
pub struct RequestCost {
    pub read_service: Duration,
    pub write_service: Duration,
    pub read_latency: Duration,
    pub write_latency: Duration,
    /// When the lane is next free.
    lane_free: Option<Instant>,
}

impl RequestCost {
    /// When a request of `kind` arriving `now` is answered; `None` when it
    /// costs nothing. Takes its turn in the lane.
    pub fn answer_at(&mut self, kind: RequestKind, now: Instant) -> Option<Instant> {
        let (service, latency) = match kind {
            RequestKind::Read => (self.read_service, self.read_latency),
            RequestKind::Write => (self.write_service, self.write_latency),
        };
        if service.is_zero() && latency.is_zero() {
            return None;
        }
        let served = if service.is_zero() {
            now
        } else {
            let start = self.lane_free.map_or(now, |free| free.max(now));
            let done = start + service;
            self.lane_free = Some(done);
            done
        };
        Some(served + latency)
    }
}
