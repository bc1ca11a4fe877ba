//! The standing pipelined plans as `/debug/queues` shows them: who waits on
//! which node for which evicted pods.

use crate::gang::eviction_view::{PipelinedView, VictimView};
use crate::scheduler::Scheduler;

impl Scheduler {
    /// Every standing pipelined plan, in pod order.
    pub(super) fn pipelined_view(&self) -> Vec<PipelinedView> {
        let now = self.clock.now();
        let wall = self.clock.wall();
        let book = self.gang.book.read();
        let ledger = self.ledger.read();
        let mut plans: Vec<PipelinedView> = ledger
            .pledges()
            .map(|pledge| {
                let pod = &pledge.entry;
                let queue = book
                    .members()
                    .get(&pod.uid)
                    .map(|m| book.queue_of(&m.gang, m.queue_hint.as_deref()))
                    .unwrap_or_default();
                let mut waits_for: Vec<VictimView> = pledge
                    .victims
                    .iter()
                    .map(|uid| match book.members().get(uid) {
                        Some(m) => VictimView {
                            pod: format!("{}/{}", m.namespace, m.name),
                            leaving: m.terminating,
                        },
                        None => VictimView {
                            pod: ledger.pod(uid).map_or_else(
                                || uid.clone(),
                                |p| format!("{}/{}", p.namespace, p.name),
                            ),
                            leaving: false,
                        },
                    })
                    .collect();
                waits_for.sort_by(|a, b| a.pod.cmp(&b.pod));
                let left = pledge.deadline.saturating_duration_since(now);
                let deadline = chrono::TimeDelta::from_std(left)
                    .ok()
                    .and_then(|d| wall.checked_add_signed(d))
                    .unwrap_or(wall);
                PipelinedView {
                    pod: format!("{}/{}", pod.namespace, pod.name),
                    queue,
                    node: pod.node.clone(),
                    waits_for,
                    deadline: deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                }
            })
            .collect();
        plans.sort_by(|a, b| a.pod.cmp(&b.pod));
        plans
    }
}
