//! `/filter` and `/prioritize`.

use super::bind_patch::carries_allocation;
use super::candidate_nodes::known_names;
use super::{FilterMode, PodContext, Scheduler};
use crate::cluster::api::EventType;
use crate::device::allocation_codec::encode_pod_devices;
use crate::extender::node_names::NodeNames;
use crate::extender::wire::{ExtenderArgs, ExtenderFilterResult, HostPriority, NodeItems};
use crate::fit::{FitRequest, Placement, QuotaHeadroom, fit_pod};
use crate::ledger::{Ledger, NODE_UNREGISTERED, PodEntry, PodPhase};
use crate::node_metrics::MeasuredUsage;
use crate::placement::{
    NodeFacts, NodeJudge, NodeRejection, NodeSource, RankFacts, RankMemo, TaskFacts, choose_node,
    evaluate_all, in_words,
};
use crate::rank_index::may_fit;
use crate::resources::{Resources, VgpuDims, pod_requests};
use crate::volcano::framework::charge::{asks_share_of_card, largest_card_mib, request_charge};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Attempts at check-and-reserve before answering with an error: another filter may
/// take the chosen GPUs between the decision and the reservation.
const RESERVE_ATTEMPTS: usize = 8;

/// A node the load book has no figures for.
static NO_RESOURCES: Resources = Resources::new();

/// Nodes that fit, with their placements, and the reasons for the rest.
pub(crate) struct Evaluation {
    pub fits: Vec<(String, Placement)>,
    pub failed: BTreeMap<String, String>,
}

/// The candidates of an extender call, as the ledger has them.
pub(super) struct LedgerCandidates<'a> {
    pub(super) ledger: &'a Ledger,
    pub(super) names: &'a NodeNames,
    /// When the request is judged (how old each node's measured usage is).
    now: DateTime<Utc>,
}

impl<'a> LedgerCandidates<'a> {
    pub(super) fn new(scheduler: &Scheduler, ledger: &'a Ledger, names: &'a NodeNames) -> Self {
        Self {
            ledger,
            names,
            now: scheduler.clock.wall(),
        }
    }
}

impl NodeSource for LedgerCandidates<'_> {
    fn len(&self) -> usize {
        self.names.len()
    }

    fn name(&self, i: usize) -> &str {
        self.names.get(i)
    }

    fn rank(&self, i: usize, request: &crate::device::request::PodRequest) -> Option<RankFacts> {
        let rank = self.ledger.rank(self.names.get(i))?;
        Some(RankFacts {
            score: rank.score,
            usable: rank.usable,
            may_fit: rank.usable && may_fit(rank.rooms, request),
        })
    }

    fn fit(&self, i: usize, request: &FitRequest<'_>) -> Result<Placement, NodeRejection> {
        fit_entry(self.ledger, self.names.get(i), request)
    }

    fn quota(&self, namespace: &str) -> QuotaHeadroom {
        self.ledger.quota_headroom(namespace)
    }

    fn facts(&self, i: usize) -> Option<NodeFacts<'_>> {
        let name = self.names.get(i);
        let entry = self.ledger.node(name)?;
        let load = self.ledger.load().get(name);
        Some(NodeFacts {
            name,
            gpus: entry.view(),
            allocatable: load.map_or(&NO_RESOURCES, |l| &l.allocatable),
            requested: load.map_or(&NO_RESOURCES, |l| &l.requested),
            traits: load.and_then(|l| l.traits.as_deref()),
            measured: MeasuredUsage {
                entry: self.ledger.load().measured().lookup(name),
                now: self.now,
            },
        })
    }
}

/// Fits a pod on a node as the ledger has it, or says why not.
fn fit_entry(
    ledger: &Ledger,
    node: &str,
    request: &FitRequest<'_>,
) -> Result<Placement, NodeRejection> {
    let Some(entry) = ledger.node(node) else {
        return Err(NodeRejection::Unusable(NODE_UNREGISTERED));
    };
    if let Some(reason) = entry.unusable() {
        return Err(NodeRejection::Unusable(reason));
    }
    fit_pod(entry.view(), request).map_err(NodeRejection::Fit)
}

/// What plugins see of the pod: its requests plus its vGPU estimate, and its queue
/// (computed only when some plugin filters or scores nodes).
pub(super) struct PodFacts {
    resreq: Resources,
    dims: VgpuDims,
    queue: Option<String>,
}

