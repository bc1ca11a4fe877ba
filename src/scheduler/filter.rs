//! `/filter` and `/prioritize`.

use super::candidate_nodes::known_names;
use super::registration::unusable_reason;
use super::{FilterMode, PodContext, Scheduler};
use crate::cluster::api::EventType;
use crate::device::allocation_codec::encode_pod_devices;
use crate::device::model::PodDevices;
use crate::extender::node_names::NodeNames;
use crate::extender::wire::{ExtenderArgs, ExtenderFilterResult, HostPriority, NodeItems};
use crate::fit::{FitRequest, Placement, QuotaHeadroom, fit_pod};
use crate::ledger::{Ledger, PodEntry, PodPhase};
use crate::rank_index::may_fit;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::time::Instant;

/// Attempts at check-and-reserve before answering with an error: another filter may
/// take the chosen GPUs between the decision and the reservation.
const RESERVE_ATTEMPTS: usize = 8;

/// Nodes that fit, with their placements, and the reasons for the rest.
pub(crate) struct Evaluation {
    pub fits: Vec<(String, Placement)>,
    pub failed: BTreeMap<String, String>,
}

impl Scheduler {
    /// Fits the pod on one node against the ledger as it is.
    pub(crate) fn fit_on(
        &self,
        ledger: &Ledger,
        ctx: &PodContext,
        node: &str,
    ) -> Result<Placement, String> {
        self.fit_with_quota(ledger, ctx, node, ledger.quota_headroom(&ctx.namespace))
    }

    fn fit_with_quota(
        &self,
        ledger: &Ledger,
        ctx: &PodContext,
        node: &str,
        quota: QuotaHeadroom,
    ) -> Result<Placement, String> {
        let Some(entry) = ledger.node(node) else {
            return Err(super::registration::NODE_UNREGISTERED.to_string());
        };
        if let Some(reason) = unusable_reason(entry) {
            return Err(reason.to_string());
        }
        let request = FitRequest {
            request: &ctx.request,
            policies: &ctx.policies,
            selectors: &ctx.selectors,
            quota,
        };
        fit_pod(entry.view(), &request)
    }

    /// Fits the pod on every candidate (filter mode `all`, prioritize, failures).
    pub(crate) fn evaluate(&self, ctx: &PodContext, names: &NodeNames) -> Evaluation {
        let ledger = self.ledger.read();
        let quota = ledger.quota_headroom(&ctx.namespace);
        let mut fits = Vec::new();
        let mut failed = BTreeMap::new();
        for name in names.iter() {
            match self.fit_with_quota(&ledger, ctx, name, quota) {
                Ok(p) => fits.push((name.to_string(), p)),
                Err(reason) => {
                    failed.insert(name.to_string(), reason);
                }
            }
        }
        Evaluation { fits, failed }
    }

    /// The best node by the pod's node policy (ties: the smaller name) that fits.
    ///
    /// The node score depends only on current usage, so candidates are ranked by it
    /// first (read from the ledger's compact ranking index, kept current with usage)
    /// and fitted best-first; the first that fits is the answer. Nodes without
    /// enough open GPUs for the request ([`may_fit`]) are not ranked at all. Only when none
    /// fits is every node fitted, for the per-node reasons. Same answer as fitting
    /// everything, at a fraction of the cost.
    pub(crate) fn choose_node(
        &self,
        ctx: &PodContext,
        names: &NodeNames,
    ) -> Result<(String, Placement), BTreeMap<String, String>> {
        {
            let ledger = self.ledger.read();
            let quota = ledger.quota_headroom(&ctx.namespace);
            let candidates = || {
                names.iter().filter_map(|name| {
                    let rank = ledger.rank(name)?;
                    (rank.usable && may_fit(rank.rooms, &ctx.request)).then_some((rank.score, name))
                })
            };
            let order = |(sa, na): &(f64, &str), (sb, nb): &(f64, &str)| {
                ctx.policies.node.prefers(*sb, *sa).then_with(|| na.cmp(nb))
            };
            // Usually the best node fits: find it in one pass, keeping nothing.
            let best = candidates().min_by(order);
            if let Some((_, name)) = best
                && let Ok(p) = self.fit_with_quota(&ledger, ctx, name, quota)
            {
                return Ok((name.to_string(), p));
            }
            // Otherwise rank them all and fit down the list.
            let mut ranked: Vec<(f64, &str)> = candidates().collect();
            ranked.sort_by(order);
            for (_, name) in ranked.into_iter().skip(usize::from(best.is_some())) {
                if let Ok(p) = self.fit_with_quota(&ledger, ctx, name, quota) {
                    return Ok((name.to_string(), p));
                }
            }
        }
        Err(self.evaluate(ctx, names).failed)
    }

