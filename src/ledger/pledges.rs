//! Pipelined plans: a pod's GPUs promised on room that pods being evicted still
//! hold. The promise counts against the node at once (nobody else is placed
//! into the room being freed), and becomes a reservation when the last victim is
//! gone; it lapses at its deadline if they do not go.

use super::{Ledger, PodEntry, PodPhase};
use crate::usage::GpuUsage;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

/// A pipelined plan: a pod's GPUs promised on room that pods being evicted still
/// hold. Booked as a reservation once every one of them is gone.
#[derive(Debug, Clone)]
pub struct Pledge {
    /// The hold to book (phase `Reserved`).
    pub entry: PodEntry,
    /// The pods that must be gone first.
    pub victims: BTreeSet<String>,
    /// When the promise lapses if they are not.
    pub deadline: Instant,
    /// How long the booking waits for its bind once the victims are gone.
    pub hold_for: std::time::Duration,
}

impl Ledger {
    /// Promises `entry`'s GPUs to its pod once `victims` are gone. Refused when the
    /// node could not hold it even then (what others booked or were promised since
    /// the plan was made).
    pub fn pledge(
        &mut self,
        entry: PodEntry,
        victims: BTreeSet<String>,
        deadline: Instant,
        hold_for: std::time::Duration,
    ) -> Result<(), String> {
        self.unpledge(&entry.uid);
        self.check_pledge(&entry, &victims)?;
        self.insert_pledge(entry, victims, deadline, hold_for);
        Ok(())
    }

    /// Promises again what a pod's pipelined plan annotation says, as a restart
    /// reads it: not checked against the node (which may not even be listed yet),
    /// as placements read back from allocation annotations are not: the plan was
    /// checked when it was made, and its room was promised ever since.
    pub fn restore_pledge(
        &mut self,
        entry: PodEntry,
        victims: BTreeSet<String>,
        deadline: Instant,
        hold_for: std::time::Duration,
    ) {
        self.unpledge(&entry.uid);
        self.insert_pledge(entry, victims, deadline, hold_for);
    }

    /// Whether the node could hold `entry` once `victims` are gone.
    fn check_pledge(&self, entry: &PodEntry, victims: &BTreeSet<String>) -> Result<(), String> {
        let node = self
            .nodes
            .get(&entry.node)
            .ok_or_else(|| format!("node {} is gone", entry.node))?;
        if let Some(reason) = node.unusable() {
            return Err(reason.to_string());
        }
        // What the victims free on each GPU of the node.
        let mut freed: BTreeMap<Arc<str>, GpuUsage> = BTreeMap::new();
        for v in victims {
            if let Some(p) = self.pods.get(v.as_str()).filter(|p| p.node == entry.node) {
                for (uuid, u) in &p.usage {
                    freed.entry(uuid.clone()).or_default().add(u);
                }
            }
        }
        for (uuid, need) in &entry.usage {
            let Some(i) = node.device_position(uuid) else {
                return Err(format!("GPU {uuid} is not on node {}", entry.node));
            };
            let d = &node.devices[i];
            let mut after = node.effective[i];
            if let Some(f) = freed.get(uuid) {
                after.sub(f);
            }
            after.add(need);
            if after.used > d.count || after.usedmem > d.devmem || after.usedcores > d.devcore {
                return Err(format!(
                    "GPU {uuid} of node {} cannot hold it even once its victims are gone",
                    entry.node
                ));
            }
        }
        Ok(())
    }

    /// Records a plan and counts it against its node (if registered; a node
    /// registered later counts it then), booking it at once if no victim is left.
    fn insert_pledge(
        &mut self,
        entry: PodEntry,
        victims: BTreeSet<String>,
        deadline: Instant,
        hold_for: std::time::Duration,
    ) {
        let generation = self.next_generation();
        if let Some(n) = self.nodes.get_mut(&entry.node) {
            let n = Arc::make_mut(n);
            for (uuid, need) in &entry.usage {
                if let Some(i) = n.device_position(uuid) {
                    n.pledged[i].add(need);
                }
            }
            n.refresh();
            n.generation = generation;
            n.index_rank(&entry.node, &mut self.rank);
            self.nodes_journal.note(&entry.node);
        }
        let uid: Box<str> = entry.uid.as_str().into();
        self.holdings_journal.note(&uid);
        let gone: Vec<String> = victims
            .iter()
            .filter(|v| self.meta.get(v.as_str()).is_some_and(|m| m.finished))
            .cloned()
            .collect();
        self.pledges.insert(
            uid,
            Pledge {
                entry,
                victims,
                deadline,
                hold_for,
            },
        );
        for v in gone {
            self.victim_gone(&v);
        }
        self.book_ready_pledges();
    }

    /// Withdraws a pod's pipelined plan; returns it.
    pub fn unpledge(&mut self, uid: &str) -> Option<Pledge> {
        let pledge = self.pledges.remove(uid)?;
        self.holdings_journal.note(uid);
        let generation = self.next_generation();
        if let Some(n) = self.nodes.get_mut(&pledge.entry.node) {
            let n = Arc::make_mut(n);
            for (uuid, need) in &pledge.entry.usage {
                if let Some(i) = n.device_position(uuid) {
                    n.pledged[i].sub(need);
                }
            }
            n.refresh();
            n.generation = generation;
            n.index_rank(&pledge.entry.node, &mut self.rank);
            self.nodes_journal.note(&pledge.entry.node);
        }
        Some(pledge)
    }

    /// A victim is gone: plans that waited only for it are booked.
    pub(super) fn victim_gone(&mut self, uid: &str) {
        for p in self.pledges.values_mut() {
            p.victims.remove(uid);
        }
        self.book_ready_pledges();
    }

    /// Victims `alive` does not know any more (deleted while nobody watched, or
    /// finished) are gone.
    pub fn forget_vanished_victims(&mut self, alive: impl Fn(&str) -> bool) {
        let vanished: BTreeSet<String> = self
            .pledges
            .values()
            .flat_map(|p| p.victims.iter())
            .filter(|v| !alive(v))
            .cloned()
            .collect();
        for v in vanished {
            self.victim_gone(&v);
        }
    }

    /// Books every plan with no victim left.
    fn book_ready_pledges(&mut self) {
        let ready: Vec<Box<str>> = self
            .pledges
            .iter()
            .filter(|(_, p)| p.victims.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        for k in ready {
            if let Some(mut p) = self.unpledge(&k) {
                let node = p.entry.node.clone();
                let devices = p.entry.devices.clone();
                p.entry.phase = PodPhase::Reserved {
                    deadline: self.clock.now() + p.hold_for,
                };
                self.add_pod(p.entry);
                self.mark_local_held(&k, &node, &devices);
                self.converted.push(k.to_string());
            }
        }
    }

    /// The pipelined plans.
    pub fn pledges(&self) -> impl Iterator<Item = &Pledge> {
        self.pledges.values()
    }

    /// A pod's pipelined plan.
    pub fn pledge_of(&self, uid: &str) -> Option<&Pledge> {
        self.pledges.get(uid)
    }

    /// Plans booked since the last call (their victims are gone), to publish.
    pub fn take_converted(&mut self) -> Vec<String> {
        std::mem::take(&mut self.converted)
    }

    /// Whether plans were booked that are not published yet.
    pub fn has_converted(&self) -> bool {
        !self.converted.is_empty()
    }

    /// Plans whose victims did not leave in time.
    pub fn expired_pledges(&self, now: Instant) -> Vec<String> {
        self.pledges
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| k.to_string())
            .collect()
    }
}

#[cfg(test)]
#[path = "pledges_tests.rs"]
mod tests;
