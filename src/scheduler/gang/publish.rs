//! Publishing a committed plan: the members' placements written onto the pods,
//! the victims evicted, then every member's gate lifted together; a plan that
//! cannot be written whole is rolled back whole.

use crate::cluster::api::{EventType, MetadataPatch};
use crate::gang::book::{GANG_GATE, MemberPhase};
use crate::gang::pipelined_plan::PIPELINED_PLAN;
use crate::gang::{PLAN_DEADLINE, PLANNED_NODE};
use crate::scheduler::{Scheduler, allocation_patch, clear_allocation_patch};
use crate::volcano::framework::outcome::{JobCommit, PlannedTask};
use crate::volcano::framework::{GangPhase, Verdicts};
use std::collections::BTreeSet;

/// A pod whose gang gate is to be lifted.
struct GateToLift {
    namespace: String,
    name: String,
    uid: String,
    /// The node to pin it to (a pod that asks for no vGPU).
    pin: Option<String>,
}

impl Scheduler {
    /// Writes the plan onto the members, evicts the victims it makes room with,
    /// and lifts the members' gates together; on any failure (or a refused
    /// eviction before any victim went) the whole gang is rolled back and stays
    /// gated. A member placed on room still being freed gets its pipelined plan
    /// instead of an allocation, and the gang's gates stay on until the victims
    /// are gone (see `pipelined`).
    pub(super) async fn publish_commit(
        &self,
        commit: &JobCommit,
        evictions: &mut super::evict::EvictionLog,
    ) -> Result<(), String> {
        let now = self.clock.wall();
        let deadline = now.timestamp() + self.config.gang.timeout.as_secs() as i64;
        let mut patched = Vec::new();
        let mut waiting = Vec::new();
        let mut failure = None;
        for m in &commit.members {
            let Some(p) = &m.placement else {
                continue;
            };
            if p.without_gpus() {
                let mut patch = MetadataPatch::default();
                patch
                    .annotations
                    .insert(PLANNED_NODE.to_string(), Some(p.node.clone()));
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
                continue;
            }
            let plan = self
                .ledger
                .read()
                .pledge_of(&m.uid)
                .map(|pledge| self.pipelined_plan_of(pledge, &commit.evictions));
            let patch = match &plan {
                Some(plan) => {
                    let mut patch = MetadataPatch::default();
                    patch
                        .annotations
                        .insert(PIPELINED_PLAN.to_string(), Some(plan.encode()));
                    patch
                }
                None => {
                    let mut patch = allocation_patch(&p.node, &p.devices, now);
                    patch
                        .annotations
                        .insert(PLAN_DEADLINE.to_string(), Some(deadline.to_string()));
                    patch
                }
            };
            match self
                .api
                .patch_pod_metadata(&m.namespace, &m.name, &patch)
                .await
            {
                Ok(()) => {
                    patched.push(m);
                    if let Some(plan) = plan {
                        waiting.push((m, plan));
                    }
                }
                Err(e) => {
                    failure = Some(format!("patch pod {}/{}: {e}", m.namespace, m.name));
                    break;
                }
            }
        }
        if let Some(error) = failure {
            tracing::warn!(gang = %commit.gang, %error, "gang plan not published; rolled back");
            self.roll_back_commit(commit, &patched).await;
            return Err(error);
        }
        // Written on every member: from now on `/filter` answers the plan.
        {
            let mut planned = self.gang.planned.lock();
            for m in commit
                .members
                .iter()
                .filter(|m| m.placement.as_ref().is_some_and(|p| !p.without_gpus()))
            {
                if !waiting.iter().any(|(w, _)| w.uid == m.uid) {
                    planned.insert(m.uid.clone());
                }
            }
        }
        if !commit.evictions.is_empty() {
            let run = self.evict_victims(&commit.evictions, evictions).await;
            if let Some(refused) = run.refused
                && run.done == 0
            {
                tracing::info!(gang = %commit.gang, reason = %refused, "nothing evicted; the plan is dropped");
                self.roll_back_commit(commit, &patched).await;
                return Err(refused);
            }
        }
        if !waiting.is_empty() {
            for (m, plan) in &waiting {
                self.event(
                    (&m.namespace, &m.name, &m.uid),
                    EventType::Normal,
                    "Pipelined",
                    format!(
                        "gang {}: this pod's GPUs will be on node {} once {} evicted pod(s) are gone",
                        commit.gang,
                        plan.node,
                        plan.victims.len()
                    ),
                )
                .await;
            }
            tracing::info!(gang = %commit.gang, queue = %commit.queue, members = commit.members.len(), pipelined = waiting.len(), evicted = commit.evictions.len(), "gang planned; waiting for evicted pods to leave");
            return Ok(());
        }
        self.lift_gates(commit.members.iter().filter(|m| m.gated).map(|m| {
            GateToLift {
                namespace: m.namespace.clone(),
                name: m.name.clone(),
                uid: m.uid.clone(),
                pin: m
                    .placement
                    .as_ref()
                    .filter(|p| p.without_gpus())
                    .map(|p| p.node.clone()),
            }
        }))
        .await;
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

    /// Takes a commit back whole: its bookings and promises released, the plans
    /// written so far removed from the pods.
    async fn roll_back_commit(&self, commit: &JobCommit, patched: &[&PlannedTask]) {
        {
            let mut ledger = self.ledger.write();
            let mut planned = self.gang.planned.lock();
            for m in &commit.members {
                if m.placement.is_some() {
                    // A withdrawn plan is our own write too: events from before it
                    // (still carrying the plan) must not bring it back.
                    ledger.unpledge(&m.uid);
                    ledger.mark_local_released(&m.uid);
                    planned.remove(&m.uid);
                }
            }
        }
        let clear = clear_allocation_patch();
        let mut unplanned = MetadataPatch::default();
        unplanned.annotations.insert(PLANNED_NODE.to_string(), None);
        for m in patched {
            let clear = match &m.placement {
                Some(p) if p.without_gpus() => &unplanned,
                _ => &clear,
            };
            let _ = self
                .api
                .patch_pod_metadata(&m.namespace, &m.name, clear)
                .await;
        }
    }

    /// Removes our gate from each pod, pinning it to its planned node when it has
    /// one: nothing else holds such a pod to its plan.
    ///
    /// Pinned pods go first, and a pin the API server refuses stops the rest: the
    /// gang then stays gated rather than starting without that member, and its
    /// gates are tried again next cycle (see [`Self::finish_interrupted_commits`]).
    async fn lift_gates(&self, pods: impl Iterator<Item = GateToLift>) {
        let mut pods: Vec<GateToLift> = pods.collect();
        pods.sort_by_key(|g| g.pin.is_none());
        for GateToLift {
            namespace: ns,
            name,
            uid,
            pin,
        } in pods
        {
            match self
                .api
                .remove_scheduling_gate(&ns, &name, GANG_GATE, pin.as_deref())
                .await
            {
                Ok(()) => {
                    if let Some(member) = self.gang.book.write().member_mut(&uid) {
                        member.gated = false;
                        // Counted on its node from the next cycle on, even before
                        // the watch shows the update.
                        if pin.is_some() {
                            member.planned_node = pin;
                        }
                    }
                }
                Err(e) if pin.is_some() => {
                    tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "could not pin the member to its planned node; its gang stays gated");
                    return;
                }
                Err(e) => {
                    tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "could not lift the gang gate")
                }
            }
        }
    }

    /// Lifts the gates of members of placed gangs that still carry them: a gang
    /// whose pipelined members' victims are now gone, or a commit interrupted by a
    /// restart after the plans were written but before every gate was lifted
    /// (their reservations came back from the plan annotations). `candidates`:
    /// the members that may be such (planned and gated when the cycle took its
    /// picture, and the members it committed); each is checked as it is now.
    pub(super) async fn finish_interrupted_commits(
        &self,
        verdicts: &Verdicts,
        candidates: &BTreeSet<String>,
    ) {
        let stuck: Vec<GateToLift> = {
            let book = self.gang.book.read();
            let ledger = self.ledger.read();
            candidates
                .iter()
                .filter_map(|uid| book.members().get(uid))
                .filter(|m| m.gated && m.phase == MemberPhase::Pending)
                .filter(|m| ledger.pod(&m.uid).is_some() || m.planned_node.is_some())
                .filter(|m| {
                    verdicts
                        .get(&m.gang)
                        .is_some_and(|v| v.phase == GangPhase::Running)
                })
                .map(|m| GateToLift {
                    namespace: m.namespace.clone(),
                    name: m.name.clone(),
                    uid: m.uid.clone(),
                    pin: m.planned_node.clone(),
                })
                .collect()
        };
        for gate in &stuck {
            tracing::info!(pod = %format!("{}/{}", gate.namespace, gate.name), "lifting the gate of a planned member (its gang is placed whole)");
        }
        self.lift_gates(stuck.into_iter()).await;
    }
}
