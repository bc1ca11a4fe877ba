//! One planning cycle: take a picture of the cluster, plan on it without holding
//! anything, then commit what the session decided to the live ledger.
//!
//! `/filter` never waits for a plan: the ledger is read only while the picture is
//! taken (node entries are shared, not copied) and written only while the plan's
//! reservations are checked and booked, a few microseconds per member. A node that
//! changed since the picture (another pod placed or gone, a new registration) is
//! checked again with the live usage: the member keeps its place if it still fits
//! there (its GPUs chosen again), and otherwise its whole gang is left for the next
//! cycle. Nothing is ever booked over capacity.

use super::{PlannerMemory, off_the_workers};
use crate::fit::{FitRequest, fit_pod};
use crate::gang::GangView;
use crate::gang::affine_pods::PlannedPods;
use crate::gang::book::{GangBook, GangKey};
use crate::gang::cycle_stages::CycleStages;
use crate::gang::kept_state::KeptState;
use crate::gang::plan::plan_with_hints;
use crate::gang::planner_book::PlannerBook;
use crate::gang::snapshot::SnapshotInput;
use crate::ledger::{Ledger, PodEntry, PodPhase};
use crate::resources::VgpuDims;
use crate::scheduler::Scheduler;
use crate::usage::{collapse_pod_usage, usage_totals};
use crate::volcano::framework::job::TaskPlacement;
use crate::volcano::framework::session_memory::SessionMemory;
use crate::volcano::framework::{GangPhase, SessionOutcome, Verdicts};
use foldhash::HashMap;
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Why a planned gang did not commit although the session placed it.
const OVERTAKEN: &str =
    "its plan was overtaken by placements made meanwhile (a node changed under it); planning again";

impl Scheduler {
    pub(crate) fn vgpu_dims(&self) -> VgpuDims {
        VgpuDims {
            count: self.config.nvidia.resource_count_name.clone(),
            memory: self.config.nvidia.resource_memory_name.clone(),
            cores: self.config.nvidia.resource_core_name.clone(),
        }
    }

    /// Plans on a picture of the cluster, then books what the session committed
    /// (see the module documentation). `only`: plan just this gang.
    pub(super) fn plan_and_reserve(
        &self,
        memory: &PlannerMemory,
        only: Option<&GangKey>,
        stages: &mut CycleStages,
    ) -> SessionOutcome {
        let mut copy = memory.book.lock();
        let mut kept = memory.kept.lock();
        let mut outcome = self.plan_on_picture(memory, (&mut copy, &mut kept), only, stages);
        let all_booked = self.reserve_commits(&mut outcome, copy.book());
        memory.hints.lock().committed(all_booked);
        stages.done("reserve");
        outcome
    }

    /// Runs a session on a picture of the cluster; nothing is booked yet. The
    /// planner's copy of the book is brought up to date first.
    fn plan_on_picture(
        &self,
        memory: &PlannerMemory,
        (copy, kept): (&mut PlannerBook, &mut KeptState),
        only: Option<&GangKey>,
        stages: &mut CycleStages,
    ) -> SessionOutcome {
        kept.note(copy.follow(&mut self.gang.book.write()));
        stages.done("book copy");
        let conf = self.gang.conf.load_full();
        let dims = self.vgpu_dims();
        let parse = |pod: &Pod| self.pod_context(pod);
        let picture = kept.picture(&self.ledger.read(), copy.book());
        stages.done("ledger picture");
        let input = SnapshotInput {
            book: copy.book(),
            conf: &conf.conf,
            dims: &dims,
            inqueue: &memory.inqueue,
            only,
            parse: &parse,
            now: self.clock.wall(),
        };
        let state = kept.state(&input, copy, picture);
        let (tasks_built, jobs_built) = kept.take_built();
        self.metrics()
            .planner_tasks_built
            .inc_by(tasks_built as u64);
        self.metrics().planner_jobs_built.inc_by(jobs_built as u64);
        stages.done("state");
        let (skips, opened) = memory
            .hints
            .lock()
            .open(&state, &conf.conf, kept.journals());
        self.metrics()
            .planner_jobs_skipped
            .inc_by(skips.skip.len() as u64);
        stages.done("queueing hints");
        // A session for one gang sees only its jobs: it leaves what sessions over
        // every job keep alone.
        let mut one_gang = SessionMemory::default();
        let mut kept_session = memory.session.lock();
        let session_memory = match only {
            None => &mut *kept_session,
            Some(_) => &mut one_gang,
        };
        let (outcome, unplaced) =
            off_the_workers(|| plan_with_hints(state, &conf.conf, skips, session_memory, stages));
        drop(kept_session);
        // Only a cycle over every job says which jobs are blocked.
        if only.is_none() {
            let placed = PlannedPods::placed_by(&outcome, copy.book());
            memory.hints.lock().planned(opened, unplaced, placed);
        }
        outcome
    }

