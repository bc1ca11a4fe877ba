//! The strict-mode bind barrier: `/bind` of a strict gang's member waits until
//! minMember members reached `/bind` (or are already bound), then all proceed; at
//! the deadline every waiter fails and its GPUs are released, so kube-scheduler
//! retries the whole gang instead of starting part of it.

use super::book::GangKey;
use foldhash::HashMap;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Default)]
struct Gate {
    /// Members at the barrier, with how many of their binds are there (a bind
    /// request repeated by kube-scheduler waits next to the first one).
    arrived: Mutex<BTreeMap<String, usize>>,
    open: std::sync::atomic::AtomicBool,
    changed: Notify,
}

/// Barriers of all strict gangs.
#[derive(Default)]
pub struct Barriers {
    gates: Mutex<HashMap<GangKey, Arc<Gate>>>,
}

/// A waiter that gave up: how many members had arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut {
    /// Members at the barrier (this one included) plus those already bound.
    pub arrived: usize,
}

/// A member's place at the barrier. Dropped when its bind ends for any reason
/// (passed and bound or failed, deadline, cancelled request), so a member that
/// left is not counted toward the quorum. When the last one leaves, the barrier
/// closes again: a gang whose pods are made anew (a restarted job) waits for its
/// quorum again instead of passing through a barrier opened for its predecessors.
pub struct Passage {
    gate: Arc<Gate>,
    uid: String,
}

impl Drop for Passage {
    fn drop(&mut self) {
        let mut arrived = self.gate.arrived.lock();
        if let Some(n) = arrived.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                arrived.remove(&self.uid);
            }
        }
        if arrived.is_empty() {
            self.gate
                .open
                .store(false, std::sync::atomic::Ordering::Release);
        }
    }
}

impl Barriers {
    fn gate(&self, gang: &GangKey) -> Arc<Gate> {
        self.gates.lock().entry(gang.clone()).or_default().clone()
    }

    /// Waits until `need` members of `gang` are bound (`already`) or waiting here,
    /// or until `deadline`. The member keeps its place (counted toward the quorum)
    /// until the returned [`Passage`] is dropped, which the caller does when the
    /// bind has ended.
    pub async fn wait(
        &self,
        gang: &GangKey,
        uid: &str,
        need: usize,
        already: impl Fn() -> usize,
        deadline: Duration,
    ) -> Result<Passage, TimedOut> {
        use std::sync::atomic::Ordering;
        let gate = self.gate(gang);
        *gate.arrived.lock().entry(uid.to_string()).or_default() += 1;
        let passage = Passage {
            gate: gate.clone(),
            uid: uid.to_string(),
        };
        let until = tokio::time::Instant::now() + deadline;
        let mut told = false;
        loop {
            let notified = gate.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let arrived = gate.arrived.lock().len() + already();
            if gate.open.load(Ordering::Acquire) || arrived >= need {
                gate.open.store(true, Ordering::Release);
                gate.changed.notify_waiters();
                return Ok(passage);
            }
            if !told {
                // Said once per bind: a bind that seems to hang is held here.
                tracing::info!(
                    gang = %gang,
                    pod_uid = uid,
                    arrived,
                    need,
                    "bind waits at its gang's barrier for the quorum"
                );
                told = true;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                let arrived = gate.arrived.lock().len() + already();
                drop(passage);
                return Err(TimedOut { arrived });
            }
        }
    }

    /// Wakes the waiters of a gang to count again (a member was bound elsewhere).
    pub fn nudge(&self, gang: &GangKey) {
        if let Some(g) = self.gates.lock().get(gang) {
            g.changed.notify_waiters();
        }
    }

    /// Forgets gangs that no longer need a barrier (running, finished or gone).
    pub fn retain(&self, keep: impl Fn(&GangKey) -> bool) {
        self.gates
            .lock()
            .retain(|k, g| keep(k) || !g.arrived.lock().is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> GangKey {
        GangKey {
            namespace: "ns".into(),
            name: "pg".into(),
            single: false,
        }
    }

    // Paused time: the clock moves only once every task waits, so after a sleep
    // the waiters have gone as far as they can.
    #[tokio::test(start_paused = true)]
    async fn nobody_passes_before_the_quorum_then_everybody_does() {
        let b = Arc::new(Barriers::default());
        let mut waiters = Vec::new();
        for i in 0..3 {
            let b = b.clone();
            waiters.push(tokio::spawn(async move {
                b.wait(&key(), &format!("u{i}"), 4, || 0, Duration::from_secs(5))
                    .await
            }));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(waiters.iter().all(|w| !w.is_finished()));
        b.wait(&key(), "u3", 4, || 0, Duration::from_secs(5))
            .await
            .unwrap();
        for w in waiters {
            assert!(w.await.unwrap().is_ok());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_fails_every_waiter_and_forgets_them() {
        let b = Arc::new(Barriers::default());
        let first = {
            let b = b.clone();
            tokio::spawn(async move {
                b.wait(&key(), "u0", 3, || 0, Duration::from_millis(300))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = b
            .wait(&key(), "u1", 3, || 0, Duration::from_millis(100))
            .await;
        assert_eq!(second.err(), Some(TimedOut { arrived: 2 }));
        assert!(first.await.unwrap().is_err());
        // Both left: a new arrival counts alone.
        let third = b
            .wait(&key(), "u2", 3, || 1, Duration::from_millis(30))
            .await;
        assert_eq!(third.err(), Some(TimedOut { arrived: 2 }));
    }

    #[tokio::test(start_paused = true)]
    async fn members_already_bound_count_toward_the_quorum() {
        let b = Barriers::default();
        assert!(
            b.wait(&key(), "u0", 3, || 2, Duration::from_millis(10))
                .await
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn once_everybody_has_left_the_barrier_waits_for_a_quorum_again() {
        let b = Barriers::default();
        let first = b
            .wait(&key(), "u0", 1, || 0, Duration::from_millis(10))
            .await
            .unwrap();
        // Still binding: a late sibling passes with it.
        assert!(
            b.wait(&key(), "u1", 2, || 0, Duration::from_millis(10))
                .await
                .is_ok()
        );
        drop(first);
        // Both binds ended (their pods are gone): a newcomer counts alone.
        assert_eq!(
            b.wait(&key(), "u2", 2, || 0, Duration::from_millis(10))
                .await
                .err(),
            Some(TimedOut { arrived: 1 })
        );
    }
}
