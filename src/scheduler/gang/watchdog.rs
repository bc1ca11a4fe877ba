//! The gang watchdog: a gang whose plan ran out with some members started and
//! fewer than its minimum able to start is released, its started members evicted,
//! so no half-started gang holds GPUs (Kueue's waitForPodsReady, KAI's stale gang
//! eviction).

use crate::gang::book::{GangKey, Member, MemberPhase};
use crate::gang::planner_book::PlannerBook;
use crate::scheduler::Scheduler;
use crate::volcano::plugins::conformance;
use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// Namespace, name and UID of a pod.
type PodRef = (String, String, String);

/// Volcano's conformance rule: critical pods and kube-system pods are never
/// evicted by the scheduler.
fn conformant_victim(m: &Member) -> bool {
    let class = m
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    conformance::may_evict(&m.namespace, class)
}

impl Scheduler {
    /// A gang whose plan ran out with some members started and fewer than its
    /// minimum able to start is released: its started members are evicted, so no
    /// half-started gang holds GPUs (Kueue's waitForPodsReady, KAI's stale gang
    /// eviction).
    pub(super) async fn gang_watchdog(&self, copy: &Mutex<PlannerBook>) {
        let now = self.clock.wall().timestamp();
        // The window to act in: a cycle runs every second or so, but a busy API
        // server or a restart may delay one; a minute is enough to catch a start
        // that failed and short enough not to mistake a later loss for one.
        let window = self.config.gang.timeout.as_secs().max(60) as i64;
        let victims: Vec<(GangKey, Vec<PodRef>)> = {
            let book = self.gang.book.read();
            let ledger = self.ledger.read();
            // Only right after the plan ran out: a gang that started long ago and
            // later lost a member is the job controller's business, not a start
            // that failed (Volcano evicts nothing there either). Gangs never
            // planned, or whose plan ran out long ago, are not looked at further:
            // with thousands waiting, they are nearly all.
            // Only members whose plan carries a deadline are looked at: those
            // the planner's copy of the book knows, and those changed since.
            let copy = copy.lock();
            let mut deadlines: HashMap<&GangKey, i64> = HashMap::new();
            let carrying = copy
                .watched()
                .with_deadline()
                .chain(&book.pending_changes().members)
                .filter_map(|uid| book.members().get(uid));
            for m in carrying.filter(|m| !m.gang.single) {
                if let Some(d) = m.plan_deadline {
                    let latest = deadlines.entry(&m.gang).or_insert(d);
                    *latest = (*latest).max(d);
                }
            }
            let due = deadlines
                .into_iter()
                .filter(|(_, deadline)| *deadline <= now && now <= deadline + window)
                .map(|(key, _)| key);
            let by_gang: BTreeMap<&GangKey, Vec<&Member>> = due
                .map(|key| (key, copy.live_members_of(&book, key).collect()))
                .collect();
            by_gang
                .into_iter()
                .filter_map(|(key, members)| {
                    let min = book
                        .groups()
                        .get(&key.owned_names())
                        .map(|g| g.min_member.max(0) as usize)?;
                    let started = members
                        .iter()
                        .filter(|m| matches!(m.phase, MemberPhase::Placed | MemberPhase::Succeeded))
                        .count();
                    let still_coming = members
                        .iter()
                        .any(|m| m.phase == MemberPhase::Pending && ledger.pod(&m.uid).is_some());
                    let placed: Vec<PodRef> = members
                        .iter()
                        .filter(|m| m.phase == MemberPhase::Placed)
                        .filter(|m| conformant_victim(m))
                        .map(|m| (m.namespace.clone(), m.name.clone(), m.uid.clone()))
                        .collect();
                    (started < min && !still_coming && !placed.is_empty())
                        .then(|| (key.clone(), placed))
                })
                .collect()
        };
        for (gang, pods) in victims {
            tracing::warn!(gang = %gang, started = pods.len(), "gang did not start within its timeout; evicting its started members");
            self.metrics.gangs_timed_out.inc();
            for (ns, name, uid) in pods {
                match self.api.evict_pod(&ns, &name).await {
                    // A live cluster reports the deletion when the pod is gone (its
                    // GPUs stay booked while it terminates).
                    Ok(()) if !self.api.reports_changes() => self.forget_pod(&uid),
                    Ok(()) => {}
                    Err(e) => {
                        tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "could not evict a member of a timed-out gang")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "watchdog_tests.rs"]
mod tests;