    /// Books every committed gang in the live ledger, member by member, checking
    /// each against the node as it is now; a gang that no longer fits whole is
    /// taken back whole and reported. True when every commit was booked.
    fn reserve_commits(&self, outcome: &mut SessionOutcome, book: &GangBook) -> bool {
        if outcome.commits.is_empty() {
            return true;
        }
        let deadline = self.clock.now() + self.config.gang.timeout;
        let mut overtaken: Vec<(GangKey, usize)> = Vec::new();
        {
            let mut ledger = self.ledger.write();
            let mut expected: HashMap<String, u64> = std::mem::take(&mut outcome.node_generations)
                .into_iter()
                .collect();
            let mut evicting: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            outcome.commits.retain_mut(|commit| {
                let mut booked: Vec<String> = Vec::new();
                let mut pledged: Vec<String> = Vec::new();
                let mut fits = true;
                // Victims of this commit and of the commits booked before it, by
                // node: a pipelined member waits for every one on its node.
                let mut victims_here = evicting.clone();
                for e in &commit.evictions {
                    if let Some(node) = &e.node {
                        victims_here
                            .entry(node.clone())
                            .or_default()
                            .insert(e.uid.clone());
                    }
                }
                for m in commit.members.iter_mut() {
                    let Some(placement) = m.placement.as_mut() else {
                        continue;
                    };
                    // Nothing to book: the pod carries its node as its pin.
                    if placement.without_gpus() {
                        continue;
                    }
                    if m.pipelined {
                        let entry = PodEntry::new(
                            m.uid.clone(),
                            m.namespace.clone(),
                            m.name.clone(),
                            placement.node.clone(),
                            placement.devices.clone(),
                            placement.init_count,
                            PodPhase::Reserved { deadline },
                        );
                        let mut victims = victims_here
                            .get(&placement.node)
                            .cloned()
                            .unwrap_or_default();
                        // Pods already leaving that the session counted as freed.
                        victims.extend(leaving_on(book, &ledger, &placement.node));
                        if let Err(reason) =
                            ledger.pledge(entry, victims, deadline, self.config.gang.timeout)
                        {
                            tracing::info!(gang = %commit.gang, pod = %format!("{}/{}", m.namespace, m.name), node = %placement.node, reason = %reason, "pipelined member no longer fits; nothing is evicted for its gang");
                            fits = false;
                            break;
                        }
                        expected.remove(&placement.node);
                        pledged.push(m.uid.clone());
                        continue;
                    }
                    let pod = book.members().get(&m.uid).map(|member| member.pod.clone());
                    let unchanged = match self.still_fits(
                        &ledger,
                        &expected,
                        &m.namespace,
                        pod.as_deref(),
                        placement,
                    ) {
                        Ok(unchanged) => unchanged,
                        Err(reason) => {
                            tracing::info!(gang = %commit.gang, pod = %format!("{}/{}", m.namespace, m.name), node = %placement.node, reason = %reason, "planned member no longer fits; the gang waits for the next cycle");
                            fits = false;
                            break;
                        }
                    };
                    ledger.add_pod(PodEntry::new(
                        m.uid.clone(),
                        m.namespace.clone(),
                        m.name.clone(),
                        placement.node.clone(),
                        placement.devices.clone(),
                        placement.init_count,
                        PodPhase::Reserved { deadline },
                    ));
                    ledger.mark_local_held(&m.uid, &placement.node, &placement.devices);
                    // Booked on a node exactly as the session saw it: the next member
                    // on it may trust the session too. A node someone else changed
                    // stays untrusted for the rest of the commit.
                    match ledger.node(&placement.node) {
                        Some(entry) if unchanged => {
                            expected.insert(placement.node.clone(), entry.generation);
                        }
                        _ => {
                            expected.remove(&placement.node);
                        }
                    }
                    booked.push(m.uid.clone());
                }
                if fits {
                    evicting = victims_here;
                    return true;
                }
                for uid in &booked {
                    ledger.mark_local_released(uid);
                }
                for uid in &pledged {
                    ledger.unpledge(uid);
                }
                // Nodes touched by the rollback changed: later gangs on them are
                // checked again rather than trusted.
                for m in &commit.members {
                    if let Some(p) = &m.placement {
                        expected.remove(&p.node);
                    }
                }
                overtaken.push((commit.gang.clone(), commit.members.len()));
                false
            });
        }
        let all_booked = overtaken.is_empty();
        for (gang, planned) in overtaken {
            if let Some(v) = outcome.verdicts.get_mut(&gang) {
                let v = std::sync::Arc::make_mut(v);
                v.ready = v.ready.saturating_sub(planned);
                if v.phase == GangPhase::Running && v.ready < v.min_member {
                    v.phase = GangPhase::Inqueue;
                }
                v.reason = Some("NotEnoughResources");
                v.message = Some(OVERTAKEN.to_string());
            }
        }
        all_booked
    }

