//! Pipelined plans after their commit: a pod placed on room that evicted pods
//! still hold waits, gated, until they are gone. Each cycle then
//!
//! * counts victims nobody knows any more as gone (deleted while we were not
//!   watching, or before a restart);
//! * publishes the plans whose victims are all gone (the ledger booked them): the
//!   pod gets its allocation like any planned member, its gang's reservations are
//!   renewed, and the gates are lifted once the gang is placed whole;
//! * asks again to evict victims that are still running (a refused or lost
//!   eviction, a restart between the plan and its evictions), under the name
//!   of the action that chose them.
//!
//! Plans whose victims do not leave before the deadline lapse
//! ([`Scheduler::expire_pledges`]); the gang is then planned afresh.

use super::PlannerMemory;
use super::evict::EVICTION_RETRY;
use crate::cluster::api::EventType;
use crate::gang::PLAN_DEADLINE;
use crate::gang::book::MemberPhase;
use crate::gang::pipelined_plan::{PIPELINED_PLAN, PipelinedPlan};
use crate::ledger::{Ledger, Pledge, PodEntry, PodPhase};
use crate::object_namespace::namespace_of;
use crate::scheduler::{Scheduler, allocation_patch};
use crate::volcano::framework::EvictAction;
use crate::volcano::framework::outcome::Eviction;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeSet;

