//! Publishing a committed plan: the members' placements written onto the pods,
//! the victims evicted, then every member's gate lifted together; a plan that
//! cannot be written whole is rolled back whole.

use crate::cluster::api::{EventType, GateLift, MetadataPatch};
use crate::gang::book::{GANG_GATE, MemberPhase};
use crate::gang::pipelined_plan::PIPELINED_PLAN;
use crate::gang::{PLAN_DEADLINE, PLANNED_NODE};
use crate::scheduler::{Scheduler, allocation_patch, clear_allocation_patch};
use crate::volcano::framework::job::TaskPlacement;
use crate::volcano::framework::outcome::{JobCommit, PlannedTask};
use crate::volcano::framework::{GangPhase, Verdicts};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What a placement writes onto its pod: the node for a pod that asks for no
/// vGPU (pinned to it as its gate is lifted), else the allocation HAMi's device
/// plugin reads, with the deadline of the gang's plan.
fn plan_patch(
    p: &TaskPlacement,
    now: chrono::DateTime<chrono::Utc>,
    deadline: i64,
) -> MetadataPatch {
    if p.without_gpus() {
        let mut patch = MetadataPatch::default();
        patch
            .annotations
            .insert(PLANNED_NODE.to_string(), Some(p.node.clone()));
        return patch;
    }
    let mut patch = allocation_patch(&p.node, &p.devices, now);
    patch
        .annotations
        .insert(PLAN_DEADLINE.to_string(), Some(deadline.to_string()));
    patch
}

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
        if let Some((m, p)) = self.sole_release(commit) {
            return self.release_sole_member(commit, m, p, now, deadline).await;
        }
        let mut patched = Vec::new();
        let mut waiting = Vec::new();
        let mut failure = None;
        for m in &commit.members {
            let Some(p) = &m.placement else {
                continue;
            };
            if p.without_gpus() {
                let patch = plan_patch(p, now, deadline);
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
                None => plan_patch(p, now, deadline),
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
        self.announce_released(commit).await;
        Ok(())
    }

    /// The member of a commit that is one gated member placed on free room (no
    /// victims, no room still being freed), with its placement: its plan and
    /// its release are one write, since there is no other member to wait for.
    fn sole_release<'c>(
        &self,
        commit: &'c JobCommit,
    ) -> Option<(&'c PlannedTask, &'c TaskPlacement)> {
        let [m] = commit.members.as_slice() else {
            return None;
        };
        let p = m.placement.as_ref()?;
        let free_room =
            commit.evictions.is_empty() && self.ledger.read().pledge_of(&m.uid).is_none();
        (m.gated && !m.pipelined && free_room).then_some((m, p))
    }

    /// Writes the plan of a commit's sole member and lifts its gate in one
    /// update; on failure the commit is taken back whole (nothing was written).
    async fn release_sole_member(
        &self,
        commit: &JobCommit,
        m: &PlannedTask,
        p: &TaskPlacement,
        now: chrono::DateTime<chrono::Utc>,
        deadline: i64,
    ) -> Result<(), String> {
        let pin = p.without_gpus().then(|| p.node.clone());
        if pin.is_none() {
            // From now on `/filter` answers the plan.
            self.gang.planned.lock().insert(m.uid.clone());
        }
        let patch = plan_patch(p, now, deadline);
        let seen = self.seen_pod(&m.uid);
        let lift = GateLift {
            gate: GANG_GATE,
            pin: pin.as_deref(),
            metadata: &patch,
            seen: seen.as_deref(),
        };
        let released = self
            .api
            .remove_scheduling_gate(&m.namespace, &m.name, &lift)
            .await;
        if let Err(e) = released {
            let error = format!("release pod {}/{}: {e}", m.namespace, m.name);
            tracing::warn!(gang = %commit.gang, %error, "gang plan not published; rolled back");
            self.roll_back_commit(commit, &[]).await;
            return Err(error);
        }
        self.note_released(&m.uid, pin);
        self.announce_released(commit).await;
        Ok(())
    }

    /// The pod of member `uid` as the watch last showed it.
    fn seen_pod(&self, uid: &str) -> Option<Arc<Pod>> {
        self.gang
            .book
            .read()
            .members()
            .get(uid)
            .map(|m| m.pod.clone())
    }

    /// Notes a member released: counted on its node from the next cycle on,
    /// even before the watch shows the update.
    fn note_released(&self, uid: &str, pin: Option<String>) {
        if let Some(member) = self.gang.book.write().member_mut(uid) {
            member.gated = false;
            if pin.is_some() {
                member.planned_node = pin;
            }
        }
    }

    /// Tells the members of a commit released whole where they were placed.
    async fn announce_released(&self, commit: &JobCommit) {
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
            let seen = self.seen_pod(&uid);
            let lift = GateLift {
                pin: pin.as_deref(),
                seen: seen.as_deref(),
                ..GateLift::only(GANG_GATE)
            };
            match self.api.remove_scheduling_gate(&ns, &name, &lift).await {
                Ok(()) => self.note_released(&uid, pin),
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