    /// Whether a planned member may be booked: `Ok(true)` when the node is exactly
    /// as the session saw it (plus what this commit booked) and the namespace quota
    /// still has room; `Ok(false)` when the node changed but the member still fits
    /// there with the live usage (its GPUs chosen again); otherwise why not.
    fn still_fits(
        &self,
        ledger: &Ledger,
        expected: &HashMap<String, u64>,
        namespace: &str,
        pod: Option<&Pod>,
        placement: &mut TaskPlacement,
    ) -> Result<bool, String> {
        let entry = ledger.node(&placement.node).ok_or("the node is gone")?;
        if let Some(reason) = entry.unusable() {
            return Err(reason.to_string());
        }
        let quota = ledger.quota_headroom(namespace);
        if expected.get(&placement.node) == Some(&entry.generation) {
            let (mem, cores) =
                usage_totals(collapse_pod_usage(&placement.devices, placement.init_count).values());
            if quota.allows(mem, cores) {
                return Ok(true);
            }
        }
        let ctx = pod
            .map(|p| self.pod_context(p))
            .transpose()?
            .flatten()
            .ok_or("the pod asks for no vGPU any more")?;
        let fitted = fit_pod(
            entry.view(),
            &FitRequest {
                request: &ctx.request,
                policies: &ctx.policies,
                selectors: &ctx.selectors,
                quota,
            },
        )
        .map_err(|reason| format!("does not fit any more: {reason}"))?;
        placement.devices = fitted.devices;
        Ok(false)
    }

