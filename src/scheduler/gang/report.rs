//! Telling users what the planner decided: PodGroup and Queue status written as
//! Volcano writes it, and an event on each waiting member when its gang's reason
//! changes.

use super::PlannerMemory;
use crate::cluster::api::{EventType, VolcanoObject};
use crate::gang::book::GangKey;
use crate::gang::status::{QueueCounts, podgroup_status, podgroup_status_key, queue_status};
use crate::scheduler::Scheduler;
use crate::volcano::framework::{GangPhase, GangVerdict, SessionOutcome};
use std::collections::{BTreeMap, HashSet};

impl Scheduler {
    /// Tells the gated members of a waiting gang why, as a pod event (what
    /// `kubectl describe pod` shows), once per change of the reason.
    pub(super) async fn tell_waiting_members(
        &self,
        memory: &mut PlannerMemory,
        verdicts: &BTreeMap<GangKey, GangVerdict>,
    ) {
        memory.told.retain(|k, _| {
            verdicts
                .get(k)
                .is_some_and(|v| v.message.is_some() && v.phase != GangPhase::Running)
        });
        let mut tell: Vec<(String, String, String, String)> = Vec::new();
        {
            let book = self.gang.book.read();
            for (key, v) in verdicts {
                let Some(message) = &v.message else { continue };
                if v.phase == GangPhase::Running || memory.told.get(key) == Some(message) {
                    continue;
                }
                memory.told.insert(key.clone(), message.clone());
                let text = format!("gang {key} waits: {message}");
                for m in book
                    .members()
                    .values()
                    .filter(|m| &m.gang == key && m.gated)
                {
                    tell.push((
                        m.namespace.clone(),
                        m.name.clone(),
                        m.uid.clone(),
                        text.clone(),
                    ));
                }
            }
        }
        for (ns, name, uid, text) in tell {
            self.event((&ns, &name, &uid), EventType::Warning, "GangWaiting", text)
                .await;
        }
    }

    /// Writes the status of every Volcano PodGroup and Queue whose status
    /// changed. A PodGroup whose verdict is the one its status was last written
    /// from is not looked at again: with thousands of gangs waiting unchanged,
    /// building each status to compare it cost more than the session.
    pub(super) async fn write_statuses(
        &self,
        memory: &mut PlannerMemory,
        outcome: &SessionOutcome,
    ) {
        let now = self
            .clock
            .wall()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        // Each object with its status, or `None` when it is as last written.
        let mut writes: Vec<(VolcanoObject, Option<(GangKey, serde_json::Value)>)> = Vec::new();
        let mut queue_writes: Vec<(VolcanoObject, serde_json::Value)> = Vec::new();
        let mut counts: BTreeMap<&str, QueueCounts> = BTreeMap::new();
        {
            let book = self.gang.book.read();
            for (key, v) in &outcome.verdicts {
                counts.entry(v.queue.as_str()).or_default().add(v.phase);
                // kube-scheduler writes the status of Kubernetes' own PodGroups.
                let group = book
                    .groups()
                    .get(&(key.namespace.clone(), key.name.clone()));
                if key.single || group.is_none_or(|g| g.native.is_some()) {
                    continue;
                }
                let object = VolcanoObject::PodGroup {
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                };
                let unchanged = memory.written_verdicts.get(key) == Some(v)
                    && memory.written.contains_key(&object);
                let status = (!unchanged).then(|| (key.clone(), podgroup_status(v, &now)));
                writes.push((object, status));
            }
            for report in &outcome.queues {
                if !book.queues.contains_key(&report.name) {
                    continue;
                }
                let c = counts
                    .get(report.name.as_str())
                    .copied()
                    .unwrap_or_default();
                queue_writes.push((
                    VolcanoObject::Queue {
                        name: report.name.clone(),
                    },
                    queue_status(report, &c),
                ));
            }
        }
        // Forget what was written for objects that are gone.
        let current: HashSet<&VolcanoObject> = writes
            .iter()
            .map(|(o, _)| o)
            .chain(queue_writes.iter().map(|(o, _)| o))
            .collect();
        memory.written.retain(|o, _| current.contains(o));
        memory
            .written_verdicts
            .retain(|k, _| outcome.verdicts.contains_key(k));
        let changed = writes
            .into_iter()
            .filter_map(|(object, status)| Some((object, status?)))
            .map(|(object, (gang, status))| (object, Some(gang), status));
        let queues = queue_writes
            .into_iter()
            .map(|(object, status)| (object, None, status));
        for (object, gang, status) in changed.chain(queues).collect::<Vec<_>>() {
            let key = podgroup_status_key(&status);
            let written = memory.written.get(&object) == Some(&key)
                || match self.api.patch_volcano_status(&object, &status).await {
                    Ok(()) => {
                        memory.written.insert(object, key);
                        true
                    }
                    // Retried next cycle; a PodGroup deleted meanwhile is forgotten then.
                    Err(e) => {
                        tracing::warn!(object = %object, error = %e, "could not write status");
                        false
                    }
                };
            if let Some(gang) = gang.filter(|_| written)
                && let Some(v) = outcome.verdicts.get(&gang)
            {
                memory.written_verdicts.insert(gang, v.clone());
            }
        }
    }
}
