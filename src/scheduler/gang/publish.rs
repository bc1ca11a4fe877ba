//! Publishing a committed plan: the members' placements written onto the pods,
//! then every member's gate lifted together; a plan that cannot be written whole
//! is rolled back whole.

use crate::cluster::api::EventType;
use crate::gang::PLAN_DEADLINE;
use crate::gang::book::{GANG_GATE, GangKey, MemberPhase};
use crate::scheduler::{Scheduler, allocation_patch, clear_allocation_patch};
use crate::volcano::framework::outcome::JobCommit;
use crate::volcano::framework::{GangPhase, GangVerdict};
use std::collections::BTreeMap;

impl Scheduler {
    /// Writes the plan onto the members and lifts their gates together; on any
    /// failure the whole gang is rolled back and stays gated.
    pub(super) async fn publish_commit(&self, commit: &JobCommit) -> Result<(), String> {
        let now = self.clock.wall();
        let deadline = now.timestamp() + self.config.gang.timeout.as_secs() as i64;
        let mut patched = Vec::new();
        let mut failure = None;
        for m in &commit.members {
            let Some(p) = &m.placement else {
                continue;
            };
            let mut patch = allocation_patch(&p.node, &p.devices, now);
            patch
                .annotations
                .insert(PLAN_DEADLINE.to_string(), Some(deadline.to_string()));
            match self
                .api
                .patch_pod_metadata(&m.namespace, &m.name, &patch)
                .await
            {
                Ok(()) => patched.push(m),
                Err(e) => {
                    failure = Some(format!("patch pod {}/{}: {e}", m.namespace, m.name));
                    break;
                }
            }
        }
        if let Some(error) = failure {
            tracing::warn!(gang = %commit.gang, %error, "gang plan not published; rolled back");
            {
                let mut ledger = self.ledger.write();
                let mut planned = self.gang.planned.lock();
                for m in &commit.members {
                    if m.placement.is_some() {
                        ledger.mark_local_released(&m.uid);
                        planned.remove(&m.uid);
                    }
                }
            }
            let mut clear = clear_allocation_patch();
            clear.annotations.insert(PLAN_DEADLINE.to_string(), None);
            for m in patched {
                let _ = self
                    .api
                    .patch_pod_metadata(&m.namespace, &m.name, &clear)
                    .await;
            }
            return Err(error);
        }
        // Written on every member: from now on `/filter` answers the plan.
        {
            let mut planned = self.gang.planned.lock();
            for m in commit.members.iter().filter(|m| m.placement.is_some()) {
                planned.insert(m.uid.clone());
            }
        }
        for m in commit.members.iter().filter(|m| m.gated) {
            match self
                .api
                .remove_scheduling_gate(&m.namespace, &m.name, GANG_GATE)
                .await
            {
                Ok(()) => {
                    if let Some(member) = self.gang.book.write().members.get_mut(&m.uid) {
                        member.gated = false;
                    }
                }
                Err(e) => {
                    tracing::warn!(pod = %format!("{}/{}", m.namespace, m.name), error = %e, "could not lift the gang gate")
                }
            }
        }
        tracing::info!(gang = %commit.gang, queue = %commit.queue, members = commit.members.len(), "gang planned and released to kube-scheduler");
        for m in &commit.members {
            let message = match &m.placement {
                Some(p) => format!(
                    "gang {} placed whole: this pod's GPUs are on node {}",
                    commit.gang, p.node
                ),
                None => format!("gang {} placed whole", commit.gang),
            };
            self.event(
                (&m.namespace, &m.name, &m.uid),
                EventType::Normal,
                "GangScheduled",
                message,
            )
            .await;
        }
        self.metrics.gangs_committed.inc();
        Ok(())
    }

    /// Lifts the gates of members of placed gangs that still carry them: a commit
    /// interrupted by a restart after the plans were written but before every gate
    /// was lifted. Their reservations came back from the plan annotations.
    pub(super) async fn finish_interrupted_commits(
        &self,
        verdicts: &BTreeMap<GangKey, GangVerdict>,
    ) {
        let stuck: Vec<(String, String, String)> = {
            let book = self.gang.book.read();
            let ledger = self.ledger.read();
            book.members
                .values()
                .filter(|m| m.gated && m.phase == MemberPhase::Pending)
                .filter(|m| {
                    verdicts
                        .get(&m.gang)
                        .is_some_and(|v| v.phase == GangPhase::Running)
                })
                .filter(|m| ledger.pod(&m.uid).is_some())
                .map(|m| (m.namespace.clone(), m.name.clone(), m.uid.clone()))
                .collect()
        };
        for (ns, name, uid) in stuck {
            tracing::info!(pod = %format!("{ns}/{name}"), "lifting the gate of a planned member (commit interrupted earlier)");
            match self.api.remove_scheduling_gate(&ns, &name, GANG_GATE).await {
                Ok(()) => {
                    if let Some(member) = self.gang.book.write().members.get_mut(&uid) {
                        member.gated = false;
                    }
                }
                Err(e) => {
                    tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "could not lift the gang gate")
                }
            }
        }
    }
}