    /// One planning cycle: plan, commit, write statuses, watch deadlines.
    /// Returns how many gangs were committed.
    pub async fn run_gang_cycle(&self) -> usize {
        if !self.config.gang.enabled {
            return 0;
        }
        let mut memory = self.gang.planner.lock().await;
        let mut stages = CycleStages::default();
        self.settle_pipelined(&mut memory).await;
        stages.done("settle pipelined");
        let outcome = self.plan_and_reserve(&memory, None, &mut stages);
        for key in &outcome.enqueued {
            memory.inqueue.insert(key.clone());
        }
        let mut committed = 0;
        for commit in &outcome.commits {
            if self
                .publish_commit(commit, &mut memory.evictions)
                .await
                .is_ok()
            {
                committed += 1;
            }
        }
        stages.done("publish");
        let mut candidates = memory.kept.lock().planned_gated().clone();
        candidates.extend(
            outcome
                .commits
                .iter()
                .flat_map(|c| c.members.iter().map(|m| m.uid.clone())),
        );
        self.finish_interrupted_commits(&outcome.verdicts, &candidates)
            .await;
        stages.done("interrupted commits");
        // Gangs that are placed, finished or gone leave the enqueue memory.
        memory.inqueue.retain(|k| {
            outcome
                .verdicts
                .get(k)
                .is_some_and(|v| v.phase == GangPhase::Inqueue)
        });
        self.gang.barriers.retain(|k| {
            outcome
                .verdicts
                .get(k)
                .is_some_and(|v| v.phase != GangPhase::Completed)
        });
        stages.done("enqueue memory");
        self.gang_watchdog(&memory.book).await;
        stages.done("watchdog");
        self.release_broken_pins(&memory.book).await;
        stages.done("broken pins");
        let gang_counts = memory.queue_counts.follow(&outcome.verdicts).clone();
        self.write_statuses(&mut memory, &outcome, &gang_counts)
            .await;
        stages.done("statuses");
        self.tell_waiting_members(&mut memory, &outcome.verdicts)
            .await;
        stages.done("events");
        let mut verdicts = outcome.verdicts;
        name_native_groups(&self.gang.book.read(), &mut verdicts);
        *self.gang.view.write() = Arc::new(GangView {
            planned_at: Some(self.clock.wall().to_rfc3339()),
            queues: outcome.queues,
            gang_counts,
            gangs: verdicts.into(),
            pipelined: self.pipelined_view(),
            evictions: memory.evictions.recent.iter().cloned().collect(),
            configuration_notes: self.gang.conf.load().conf.notes(),
        });
        stages.done("view");
        stages.log();
        committed
    }
}

/// Marks the gangs Kubernetes' own PodGroups declared, so the queue views say
/// which API a waiting gang came from. Only those PodGroups are looked at: the
/// session leaves every verdict unmarked.
fn name_native_groups(book: &GangBook, verdicts: &mut Verdicts) {
    for ((namespace, name), group) in book.native_groups() {
        // A Volcano PodGroup of the same name declares the gang instead.
        let declared = book
            .groups()
            .get(&(namespace.clone(), name.clone()))
            .and_then(|g| g.native.as_ref());
        let (Some(native), Some(_)) = (declared, group.native.as_ref()) else {
            continue;
        };
        let key = GangKey {
            namespace: namespace.as_str().into(),
            name: name.as_str().into(),
            single: false,
        };
        if let Some(v) = verdicts.get_mut(&key) {
            let v = std::sync::Arc::make_mut(v);
            v.api = Some(native.api_version.clone());
            v.workload = native.workload.as_ref().map(|w| format!("{namespace}/{w}"));
            v.disruption_mode = Some(native.disruption_mode.clone());
        }
    }
}

/// Members being evicted whose GPUs on `node` are still booked: a pipelined
/// member placed on the room they free waits for them too.
fn leaving_on<'a>(
    book: &'a GangBook,
    ledger: &'a Ledger,
    node: &'a str,
) -> impl Iterator<Item = String> + 'a {
    book.members()
        .values()
        .filter(|m| m.terminating)
        .filter(move |m| ledger.pod(&m.uid).is_some_and(|p| p.node == node))
        .map(|m| m.uid.clone())
}

#[cfg(test)]
#[path = "cycle_tests.rs"]
mod tests;
