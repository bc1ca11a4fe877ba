//! Members the planning cycle watches after it plans, indexed as the planner's
//! copy of the book follows the book: members whose gang's plan carries a
//! deadline (the gang watchdog) and members released pinned to a node and not
//! bound yet (broken pins). Each check then visits those members and the ones
//! changed since, not every member: with thousands of pods running in queues,
//! a pass over all of them twice a cycle cost more than the cycle's decisions.

use super::book::Member;
use super::pin::waiting_pin;
use foldhash::HashSet;

/// The indexes, by pod UID.
#[derive(Debug, Default)]
pub struct WatchedMembers {
    with_deadline: HashSet<String>,
    waiting_pins: HashSet<String>,
}

impl WatchedMembers {
    /// Notes `m` as it is now (after [`WatchedMembers::forget`] of its UID).
    pub fn note(&mut self, m: &Member) {
        if !m.gang.single && m.plan_deadline.is_some() {
            self.with_deadline.insert(m.uid.clone());
        }
        if waiting_pin(m).is_some() {
            self.waiting_pins.insert(m.uid.clone());
        }
    }

    /// Forgets the member of pod `uid`.
    pub fn forget(&mut self, uid: &str) {
        self.with_deadline.remove(uid);
        self.waiting_pins.remove(uid);
    }

    /// Members of gangs with a PodGroup whose plan carries a deadline.
    pub fn with_deadline(&self) -> impl Iterator<Item = &String> {
        self.with_deadline.iter()
    }

    /// Members released pinned to their planned node, not bound yet.
    pub fn waiting_pins(&self) -> impl Iterator<Item = &String> {
        self.waiting_pins.iter()
    }
}