impl Scheduler {
    /// A pod still waiting for its victims, as a restarted scheduler (or another
    /// replica) first sees it: its pipelined plan is promised again, so nobody
    /// else is placed on the room being freed and nobody is evicted twice.
    pub(crate) fn recover_pipelined_plan(&self, ledger: &mut Ledger, pod: &Pod, uid: &str) {
        let Some(text) = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PIPELINED_PLAN))
        else {
            return;
        };
        let unbound = pod.spec.as_ref().is_none_or(|s| s.node_name.is_none());
        if !unbound
            || ledger.pod(uid).is_some()
            || ledger.pledge_of(uid).is_some()
            || !self.placed_here(pod)
        {
            return;
        }
        let who = format!(
            "{}/{}",
            namespace_of(&pod.metadata),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let plan = match PipelinedPlan::decode(text) {
            Ok(plan) => plan,
            Err(e) => {
                tracing::warn!(pod = %who, error = %e, "ignoring an unreadable pipelined plan");
                return;
            }
        };
        let left = plan.deadline - self.clock.wall().timestamp();
        if left <= 0 {
            return;
        }
        let deadline = self.clock.now() + std::time::Duration::from_secs(left as u64);
        let entry = PodEntry::new(
            uid.to_string(),
            namespace_of(&pod.metadata).to_owned(),
            pod.metadata.name.clone().unwrap_or_default(),
            plan.node,
            plan.devices,
            plan.init_count,
            PodPhase::Reserved { deadline },
        );
        tracing::info!(pod = %who, node = %entry.node, waiting_for = plan.victims.len(), "pipelined plan read back");
        ledger.restore_pledge(entry, plan.victims, deadline, self.config.gang.timeout);
        self.wake_for_booked_plans(ledger);
    }

    /// Wakes the planner when plans were booked (their victims gone), so they are
    /// published soon.
    pub(crate) fn wake_for_booked_plans(&self, ledger: &Ledger) {
        if ledger.has_converted() {
            self.gang.wake.notify_one();
        }
    }

    /// The cycle's work on pipelined plans (see the module documentation).
    pub(super) async fn settle_pipelined(&self, memory: &mut PlannerMemory) {
        {
            let book = self.gang.book.read();
            self.ledger.write().forget_vanished_victims(|uid| {
                book.members()
                    .get(uid)
                    .is_some_and(|m| matches!(m.phase, MemberPhase::Placed | MemberPhase::Pending))
            });
        }
        self.publish_converted().await;
        self.ask_again_to_evict(memory).await;
    }

    /// The annotation a pipelined member carries until its victims are gone,
    /// with the action of each of `evictions` among its victims.
    pub(super) fn pipelined_plan_of(
        &self,
        pledge: &Pledge,
        evictions: &[Eviction],
    ) -> PipelinedPlan {
        let left = pledge
            .deadline
            .saturating_duration_since(self.clock.now())
            .as_secs() as i64;
        PipelinedPlan {
            node: pledge.entry.node.clone(),
            devices: pledge.entry.devices.clone(),
            init_count: pledge.entry.init_count,
            victims: pledge.victims.clone(),
            deadline: self.clock.wall().timestamp() + left,
            evicted_by: evictions
                .iter()
                .filter(|e| pledge.victims.contains(&e.uid))
                .map(|e| (e.uid.clone(), e.action))
                .collect(),
        }
    }

    /// Publishes the plans the ledger booked because their victims are gone.
    async fn publish_converted(&self) {
        let converted = self.ledger.write().take_converted();
        if converted.is_empty() {
            return;
        }
        let now = self.clock.wall();
        let deadline = now.timestamp() + self.config.gang.timeout.as_secs() as i64;
        let renewed = self.clock.now() + self.config.gang.timeout;
        for uid in converted {
            if self.gang.planned.lock().contains(&uid) {
                continue;
            }
            let (entry, gang) = {
                let book = self.gang.book.read();
                let ledger = self.ledger.read();
                let member = book
                    .members()
                    .get(&uid)
                    .filter(|m| m.phase == MemberPhase::Pending);
                let entry = ledger
                    .pod(&uid)
                    .filter(|p| matches!(p.phase, PodPhase::Reserved { .. }));
                match (member, entry) {
                    (Some(m), Some(e)) => (e.clone(), m.gang.clone()),
                    _ => continue,
                }
            };
            let mut patch = allocation_patch(&entry.node, &entry.devices, now);
            patch
                .annotations
                .insert(PLAN_DEADLINE.to_string(), Some(deadline.to_string()));
            patch.annotations.insert(PIPELINED_PLAN.to_string(), None);
            if let Err(e) = self
                .api
                .patch_pod_metadata(&entry.namespace, &entry.name, &patch)
                .await
            {
                tracing::warn!(pod = %format!("{}/{}", entry.namespace, entry.name), error = %e, "could not publish a pipelined plan whose victims are gone; planning the pod again");
                self.ledger.write().mark_local_released(&uid);
                continue;
            }
            self.gang.planned.lock().insert(uid.clone());
            // The gang's other planned members waited with it: their reservations
            // run from now, so the whole gang has its full time to bind.
            let mates: Vec<(String, String, String)> = {
                let book = self.gang.book.read();
                let planned = self.gang.planned.lock();
                book.members()
                    .values()
                    .filter(|m| m.gang == gang && m.uid != uid && planned.contains(&m.uid))
                    .map(|m| (m.uid.clone(), m.namespace.clone(), m.name.clone()))
                    .collect()
            };
            for (mate, ns, name) in mates {
                let renewed_here = {
                    let mut ledger = self.ledger.write();
                    let reserved = ledger
                        .pod(&mate)
                        .is_some_and(|p| matches!(p.phase, PodPhase::Reserved { .. }));
                    reserved && ledger.set_phase(&mate, PodPhase::Reserved { deadline: renewed })
                };
                if renewed_here {
                    let mut patch = crate::cluster::api::MetadataPatch::default();
                    patch
                        .annotations
                        .insert(PLAN_DEADLINE.to_string(), Some(deadline.to_string()));
                    let _ = self.api.patch_pod_metadata(&ns, &name, &patch).await;
                }
            }
            self.event(
                (&entry.namespace, &entry.name, &uid),
                EventType::Normal,
                "VictimsGone",
                format!(
                    "the pods evicted to make room for it are gone: its GPUs are on node {}",
                    entry.node
                ),
            )
            .await;
        }
        self.gang.wake.notify_one();
    }

    /// Evicts again the victims of standing plans that still run and are not
    /// leaving, at most once per [`EVICTION_RETRY`] each.
    async fn ask_again_to_evict(&self, memory: &mut PlannerMemory) {
        let now = self.clock.now();
        let (waiting, victims): (BTreeSet<String>, Vec<Eviction>) = {
            let book = self.gang.book.read();
            let ledger = self.ledger.read();
            let mut waiting = BTreeSet::new();
            let mut victims = Vec::new();
            for pledge in ledger.pledges() {
                let preemptor = &pledge.entry;
                let preemptor_member = book.members().get(&preemptor.uid);
                let preemptor_queue =
                    preemptor_member.map(|m| book.queue_of(&m.gang, m.queue_hint.as_deref()));
                for uid in &pledge.victims {
                    waiting.insert(uid.clone());
                    let Some(m) = book.members().get(uid) else {
                        continue;
                    };
                    if m.phase != MemberPhase::Placed || m.terminating {
                        continue;
                    }
                    if memory
                        .evictions
                        .asked
                        .get(uid)
                        .is_some_and(|at| now.duration_since(*at) < EVICTION_RETRY)
                    {
                        continue;
                    }
                    if victims.iter().any(|v: &Eviction| &v.uid == uid) {
                        continue;
                    }
                    let queue = book.queue_of(&m.gang, m.queue_hint.as_deref());
                    let service_type = book
                        .groups()
                        .get(&m.gang.owned_names())
                        .and_then(|g| crate::gang::victim_facts::service_type(Some(&g.annotations)))
                        .or_else(|| m.service_type.clone());
                    // After a restart the plan on the preemptor says which action
                    // evicted the victim; for a plan that does not, the queues tell
                    // preemption from reclaim.
                    let action = memory
                        .evictions
                        .by
                        .get(uid)
                        .copied()
                        .or_else(|| {
                            preemptor_member.and_then(|p| PipelinedPlan::evicted_by_on(&p.pod, uid))
                        })
                        .unwrap_or(if preemptor_queue.as_deref() == Some(queue.as_str()) {
                            EvictAction::Preempt
                        } else {
                            EvictAction::Reclaim
                        });
                    victims.push(Eviction {
                        uid: uid.clone(),
                        namespace: m.namespace.clone(),
                        name: m.name.clone(),
                        job: m.gang.clone(),
                        queue,
                        node: Some(preemptor.node.clone()),
                        service_type,
                        action,
                        reason: format!(
                            "{} for pod {}/{}",
                            action.verb(),
                            preemptor.namespace,
                            preemptor.name
                        ),
                    });
                }
            }
            (waiting, victims)
        };
        memory
            .evictions
            .asked
            .retain(|uid, _| waiting.contains(uid));
        memory.evictions.by.retain(|uid, _| waiting.contains(uid));
        if !victims.is_empty() {
            self.evict_victims(&victims, &mut memory.evictions).await;
        }
    }

    /// Lets go of pipelined plans whose victims did not leave before the
    /// deadline; `clear_annotations` (the leader) also removes the plan from the
    /// pod. A replica that does not plan drops the list of booked plans to
    /// publish: the leader publishes them.
    pub async fn expire_pledges(&self, clear_annotations: bool) -> usize {
        let expired: Vec<Pledge> = {
            let mut ledger = self.ledger.write();
            if !clear_annotations {
                ledger.take_converted();
            }
            let now = self.clock.now();
            ledger
                .expired_pledges(now)
                .iter()
                .filter_map(|uid| ledger.unpledge(uid))
                .collect()
        };
        for pledge in &expired {
            let e = &pledge.entry;
            tracing::info!(pod = %format!("{}/{}", e.namespace, e.name), node = %e.node, waiting_for = pledge.victims.len(), "pipelined plan lapsed: the pods evicted for it did not leave in time");
            self.metrics.pipelined_plans_expired.inc();
            if !clear_annotations {
                continue;
            }
            let mut patch = crate::cluster::api::MetadataPatch::default();
            patch.annotations.insert(PIPELINED_PLAN.to_string(), None);
            if let Err(err) = self
                .api
                .patch_pod_metadata(&e.namespace, &e.name, &patch)
                .await
            {
                tracing::debug!(pod = %e.name, error = %err, "could not clear a lapsed pipelined plan");
            }
        }
        if !expired.is_empty() {
            self.gang.wake.notify_one();
        }
        expired.len()
    }
}