impl PodFacts {
    pub(super) fn of(
        scheduler: &Scheduler,
        judge: &dyn NodeJudge,
        pod: Option<&Pod>,
        ctx: &PodContext,
    ) -> Self {
        let dims = scheduler.vgpu_dims();
        let mut resreq = Resources::default();
        let mut queue = None;
        if judge.filters() || judge.scores() {
            if let Some(pod) = pod {
                resreq = pod_requests(pod);
                queue = scheduler.queue_of_pod(pod);
            }
            let largest_card = if asks_share_of_card(ctx) {
                let ledger = scheduler.ledger.read();
                largest_card_mib(ledger.nodes().into_iter().map(|(_, e)| e))
            } else {
                0
            };
            resreq.add(&request_charge(&dims, ctx, largest_card));
        }
        Self {
            resreq,
            dims,
            queue,
        }
    }

    pub(super) fn task<'a>(&'a self, ctx: &'a PodContext, pod: Option<&'a Pod>) -> TaskFacts<'a> {
        TaskFacts {
            namespace: &ctx.namespace,
            name: &ctx.name,
            gpu: Some(ctx),
            resreq: &self.resreq,
            pod,
            queue: self.queue.as_deref(),
            dims: &self.dims,
            pod_affinity: None,
            preferred_pod_affinity: None,
        }
    }
}

impl Scheduler {
    /// Fits the pod on one node against the ledger as it is.
    pub(crate) fn fit_on(
        &self,
        ledger: &Ledger,
        ctx: &PodContext,
        node: &str,
    ) -> Result<Placement, NodeRejection> {
        fit_entry(
            ledger,
            node,
            &FitRequest {
                request: &ctx.request,
                policies: &ctx.policies,
                selectors: &ctx.selectors,
                quota: ledger.quota_headroom(&ctx.namespace),
            },
        )
    }

    /// Judges the pod on every candidate.
    #[cfg(test)]
    pub(crate) fn evaluate(&self, ctx: &PodContext, names: &NodeNames) -> Evaluation {
        self.evaluate_pod(None, ctx, names)
    }

    fn evaluate_pod(&self, pod: Option<&Pod>, ctx: &PodContext, names: &NodeNames) -> Evaluation {
        let (fits, failed) = self.on_candidates(pod, ctx, names, |source, task, judge| {
            evaluate_all(source, ctx, task, judge)
        });
        Evaluation {
            fits,
            failed: in_words(failed),
        }
    }

    /// Runs `judge_pod` on the candidates `names` as one reading of the ledger
    /// shows them, with the pod's facts and the plugins' judge in force.
    fn on_candidates<R>(
        &self,
        pod: Option<&Pod>,
        ctx: &PodContext,
        names: &NodeNames,
        judge_pod: impl FnOnce(&LedgerCandidates<'_>, &TaskFacts<'_>, &dyn NodeJudge) -> R,
    ) -> R {
        let conf = self.node_judge();
        let judge = conf.judge();
        let facts = PodFacts::of(self, judge, pod, ctx);
        let ledger = self.ledger.read();
        let source = LedgerCandidates::new(self, &ledger, names);
        judge_pod(&source, &facts.task(ctx, pod), judge)
    }

    /// The best node that passes the plugins' predicates and fits, by the pod's node
    /// policy plus the plugins' node scores (ties: the smaller name), through the
    /// node choice the planner shares; on failure every candidate's reason.
    pub(crate) fn choose_node(
        &self,
        pod: Option<&Pod>,
        ctx: &PodContext,
        names: &NodeNames,
    ) -> Result<(String, Placement), BTreeMap<String, String>> {
        self.on_candidates(pod, ctx, names, |source, task, judge| {
            choose_node(source, ctx, task, judge)
                .map(|c| (c.node, c.placement))
                .map_err(in_words)
        })
    }

