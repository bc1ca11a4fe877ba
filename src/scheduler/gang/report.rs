//! Telling users what the planner decided: PodGroup and Queue status written as
//! Volcano writes it, and an event on each waiting member when its gang's reason
//! changes.

use super::PlannerMemory;
use crate::cluster::api::{EventType, VolcanoObject};
use crate::gang::book::{GangBook, GangKey};
use crate::gang::status::{QueueCounts, podgroup_status, podgroup_status_key, queue_status};
use crate::resources::Resources;
use crate::scheduler::Scheduler;
use crate::volcano::framework::map_diff::verdict_changes;
use crate::volcano::framework::{GangPhase, SessionOutcome, Verdicts};
use crate::volcano::objects::PodGroupSpec;
use std::collections::{BTreeMap, BTreeSet};

impl Scheduler {
    /// Tells the gated members of a waiting gang why, as a pod event (what
    /// `kubectl describe pod` shows), once per change of the reason. Only the
    /// gangs whose verdict changed since the last cycle are looked at: with
    /// thousands of gangs waiting for the same reason cycle after cycle,
    /// looking at each one cost more than telling the few that changed.
    pub(super) async fn tell_waiting_members(
        &self,
        memory: &mut PlannerMemory,
        verdicts: &Verdicts,
    ) {
        let mut tell: Vec<(String, String, String, String)> = Vec::new();
        let (changed, forgotten) = changed_reasons(&memory.told, &memory.told_from, verdicts);
        memory.told_from = verdicts.clone();
        {
            let book = self.gang.book.read();
            let copy = memory.book.lock();
            for (key, message) in &changed {
                let text = format!("gang {key} waits: {message}");
                for m in copy.live_members_of(&book, key).filter(|m| m.gated) {
                    tell.push((
                        m.namespace.clone(),
                        m.name.clone(),
                        m.uid.clone(),
                        text.clone(),
                    ));
                }
            }
        }
        for key in forgotten {
            memory.told.remove(&key);
        }
        memory.told.extend(changed);
        for (ns, name, uid, text) in tell {
            self.event((&ns, &name, &uid), EventType::Warning, "GangWaiting", text)
                .await;
        }
    }

    /// Writes the status of every Volcano PodGroup and Queue whose status
    /// changed (`counts`: the PodGroups of each queue by phase). Only the gangs
    /// whose verdict changed since the last cycle, and those still owed a
    /// status (a refused write, a PodGroup not known yet), are looked at: with
    /// thousands of gangs waiting or running unchanged, even passing over each
    /// verdict once a cycle cost more than the statuses written.
    pub(super) async fn write_statuses(
        &self,
        memory: &mut PlannerMemory,
        outcome: &SessionOutcome,
        counts: &BTreeMap<String, QueueCounts>,
    ) {
        let now = self
            .clock
            .wall()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        // A PodGroup made again has no status, whatever was written to the one
        // before it: owed anew (a deleted one not made again is forgotten once
        // its verdict goes, or waits for its PodGroup as any gang does).
        for (namespace, name) in self.gang.book.write().take_replaced_groups() {
            let key = GangKey {
                namespace: namespace.into(),
                name: name.into(),
                single: false,
            };
            memory.written_groups.remove(&key);
            memory.statuses_owed.insert(key);
        }
        // The PodGroups whose verdict changed, with their status.
        let mut writes: Vec<(GangKey, serde_json::Value)> = Vec::new();
        let mut queue_writes: Vec<(String, (Resources, QueueCounts))> = Vec::new();
        {
            let book = self.gang.book.read();
            let mut group = GroupLookup::default();
            let owed = std::mem::take(&mut memory.statuses_owed);
            let from = std::mem::replace(&mut memory.statuses_from, outcome.verdicts.clone());
            let (changed, gone) = statuses_to_look_at(&from, &outcome.verdicts);
            for key in gone {
                memory.written_groups.remove(&key);
            }
            let look_at: BTreeSet<&GangKey> = changed.iter().chain(&owed).collect();
            for key in look_at {
                let Some(v) = outcome.verdicts.get(key) else {
                    memory.written_groups.remove(key);
                    continue;
                };
                // kube-scheduler writes the status of Kubernetes' own PodGroups.
                let volcano = match (key.single, group.get(&book, key)) {
                    (true, _) => false,
                    (false, Some(g)) => g.native.is_none(),
                    (false, None) => {
                        // Its PodGroup may arrive while the verdict stays.
                        memory.statuses_owed.insert(key.clone());
                        false
                    }
                };
                if !volcano {
                    memory.written_groups.remove(key);
                    continue;
                }
                let written = memory.written_groups.get(key);
                if written.is_none_or(|(verdict, _)| verdict != v) {
                    writes.push((key.clone(), podgroup_status(v, &now)));
                }
            }
            for report in &outcome.queues {
                if !book.queues.contains_key(&report.name) {
                    continue;
                }
                let c = counts
                    .get(report.name.as_str())
                    .copied()
                    .unwrap_or_default();
                queue_writes.push((report.name.clone(), (report.allocated.clone(), c)));
            }
        }
        // Forget what was written for queues that are gone.
        memory
            .written_queues
            .retain(|name, _| queue_writes.iter().any(|(q, _)| q == name));
        for (gang, status) in writes {
            let key = podgroup_status_key(&status);
            let written = memory
                .written_groups
                .get(&gang)
                .is_some_and(|(_, last)| *last == key);
            let object = VolcanoObject::PodGroup {
                namespace: gang.namespace.to_string(),
                name: gang.name.to_string(),
            };
            let written = written || self.patch_status(&object, &status).await;
            match outcome.verdicts.get(&gang) {
                Some(v) if written => {
                    memory.written_groups.insert(gang, (v.clone(), key));
                }
                Some(_) => {
                    memory.statuses_owed.insert(gang);
                }
                None => {}
            }
        }
        for (name, said) in queue_writes {
            if memory.written_queues.get(&name) == Some(&said) {
                continue;
            }
            let object = VolcanoObject::Queue { name: name.clone() };
            if self
                .patch_status(&object, &queue_status(&said.0, &said.1))
                .await
            {
                memory.written_queues.insert(name, said);
            }
        }
    }

