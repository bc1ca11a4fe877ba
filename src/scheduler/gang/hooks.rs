//! The gang's part in the extender verbs: `/filter` honours a member's plan (or
//! plans its gang on the spot when it arrived ungated), `/bind` holds strict gangs
//! at a barrier, and a successful bind is recorded at once.

use super::GangFilter;
use crate::gang::STRICT;
use crate::gang::barrier::Passage;
use crate::gang::book::{MemberPhase, member_key};
use crate::ledger::PodPhase;
use crate::scheduler::Scheduler;
use crate::volcano::framework::GangPhase;
use k8s_openapi::api::core::v1::Pod;

impl Scheduler {
    /// `/filter` for gang and queue pods: honour the plan, or plan the pod's gang
    /// now when it reached kube-scheduler without our gate (webhook down, created
    /// before install).
    pub(crate) async fn gang_filter(
        &self,
        pod: &Pod,
        uid: &str,
        names: &crate::extender::node_names::NodeNames,
    ) -> GangFilter {
        if !self.config.gang.enabled {
            return GangFilter::Usual;
        }
        let Some(member) = member_key(pod) else {
            return GangFilter::Usual;
        };
        self.gang_learn_from_filter(pod).await;
        // A published plan is answered at once, whatever a cycle is doing.
        if let Some(answer) = self.honour_plan(uid, member.namespace, member.name, names) {
            return answer;
        }
        if self.ledger.read().pod(uid).is_some() {
            return GangFilter::Usual;
        }
        // Not planned yet: plan this gang now, one cycle at a time (a cycle in
        // progress may be publishing this very gang's plan; its result is then
        // answered below).
        let mut memory = self.gang.planner.lock().await;
        if let Some(answer) = self.honour_plan(uid, member.namespace, member.name, names) {
            return answer;
        }
        if self.ledger.read().pod(uid).is_some() {
            return GangFilter::Usual;
        }
        let outcome = self.plan_and_reserve(
            &memory,
            Some(&member.gang),
            &mut crate::gang::cycle_stages::CycleStages::default(),
        );
        for commit in &outcome.commits {
            if let Err(e) = self.publish_commit(commit, &mut memory.evictions).await {
                return GangFilter::Wait(format!("gang {}: {e}", member.gang));
            }
        }
        drop(memory);
        if let Some(answer) = self.honour_plan(uid, member.namespace, member.name, names) {
            return answer;
        }
        let verdict = outcome.verdicts.get(&member.gang);
        if verdict.is_some_and(|v| v.phase == GangPhase::Running && v.message.is_none()) {
            // The gang already runs and no queue refused this extra member: it
            // simply does not fit now, and the usual filter says why per node.
            return GangFilter::Usual;
        }
        let why = verdict
            .and_then(|v| v.message.clone())
            .unwrap_or_else(|| "waiting for its gang to be placed".into());
        GangFilter::Wait(format!("gang {}: {why}", member.gang))
    }

    /// The answer for a member whose plan is published: its planned node when
    /// kube-scheduler still offers it; otherwise the plan is dropped and the member
    /// is placed again like any pod (the node failed kube-scheduler's own filters:
    /// CPU taken, taints).
    fn honour_plan(
        &self,
        uid: &str,
        namespace: &str,
        name: &str,
        names: &crate::extender::node_names::NodeNames,
    ) -> Option<GangFilter> {
        let node = self.planned_node(uid)?;
        if names.contains(&node) {
            return Some(GangFilter::Planned(node));
        }
        self.gang.planned.lock().remove(uid);
        tracing::info!(pod = %format!("{namespace}/{name}"), node = %node, "planned node not among the candidates; placing the member again");
        Some(GangFilter::Usual)
    }

    fn planned_node(&self, uid: &str) -> Option<String> {
        if !self.gang.planned.lock().contains(uid) {
            return None;
        }
        self.ledger
            .read()
            .pod(uid)
            .filter(|p| matches!(p.phase, PodPhase::Reserved { .. }))
            .map(|p| p.node.clone())
    }

    /// `/bind` for strict gangs: wait at the barrier. `Ok` lets the bind proceed;
    /// the caller keeps the passage until the bind has ended.
    pub(crate) async fn gang_bind_barrier(&self, pod: &Pod) -> Result<Option<Passage>, String> {
        if !self.config.gang.enabled {
            return Ok(None);
        }
        let Some(member) = member_key(pod) else {
            return Ok(None);
        };
        if member.gang.single {
            return Ok(None);
        }
        let (min, strict) = {
            let book = self.gang.book.read();
            let Some(group) = book.groups().get(&member.gang.owned_names()) else {
                return Ok(None);
            };
            let strict = match group.annotations.get(STRICT).map(String::as_str) {
                Some("true") => true,
                Some("false") => false,
                _ => self.config.gang.strict,
            };
            (group.min_member.max(0) as usize, strict)
        };
        if !strict || min <= 1 {
            return Ok(None);
        }
        let gang = member.gang.clone();
        let already = || {
            self.gang
                .book
                .read()
                .members()
                .values()
                .filter(|m| m.gang == gang && m.uid != member.uid)
                .filter(|m| matches!(m.phase, MemberPhase::Placed | MemberPhase::Succeeded))
                .count()
        };
        let wait = self.config.gang.strict_wait;
        self.gang
            .barriers
            .wait(&member.gang, member.uid, min, already, wait)
            .await
            .map(Some)
            .map_err(|t| {
                format!(
                    "gang {}: {}/{} members reached bind within {wait:?}; releasing all of them",
                    member.gang, t.arrived, min,
                )
            })
    }

    /// After a successful bind: the book learns it at once (the cluster file has no
    /// watch) and strict waiters count again.
    pub(crate) fn gang_bound(&self, pod: &Pod, node: &str) {
        if !self.config.gang.enabled {
            return;
        }
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        self.gang.planned.lock().remove(uid);
        let gang = {
            let mut book = self.gang.book.write();
            // Bound through the API: the pod exists, whatever taught us of it.
            self.gang.filter_only.lock().forget(uid);
            book.member_mut(uid).map(|m| {
                m.phase = MemberPhase::Placed;
                let _ = node;
                m.gang.clone()
            })
        };
        if let Some(g) = gang {
            self.gang.barriers.nudge(&g);
        }
    }
}