    /// The node `/filter` reserves on: the one [`Scheduler::choose_node`] would
    /// choose, or a spare one when that one is busy with binds (see
    /// `busy_nodes`), both judged on one reading of the ledger in which each
    /// candidate is looked up once.
    fn choose_filter_node(
        &self,
        pod: Option<&Pod>,
        ctx: &PodContext,
        names: &NodeNames,
    ) -> Result<String, BTreeMap<String, String>> {
        self.on_candidates(pod, ctx, names, |in_ledger, task, judge| {
            let candidates = RankMemo::new(in_ledger, &ctx.request);
            let choice = choose_node(&candidates, ctx, task, judge).map_err(in_words)?;
            let spare = self.spare_node(
                &candidates,
                ctx,
                task,
                judge,
                &choice.node,
                choice.placement.node_score,
            );
            Ok(spare.unwrap_or(choice.node))
        })
    }

    /// Check-and-reserve as one step under the ledger's write lock.
    pub(crate) fn reserve(&self, ctx: &PodContext, node: &str) -> Result<Placement, String> {
        let mut ledger = self.ledger.write();
        let placement = self.fit_on(&ledger, ctx, node).map_err(|e| e.to_string())?;
        ledger.add_pod(PodEntry::new(
            ctx.uid.clone(),
            ctx.namespace.clone(),
            ctx.name.clone(),
            node.to_string(),
            placement.devices.clone(),
            ctx.request.init_count,
            PodPhase::Reserved {
                deadline: self.clock.now() + self.config.reservation_ttl,
            },
        ));
        ledger.mark_local_held(&ctx.uid, node, &placement.devices);
        Ok(placement)
    }

    /// The node and GPUs `/filter` would choose now, without reserving anything
    /// (`Ok(None)`: nothing fits; `Err`: the pod is invalid or asks for no vGPU).
    pub fn decide(
        &self,
        pod: &Pod,
        names: &NodeNames,
    ) -> Result<Option<(String, Placement)>, String> {
        let ctx = self.pod_context(pod)?.ok_or("pod asks for no vGPU")?;
        Ok(self.choose_node(Some(pod), &ctx, names).ok())
    }

    /// Clears a pod's allocation annotations after we released its reservation.
    pub(crate) async fn clear_allocation(&self, ctx: &PodContext) {
        if let Err(e) = self
            .api
            .patch_pod_metadata(&ctx.namespace, &ctx.name, &super::clear_allocation_patch())
            .await
        {
            tracing::debug!(pod = %ctx.name, error = %e, "could not clear allocation annotations");
        }
    }