    /// Writes one object's status; false when it could not be written (it is
    /// tried again next cycle; a PodGroup deleted meanwhile is forgotten then).
    async fn patch_status(&self, object: &VolcanoObject, status: &serde_json::Value) -> bool {
        match self.api.patch_volcano_status(object, status).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(object = %object, error = %e, "could not write status");
                false
            }
        }
    }
}

/// The gangs that wait for a reason their members were not told yet, with
/// it, and the gangs told before that no longer wait (placed, or gone). Only
/// the gangs whose verdict differs from the one `told` was last brought up to
/// (`told_from`) are looked at: every other gang's members were told already
/// what its verdict says.
fn changed_reasons(
    told: &BTreeMap<GangKey, String>,
    told_from: &Verdicts,
    verdicts: &Verdicts,
) -> (Vec<(GangKey, String)>, Vec<GangKey>) {
    let mut changed = Vec::new();
    let mut forgotten = Vec::new();
    for (key, _, now) in verdict_changes(told_from, verdicts).iter() {
        let waits = now
            .as_ref()
            .filter(|v| v.phase != GangPhase::Running)
            .and_then(|v| v.message.as_ref());
        match (waits, told.get(key)) {
            (Some(message), Some(last)) if message == last => {}
            (Some(message), _) => changed.push((key.clone(), message.clone())),
            (None, Some(_)) => forgotten.push(key.clone()),
            (None, None) => {}
        }
    }
    (changed, forgotten)
}

/// The gangs whose verdict differs from the one the statuses were last brought
/// up to (`from`), and the gangs that have no verdict any more.
fn statuses_to_look_at(from: &Verdicts, verdicts: &Verdicts) -> (Vec<GangKey>, Vec<GangKey>) {
    let mut changed = Vec::new();
    let mut gone = Vec::new();
    for (key, _, now) in verdict_changes(from, verdicts).iter() {
        match now {
            Some(_) => changed.push(key.clone()),
            None => gone.push(key.clone()),
        }
    }
    (changed, gone)
}

/// Looks PodGroups up by gang without allocating a key for each: the book
/// keys them by owned (namespace, name), so one key is kept and refilled.
#[derive(Default)]
struct GroupLookup {
    key: (String, String),
}

impl GroupLookup {
    fn get<'b>(&mut self, book: &'b GangBook, gang: &GangKey) -> Option<&'b PodGroupSpec> {
        self.key.0.clear();
        self.key.0.push_str(&gang.namespace);
        self.key.1.clear();
        self.key.1.push_str(&gang.name);
        book.groups().get(&self.key)
    }
}

#[cfg(test)]
#[path = "told_reasons_tests.rs"]
mod told_reasons_tests;
