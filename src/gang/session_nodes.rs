//! GPU usage as one planning cycle sees it: the ledger plus what the cycle has
//! tentatively placed. Copy-on-write per node, so a cycle over thousands of nodes
//! copies only the nodes it touches, and a discarded statement is undone exactly.

use crate::device::model::PodDevices;
use crate::fit::{FitRequest, NodeView, Placement, QuotaHeadroom, fit_pod, node_score};
use crate::ledger::Ledger;
use crate::scheduler::PodContext;
use crate::scheduler::registration::{NODE_UNREGISTERED, unusable_reason};
use crate::usage::{GpuUsage, collapse_pod_usage, usage_totals};
use std::collections::{BTreeMap, HashMap};

/// One tentative placement's usage, kept to undo it.
#[derive(Debug, Clone)]
pub struct PlacedUsage {
    node: String,
    namespace: String,
    usage: Vec<(String, GpuUsage)>,
}

/// The ledger seen through the cycle's tentative placements.
pub struct SessionNodes<'a> {
    ledger: &'a Ledger,
    usage: HashMap<String, Vec<GpuUsage>>,
    namespace_usage: HashMap<String, (u64, u64)>,
}

impl<'a> SessionNodes<'a> {
    /// A view with nothing placed yet.
    pub fn new(ledger: &'a Ledger) -> Self {
        Self {
            ledger,
            usage: HashMap::new(),
            namespace_usage: HashMap::new(),
        }
    }

    /// The ledger underneath.
    pub fn ledger(&self) -> &'a Ledger {
        self.ledger
    }

    fn usage_of(&self, node: &str) -> Option<&[GpuUsage]> {
        if let Some(u) = self.usage.get(node) {
            return Some(u);
        }
        self.ledger.node(node).map(|e| e.usage.as_slice())
    }

    fn score_of(&self, node: &str) -> Option<f64> {
        let entry = self.ledger.node(node)?;
        Some(match self.usage.get(node) {
            Some(u) => node_score(&entry.devices, u),
            None => entry.score,
        })
    }

    fn quota(&self, namespace: &str) -> QuotaHeadroom {
        let mut q = self.ledger.quota_headroom(namespace);
        if let Some((mem, cores)) = self.namespace_usage.get(namespace) {
            if let Some((_, used)) = q.memory.as_mut() {
                *used = used.saturating_add(*mem);
            }
            if let Some((_, used)) = q.cores.as_mut() {
                *used = used.saturating_add(*cores);
            }
        }
        q
    }

    /// Fits the pod on one node as the cycle sees it.
    pub fn fit(&self, ctx: &PodContext, node: &str) -> Result<Placement, String> {
        let Some(entry) = self.ledger.node(node) else {
            return Err(NODE_UNREGISTERED.to_string());
        };
        if let Some(reason) = unusable_reason(entry) {
            return Err(reason.to_string());
        }
        let usage = self.usage_of(node).unwrap_or(&entry.usage);
        fit_pod(
            NodeView {
                devices: &entry.devices,
                usage,
                cordoned: &entry.cordoned,
                is_vendor: &entry.is_vendor,
                model_lower: &entry.model_lower,
            },
            &FitRequest {
                request: &ctx.request,
                policies: &ctx.policies,
                selectors: &ctx.selectors,
                quota: self.quota(&ctx.namespace),
            },
        )
    }

    /// The best node for the pod by its node policy (ties: the smaller name), as
    /// `/filter` would choose over every registered node; on failure the reasons
    /// per node.
    pub fn choose(
        &self,
        ctx: &PodContext,
    ) -> Result<(String, Placement), BTreeMap<String, String>> {
        let mut ranked: Vec<(f64, &String)> = self
            .ledger
            .node_names()
            .filter_map(|n| Some((self.score_of(n)?, n)))
            .collect();
        ranked.sort_by(|(sa, na), (sb, nb)| {
            ctx.policies.node.prefers(*sb, *sa).then_with(|| na.cmp(nb))
        });
        let mut failed = BTreeMap::new();
        for (_, name) in ranked {
            match self.fit(ctx, name) {
                Ok(p) => return Ok((name.clone(), p)),
                Err(reason) => {
                    failed.insert(name.clone(), reason);
                }
            }
        }
        Err(failed)
    }

    /// Places a pod's devices tentatively.
    pub fn place(
        &mut self,
        namespace: &str,
        node: &str,
        devices: &PodDevices,
        init_count: usize,
    ) -> PlacedUsage {
        let usage: Vec<(String, GpuUsage)> = collapse_pod_usage(devices, init_count)
            .into_iter()
            .map(|(uuid, u)| (uuid.to_string(), u))
            .collect();
        self.apply(node, namespace, &usage, true);
        PlacedUsage {
            node: node.to_string(),
            namespace: namespace.to_string(),
            usage,
        }
    }

    /// Undoes a [`SessionNodes::place`].
    pub fn unplace(&mut self, placed: &PlacedUsage) {
        self.apply(&placed.node, &placed.namespace, &placed.usage, false);
    }

    fn apply(&mut self, node: &str, namespace: &str, usage: &[(String, GpuUsage)], add: bool) {
        if let Some(entry) = self.ledger.node(node) {
            let slots = self
                .usage
                .entry(node.to_string())
                .or_insert_with(|| entry.usage.clone());
            for (uuid, u) in usage {
                if let Some(i) = entry.devices.iter().position(|d| *d.id == **uuid) {
                    if add {
                        slots[i].add(u);
                    } else {
                        slots[i].sub(u);
                    }
                }
            }
        }
        let (mem, cores) = usage_totals(usage.iter().map(|(_, u)| u));
        let ns = self
            .namespace_usage
            .entry(namespace.to_string())
            .or_default();
        if add {
            ns.0 = ns.0.saturating_add(mem);
            ns.1 = ns.1.saturating_add(cores);
        } else {
            ns.0 = ns.0.saturating_sub(mem);
            ns.1 = ns.1.saturating_sub(cores);
        }
    }
}
