//! Which accepted connections may start a TLS handshake.
//!
//! A connection takes one of `--max-connections` slots from its accept, before a
//! byte of TLS arrives. Raw TCP connections that never handshake would otherwise
//! fill every slot for the whole handshake deadline, each reopened as it is
//! closed, and kube-scheduler's and the API server's new connections would wait
//! in the listen backlog behind them. So:
//!
//! * one source address may have at most [`ServerLimits::max_handshakes_per_source`]
//!   connections between accept and a finished handshake; past that, new ones
//!   from it are closed at once and take no slot for longer than that;
//! * while fewer than a quarter of the slots are free, a new connection gets
//!   [`ServerLimits::handshake_timeout_under_pressure`] (1 s by default, plenty for
//!   a handshake on a cluster network) instead of the full handshake deadline.
//!
//! [`ServerLimits::max_handshakes_per_source`]: super::ServerLimits::max_handshakes_per_source
//! [`ServerLimits::handshake_timeout_under_pressure`]: super::ServerLimits::handshake_timeout_under_pressure

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::settings::ServerLimits;

/// Handshakes in progress per source address.
#[derive(Debug)]
pub(crate) struct HandshakeGate {
    per_source: usize,
    max_connections: usize,
    handshake_timeout: Duration,
    under_pressure: Duration,
    pending: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection admitted to its handshake: counts against its source until dropped.
#[derive(Debug)]
pub(crate) struct PendingHandshake {
    gate: Arc<HandshakeGate>,
    source: IpAddr,
    /// How long the handshake may take.
    pub(crate) timeout: Duration,
}

impl HandshakeGate {
    pub(crate) fn new(limits: &ServerLimits) -> Arc<Self> {
        Arc::new(Self {
            per_source: limits.max_handshakes_per_source.max(1),
            max_connections: limits.max_connections.max(1),
            handshake_timeout: limits.handshake_timeout,
            under_pressure: limits.handshake_timeout_under_pressure,
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// Admits a connection from `source` to its handshake, `free_slots` of the
    /// server's connection slots being free; `None` when its source has too many
    /// handshakes in progress already.
    pub(crate) fn admit(
        self: &Arc<Self>,
        source: IpAddr,
        free_slots: usize,
    ) -> Option<PendingHandshake> {
        // An IPv4 peer on a dual-stack socket is one source whichever way it shows.
        let source = source.to_canonical();
        {
            let mut pending = self.pending.lock();
            let count = pending.entry(source).or_default();
            if *count >= self.per_source {
                return None;
            }
            *count += 1;
        }
        let pressed = free_slots.saturating_mul(4) < self.max_connections;
        let shorter = !self.under_pressure.is_zero()
            && (self.handshake_timeout.is_zero() || self.under_pressure < self.handshake_timeout);
        let timeout = if pressed && shorter {
            self.under_pressure
        } else {
            self.handshake_timeout
        };
        Some(PendingHandshake {
            gate: Arc::clone(self),
            source,
            timeout,
        })
    }

    #[cfg(test)]
    fn pending_from(&self, source: IpAddr) -> usize {
        self.pending.lock().get(&source).copied().unwrap_or(0)
    }
}

impl Drop for PendingHandshake {
    fn drop(&mut self) {
        let mut pending = self.gate.pending.lock();
        if let Some(count) = pending.get_mut(&self.source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                pending.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> Arc<HandshakeGate> {
        HandshakeGate::new(&ServerLimits {
            max_connections: 16,
            max_handshakes_per_source: 2,
            ..ServerLimits::default()
        })
    }

    #[test]
    fn one_source_gets_its_share_and_no_more_until_one_finishes() {
        let gate = gate();
        let flood: IpAddr = "10.0.0.9".parse().expect("address");
        let first = gate.admit(flood, 16).expect("first");
        let _second = gate.admit(flood, 16).expect("second");
        assert!(gate.admit(flood, 16).is_none(), "a third waits for none");
        let other: IpAddr = "10.0.0.1".parse().expect("address");
        assert!(gate.admit(other, 16).is_some(), "another source is let in");
        drop(first);
        assert!(
            gate.admit(flood, 16).is_some(),
            "a finished one frees its place"
        );
    }

    #[test]
    fn an_ipv4_peer_counts_as_one_source_however_it_is_written() {
        let gate = gate();
        let v4: IpAddr = "10.0.0.9".parse().expect("address");
        let mapped: IpAddr = "::ffff:10.0.0.9".parse().expect("address");
        let _a = gate.admit(v4, 16).expect("first");
        let _b = gate.admit(mapped, 16).expect("second");
        assert!(gate.admit(v4, 16).is_none());
        assert_eq!(gate.pending_from(v4), 2);
    }

    #[test]
    fn near_the_connection_limit_the_handshake_deadline_is_short() {
        let gate = gate();
        let source: IpAddr = "10.0.0.9".parse().expect("address");
        let limits = ServerLimits::default();
        assert_eq!(
            gate.admit(source, 8).expect("admitted").timeout,
            limits.handshake_timeout
        );
        assert_eq!(
            gate.admit(source, 3).expect("admitted").timeout,
            limits.handshake_timeout_under_pressure
        );
    }
}