    /// Check-and-reserve as one step under the ledger's write lock.
    pub(crate) fn reserve(&self, ctx: &PodContext, node: &str) -> Result<Placement, String> {
        let mut ledger = self.ledger.write();
        let placement = self.fit_on(&ledger, ctx, node)?;
        ledger.add_pod(PodEntry::new(
            ctx.uid.clone(),
            ctx.namespace.clone(),
            ctx.name.clone(),
            node.to_string(),
            placement.devices.clone(),
            ctx.request.init_count,
            PodPhase::Reserved {
                deadline: Instant::now() + self.config.reservation_ttl,
            },
        ));
        ledger.mark_local_held(&ctx.uid, node, &placement.devices);
        Ok(placement)
    }

    /// Writes the decision onto the pod; rolls the reservation back on failure.
    pub(crate) async fn publish_allocation(
        &self,
        ctx: &PodContext,
        node: &str,
        devices: &PodDevices,
    ) -> Result<(), String> {
        let mut patch = super::allocation_patch(node, devices);
        // A member placed again outside its gang plan keeps no plan deadline.
        if self.config.gang.enabled {
            patch
                .annotations
                .insert(crate::gang::PLAN_DEADLINE.to_string(), None);
        }
        if let Err(e) = self
            .api
            .patch_pod_metadata(&ctx.namespace, &ctx.name, &patch)
            .await
        {
            self.ledger.write().mark_local_released(&ctx.uid);
            return Err(format!("patch pod {}/{}: {e}", ctx.namespace, ctx.name));
        }
        Ok(())
    }

    /// The node and GPUs `/filter` would choose now, without reserving anything
    /// (`Ok(None)`: nothing fits; `Err`: the pod is invalid or asks for no vGPU).
    pub fn decide(
        &self,
        pod: &Pod,
        names: &NodeNames,
    ) -> Result<Option<(String, Placement)>, String> {
        let ctx = self.pod_context(pod)?.ok_or("pod asks for no vGPU")?;
        Ok(self.choose_node(&ctx, names).ok())
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
    pub async fn filter(&self, args: ExtenderArgs) -> ExtenderFilterResult {
        let Some(pod) = args.pod.as_ref() else {
            return ExtenderFilterResult::error("extender args missing pod");
        };
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
            if had_reservation {
                self.clear_allocation(&ctx).await;
            }
            let mut eval = self.evaluate(&ctx, &names);
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
            let node = match self.choose_node(&ctx, &names) {
                Ok((node, _)) => node,
                Err(mut failed) => {
                    if had_reservation {
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
            if let Err(e) = self
                .publish_allocation(&ctx, &node, &placement.devices)
                .await
            {
                self.metrics.filter_outcome("error");
                self.event(
                    (&ctx.namespace, &ctx.name, &ctx.uid),
                    EventType::Warning,
                    "FilteringFailed",
                    e.clone(),
                )
                .await;
                return ExtenderFilterResult::error(e);
            }
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
        rejected(failed)
    }

    /// `/prioritize`: 0..=10 per node by the pod's node policy; nodes that do not fit
    /// score 0. Pods without vGPU requests get an empty list (no opinion).
    pub fn prioritize(&self, args: ExtenderArgs) -> Result<Vec<HostPriority>, String> {
        let pod = args.pod.as_ref().ok_or("extender args missing pod")?;
        let Some(ctx) = self.pod_context(pod)? else {
            return Ok(Vec::new());
        };
        let names = args.candidate_names();
        let ledger = self.ledger.read();
        Ok(names
            .iter()
            .map(|host| {
                let score = match self.fit_on(&ledger, &ctx, host) {
                    Ok(p) => ctx.policies.node.extender_score(p.node_score),
                    Err(_) => 0,
                };
                HostPriority {
                    host: host.to_string(),
                    score,
                }
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