    /// `/filter`.
    pub async fn filter(&self, mut args: ExtenderArgs) -> ExtenderFilterResult {
        // Shared, not cloned, with the copy `/bind` reads (`pod_copies`).
        let Some(shared) = args.pod.take().map(Arc::new) else {
            return ExtenderFilterResult::error("extender args missing pod");
        };
        let pod: &Pod = &shared;
        let ctx = match self.pod_context(pod) {
            Ok(Some(ctx)) => ctx,
            Ok(None) => {
                self.metrics.filter_outcome("passthrough");
                return ExtenderFilterResult {
                    nodes: args.nodes,
                    node_names: args.node_names.map(|n| n.to_vec()),
                    ..Default::default()
                };
            }
            Err(e) => {
                self.metrics.filter_outcome("error");
                return ExtenderFilterResult::error(e);
            }
        };
        let full_nodes = args.nodes.is_some() && args.node_names.is_none();
        // Full Node objects are candidates, not truth (see `candidate_nodes`); nodes
        // the ledger does not know are only simulated, never booked.
        let templates = match (&args.node_names, &args.nodes) {
            (None, Some(nodes)) => self.consider_candidate_nodes(nodes),
            _ => Default::default(),
        };
        let mut names = args.candidate_names();
        if !templates.is_empty() {
            names = std::borrow::Cow::Owned(known_names(&names, &templates));
            if names.is_empty() {
                return self
                    .fit_template_nodes(&ctx, &args, &templates)
                    .unwrap_or_else(rejected);
            }
        }
        self.api.remember_pod(pod).await;
        self.pod_copies
            .keep(&shared, self.clock.now(), self.config.reservation_ttl);
        self.trace_filtered(pod);
        // A pod that is bound (or being bound) keeps its GPUs: answer with its node
        // rather than dropping a booking the device plugin may already have used.
        let held = self
            .ledger
            .read()
            .pod(&ctx.uid)
            .filter(|p| !matches!(p.phase, PodPhase::Reserved { .. }))
            .map(|p| p.node.clone());
        if let Some(node) = held {
            if names.contains(&node) {
                return answer_nodes_for(full_nodes, &args, &[node]);
            }
            return ExtenderFilterResult::error(format!(
                "pod {}/{} already holds GPUs on node {node}",
                ctx.namespace, ctx.name
            ));
        }
        match self.gang_filter(pod, &ctx.uid, &names).await {
            super::gang::GangFilter::Usual => {}
            super::gang::GangFilter::Planned(node) => {
                self.metrics.filter_outcome("planned");
                return answer_nodes_for(full_nodes, &args, &[node]);
            }
            super::gang::GangFilter::Wait(reason) => {
                self.metrics.filter_outcome("gang-wait");
                let failed = names
                    .iter()
                    .map(|n| (n.to_string(), reason.clone()))
                    .collect();
                return rejected(failed);
            }
        }
        // A re-filter of the same pod replaces its earlier reservation; if nothing
        // fits now, the old annotations are cleared too.
        // (Looked at under the read lock: most pods are filtered once, and a write
        // lock on every filter would queue it behind every ranking in progress.)
        let had_reservation = self.ledger.read().pod(&ctx.uid).is_some();
        if had_reservation {
            self.ledger.write().mark_local_released(&ctx.uid);
        }

        let answer_nodes = |chosen: &[String]| answer_nodes_for(full_nodes, &args, chosen);

        if self.config.filter_mode == FilterMode::All {
            if had_reservation && carries_allocation(pod) {
                self.clear_allocation(&ctx).await;
            }
            let mut eval = self.evaluate_pod(Some(pod), &ctx, &names);
            if eval.fits.is_empty() {
                match self.fit_template_nodes(&ctx, &args, &templates) {
                    Ok(simulated) => return simulated,
                    Err(more) => eval.failed.extend(more),
                }
                return self.no_fit(&ctx, eval.failed).await;
            }
            let chosen: Vec<String> = eval.fits.iter().map(|(n, _)| n.clone()).collect();
            self.metrics.filter_outcome("fit");
            let mut result = answer_nodes(&chosen);
            result.failed_and_unresolvable_nodes = eval.failed.clone();
            result.failed_nodes = eval.failed;
            return result;
        }

        for _ in 0..RESERVE_ATTEMPTS {
            let node = match self.choose_filter_node(Some(pod), &ctx, &names) {
                Ok(node) => node,
                Err(mut failed) => {
                    if had_reservation && carries_allocation(pod) {
                        self.clear_allocation(&ctx).await;
                    }
                    match self.fit_template_nodes(&ctx, &args, &templates) {
                        Ok(simulated) => return simulated,
                        Err(more) => failed.extend(more),
                    }
                    return self.no_fit(&ctx, failed).await;
                }
            };
            let placement = match self.reserve(&ctx, &node) {
                Ok(p) => p,
                // Someone took the capacity since the decision: decide again.
                Err(_) => continue,
            };
            // Its bind follows: the next pod would queue behind it. The placement
            // reaches the pod with that bind's Binding, in the same write as the
            // bind phase and the node (see `bind_patch`).
            self.lock_handoff.placed(&node, self.clock.now());
            self.metrics.filter_outcome("fit");
            self.event(
                (&ctx.namespace, &ctx.name, &ctx.uid),
                EventType::Normal,
                "FilteringSucceed",
                format!(
                    "find fit node({node}), node score {:.2}, {} candidate nodes",
                    placement.node_score,
                    names.len()
                ),
            )
            .await;
            tracing::info!(pod = %format!("{}/{}", ctx.namespace, ctx.name), node = %node, devices = %encode_pod_devices(&placement.devices), "reserved GPUs");
            return answer_nodes(&[node]);
        }
        self.metrics.filter_outcome("error");
        ExtenderFilterResult::error(
            "GPUs kept being taken by concurrent placements; retry scheduling this pod",
        )
    }

    async fn no_fit(
        &self,
        ctx: &PodContext,
        failed: BTreeMap<String, String>,
    ) -> ExtenderFilterResult {
        self.metrics.filter_outcome("nofit");
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (node, reason) in &failed {
            by_reason.entry(reason).or_default().push(node);
        }
        let mut message = format!("no available node, {} nodes do not meet", failed.len());
        for (reason, nodes) in &by_reason {
            // A few names per reason, so that every reason fits in the event.
            let shown = nodes[..nodes.len().min(EVENT_NODES_PER_REASON)].join(",");
            let more = if nodes.len() > EVENT_NODES_PER_REASON {
                ",..."
            } else {
                ""
            };
            message.push_str(&format!("; {} nodes {reason}({shown}{more})", nodes.len()));
        }
        self.event(
            (&ctx.namespace, &ctx.name, &ctx.uid),
            EventType::Warning,
            "FilteringFailed",
            message,
        )
        .await;
        self.api.forget_pod(&ctx.namespace, &ctx.name).await;
        self.pod_copies.drop_copy(&ctx.uid);
        rejected(failed)
    }

