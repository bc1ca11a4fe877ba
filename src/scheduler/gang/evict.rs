//! Carrying out the evictions preempt and reclaim decided, through the API
//! server's Eviction API (so PodDisruptionBudgets are honoured: the API server
//! answers 429 when one does not allow it).
//!
//! Victims covered by a budget go first: a refusal is then most likely before
//! anyone was evicted, and the whole plan can be dropped with nothing lost. A
//! refusal after some victims went leaves the plan standing; its remaining
//! victims are asked again on later cycles until the plan's deadline.

use crate::cluster::api::{ApiError, EventType};
use crate::gang::eviction_view::EvictionRecord;
use crate::metrics::EvictionLabels;
use crate::scheduler::Scheduler;
use crate::volcano::framework::EvictAction;
use crate::volcano::framework::outcome::Eviction;
use crate::volcano::plugins::capacity_card::ServiceType;
use foldhash::HashMap;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long after asking to evict a pod it is asked again when it has not gone
/// (the API server refused, or the answer was lost).
pub(super) const EVICTION_RETRY: Duration = Duration::from_secs(10);

/// How many past evictions `/debug/queues` shows.
const EVICTIONS_SHOWN: usize = 64;

/// What the planner remembers of the evictions it asked for.
#[derive(Debug, Default)]
pub(super) struct EvictionLog {
    /// When each victim of a standing plan was last asked to leave.
    pub asked: HashMap<String, Instant>,
    /// The last evictions asked, oldest first.
    pub recent: VecDeque<EvictionRecord>,
    /// Which action asked each victim of a standing plan to leave: asking it
    /// again is reported under the same name.
    pub by: HashMap<String, EvictAction>,
}

impl EvictionLog {
    fn record(&mut self, record: EvictionRecord) {
        if self.recent.len() == EVICTIONS_SHOWN {
            self.recent.pop_front();
        }
        self.recent.push_back(record);
    }
}

/// What became of the evictions of one plan.
#[derive(Debug, Default)]
pub(super) struct EvictionRun {
    /// Victims evicted now or found already gone.
    pub done: usize,
    /// The first refusal, if any (later victims were not asked).
    pub refused: Option<String>,
}

/// What became of one eviction.
enum Evicted {
    Now,
    AlreadyGone,
    Refused(String),
    Failed(String),
}

impl Evicted {
    fn label(&self) -> &'static str {
        match self {
            Evicted::Now => "evicted",
            Evicted::AlreadyGone => "gone",
            Evicted::Refused(_) => "refused",
            Evicted::Failed(_) => "failed",
        }
    }
}

impl Scheduler {
    /// Evicts `victims` in order, budget-covered ones first, stopping at the first
    /// refusal. `log` remembers when each victim was last asked (for retries) and
    /// what became of it.
    pub(super) async fn evict_victims(
        &self,
        victims: &[Eviction],
        log: &mut EvictionLog,
    ) -> EvictionRun {
        let mut ordered: Vec<&Eviction> = victims.iter().collect();
        // Stable: the session's order (least important first) within each group.
        ordered.sort_by_key(|v| !self.victim_covered_by_budget(&v.uid));
        let mut run = EvictionRun::default();
        for victim in ordered {
            log.asked.insert(victim.uid.clone(), self.clock.now());
            log.by.insert(victim.uid.clone(), victim.action);
            let outcome = self.evict_one(victim).await;
            log.record(EvictionRecord {
                at: self
                    .clock
                    .wall()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                pod: format!("{}/{}", victim.namespace, victim.name),
                action: victim.action.as_str().into(),
                queue: victim.queue.clone(),
                service_type: victim.service_type.clone(),
                reason: victim.reason.clone(),
                outcome: outcome.label().into(),
                detail: match &outcome {
                    Evicted::Refused(why) | Evicted::Failed(why) => Some(why.clone()),
                    Evicted::Now | Evicted::AlreadyGone => None,
                },
            });
            match outcome {
                Evicted::Now | Evicted::AlreadyGone => run.done += 1,
                Evicted::Refused(why) => {
                    run.refused = Some(format!(
                        "eviction of {}/{} refused: {why}",
                        victim.namespace, victim.name
                    ));
                    break;
                }
                Evicted::Failed(_) => {}
            }
        }
        run
    }

    fn victim_covered_by_budget(&self, uid: &str) -> bool {
        let pod = self
            .gang
            .book
            .read()
            .members()
            .get(uid)
            .map(|m| m.pod.clone());
        pod.is_some_and(|p| self.budget_covers(&p))
    }

    async fn evict_one(&self, victim: &Eviction) -> Evicted {
        let pod = format!("{}/{}", victim.namespace, victim.name);
        let outcome = match self.api.evict_pod(&victim.namespace, &victim.name).await {
            Ok(()) => Evicted::Now,
            Err(ApiError::NotFound { .. }) => Evicted::AlreadyGone,
            Err(ApiError::Refused(why)) => Evicted::Refused(why),
            Err(e) => Evicted::Failed(e.to_string()),
        };
        self.metrics.eviction(&EvictionLabels {
            action: victim.action.as_str().into(),
            queue: victim.queue.clone(),
            service_type: ServiceType::parse(victim.service_type.as_deref().unwrap_or_default())
                .label()
                .into(),
            outcome: outcome.label().into(),
        });
        match &outcome {
            Evicted::Now => {
                tracing::info!(pod = %pod, action = victim.action.as_str(), reason = %victim.reason, "evicted");
                self.event(
                    (&victim.namespace, &victim.name, &victim.uid),
                    EventType::Warning,
                    "Evict",
                    format!("{}: {}", victim.action.event_title(), victim.reason),
                )
                .await;
                self.victim_leaving(&victim.uid);
            }
            Evicted::AlreadyGone => self.forget_pod(&victim.uid),
            Evicted::Refused(why) => {
                tracing::info!(pod = %pod, reason = %why, "eviction refused (a PodDisruptionBudget does not allow it now)")
            }
            Evicted::Failed(why) => {
                tracing::warn!(pod = %pod, error = %why, "eviction failed; asking again later")
            }
        }
        outcome
    }

    /// An evicted pod keeps its node until its kubelet confirms: it is shown as
    /// leaving at once (never chosen as a victim again), and released when the
    /// deletion is seen. A cluster file has no kubelet: the pod is gone now.
    fn victim_leaving(&self, uid: &str) {
        if !self.api.reports_changes() {
            self.forget_pod(uid);
            return;
        }
        if let Some(m) = self.gang.book.write().member_mut(uid) {
            m.terminating = true;
        }
    }
}