    /// `/prioritize`: 0..=10 per node by the pod's node policy; nodes that do not fit
    /// score 0. With plugins that score nodes, the policy's preference plus their
    /// scores, scaled so the best node scores 10. Pods without vGPU requests get an
    /// empty list (no opinion).
    pub fn prioritize(&self, args: ExtenderArgs) -> Result<Vec<HostPriority>, String> {
        let pod = args.pod.as_ref().ok_or("extender args missing pod")?;
        let Some(ctx) = self.pod_context(pod)? else {
            return Ok(Vec::new());
        };
        let names = args.candidate_names();
        let conf = self.node_judge();
        let judge = conf.judge();
        let facts = PodFacts::of(self, judge, Some(pod), &ctx);
        let task = facts.task(&ctx, Some(pod));
        let ledger = self.ledger.read();
        let source = LedgerCandidates::new(self, &ledger, &names);
        let policy = ctx.policies.node;
        let scored: Vec<(String, Option<f64>)> = (0..source.len())
            .map(|i| {
                let host = source.name(i).to_string();
                let passes = !judge.filters()
                    || source
                        .facts(i)
                        .is_some_and(|n| judge.predicate(&task, &n).is_ok());
                let fit = passes
                    .then(|| self.fit_on(&ledger, &ctx, &host).ok())
                    .flatten();
                let score = fit.map(|p| {
                    if judge.scores() {
                        policy.preference(p.node_score)
                            + source.facts(i).map_or(0.0, |n| judge.score(&task, &n))
                    } else {
                        policy.extender_score(p.node_score) as f64
                    }
                });
                (host, score)
            })
            .collect();
        let best = scored.iter().filter_map(|(_, s)| *s).fold(0.0f64, f64::max);
        Ok(scored
            .into_iter()
            .map(|(host, score)| {
                let score = match score {
                    None => 0,
                    Some(s) if !judge.scores() => s as i64,
                    Some(_) if best <= 0.0 => 0,
                    Some(s) => (s / best * 10.0).round() as i64,
                };
                HostPriority { host, score }
            })
            .collect())
    }
}

/// Node names listed per reason in a `FilteringFailed` event.
const EVENT_NODES_PER_REASON: usize = 10;

/// Every candidate rejected, each in `FailedNodes` (HAMi's answer, which tools read)
/// and in `FailedAndUnresolvableNodes`, which kube-scheduler lets win for a node in
/// both: evicting pods cannot help a node that lacks GPUs (kube-scheduler does not
/// count them: the install marks the vGPU resources `ignoredByScheduler`, and this
/// extender has no preempt verb), so its preemption must not evict anything for
/// them. An extender preempt verb would have to revisit this.
fn rejected(failed: BTreeMap<String, String>) -> ExtenderFilterResult {
    ExtenderFilterResult {
        failed_and_unresolvable_nodes: failed.clone(),
        failed_nodes: failed,
        ..Default::default()
    }
}

/// The surviving nodes in the form the request used: objects for `Nodes`, names for
/// `NodeNames`.
fn answer_nodes_for(
    full_nodes: bool,
    args: &ExtenderArgs,
    chosen: &[String],
) -> ExtenderFilterResult {
    if full_nodes {
        // `--filter-mode all` may keep thousands of the nodes sent.
        let chosen: std::collections::HashSet<&str> = chosen.iter().map(String::as_str).collect();
        let items = args
            .nodes
            .as_ref()
            .map(|n| {
                n.items
                    .iter()
                    .filter(|i| i.name().is_some_and(|x| chosen.contains(x)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        ExtenderFilterResult {
            nodes: Some(NodeItems { items }),
            ..Default::default()
        }
    } else {
        ExtenderFilterResult {
            node_names: Some(chosen.to_vec()),
            ..Default::default()
        }
    }
}
