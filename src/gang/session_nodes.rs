//! GPU usage as one planning cycle sees it: the ledger plus what the cycle has
//! tentatively placed. The usable nodes are listed once per cycle and a node's
//! usage is copied only when the cycle places a pod on it, so a cycle over
//! thousands of nodes costs a scan per member, and a discarded statement is
//! undone exactly.

use crate::device::model::PodDevices;
use crate::fit::{FitRequest, NodeView, Placement, QuotaHeadroom, fit_pod, node_score};
use crate::ledger::{Ledger, NodeEntry};
use crate::scheduler::PodContext;
use crate::scheduler::registration::unusable_reason;
use crate::usage::{GpuUsage, collapse_pod_usage, usage_totals};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashMap};

/// One tentative placement's usage, kept to undo it.
#[derive(Debug, Clone)]
pub struct PlacedUsage {
    node: usize,
    namespace: String,
    usage: Vec<(String, GpuUsage)>,
}

/// The ledger seen through the cycle's tentative placements.
pub struct SessionNodes<'a> {
    ledger: &'a Ledger,
    /// Usable nodes, sorted by name; listed on first use, so a cycle with nothing
    /// to place never walks the cluster.
    nodes: Vec<(&'a String, &'a NodeEntry)>,
    /// Position of each usable node in `nodes`.
    index: FxHashMap<&'a str, usize>,
    /// Usage and node score of the nodes the cycle placed pods on, by position.
    changed: Vec<Option<(Vec<GpuUsage>, f64)>>,
    listed: bool,
    namespace_usage: HashMap<String, (u64, u64)>,
}

impl<'a> SessionNodes<'a> {
    /// A view with nothing placed yet.
    pub fn new(ledger: &'a Ledger) -> Self {
        Self {
            ledger,
            nodes: Vec::new(),
            index: FxHashMap::default(),
            changed: Vec::new(),
            listed: false,
            namespace_usage: HashMap::new(),
        }
    }

    fn list(&mut self) {
        if self.listed {
            return;
        }
        self.listed = true;
        self.nodes = self
            .ledger
            .nodes()
            .into_iter()
            .filter(|(_, e)| unusable_reason(e).is_none())
            .collect();
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.as_str(), i))
            .collect();
        self.changed = vec![None; self.nodes.len()];
    }

    /// The ledger underneath.
    pub fn ledger(&self) -> &'a Ledger {
        self.ledger
    }

    fn usage_of(&self, i: usize) -> &[GpuUsage] {
        match &self.changed[i] {
            Some((u, _)) => u,
            None => &self.nodes[i].1.usage,
        }
    }

    fn score_of(&self, i: usize) -> f64 {
        match &self.changed[i] {
            Some((_, score)) => *score,
            None => self.nodes[i].1.score,
        }
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

    fn fit(&self, ctx: &PodContext, i: usize, quota: QuotaHeadroom) -> Result<Placement, String> {
        let entry = self.nodes[i].1;
        fit_pod(
            NodeView {
                usage: self.usage_of(i),
                ..entry.view()
            },
            &FitRequest {
                request: &ctx.request,
                policies: &ctx.policies,
                selectors: &ctx.selectors,
                quota,
            },
        )
    }

    /// The best node for the pod by its node policy (ties: the smaller name), as
    /// `/filter` would choose over every usable node; on failure the reasons per
    /// node.
    pub fn choose(
        &mut self,
        ctx: &PodContext,
    ) -> Result<(String, Placement), BTreeMap<String, String>> {
        self.list();
        let quota = self.quota(&ctx.namespace);
        let better = |a: usize, b: usize| {
            ctx.policies
                .node
                .prefers(self.score_of(b), self.score_of(a))
                .then_with(|| self.nodes[a].0.cmp(self.nodes[b].0))
        };
        // Usually the best node fits: one pass finds it; sorting thousands of
        // nodes for every member would dominate a cycle.
        if let Some(best) = (0..self.nodes.len()).min_by(|a, b| better(*a, *b))
            && let Ok(p) = self.fit(ctx, best, quota)
        {
            return Ok((self.nodes[best].0.clone(), p));
        }
        let mut ranked: Vec<usize> = (0..self.nodes.len()).collect();
        ranked.sort_by(|a, b| better(*a, *b));
        let mut failed = BTreeMap::new();
        for i in ranked {
            match self.fit(ctx, i, quota) {
                Ok(p) => return Ok((self.nodes[i].0.clone(), p)),
                Err(reason) => {
                    failed.insert(self.nodes[i].0.clone(), reason);
                }
            }
        }
        // Nodes the cycle cannot use at all, with their reasons.
        for (name, entry) in self.ledger.nodes() {
            if let Some(reason) = unusable_reason(entry) {
                failed.insert(name.clone(), reason.to_string());
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
        self.list();
        let usage: Vec<(String, GpuUsage)> = collapse_pod_usage(devices, init_count)
            .into_iter()
            .map(|(uuid, u)| (uuid.to_string(), u))
            .collect();
        let i = self.index.get(node).copied().unwrap_or(usize::MAX);
        self.apply(i, namespace, &usage, true);
        PlacedUsage {
            node: i,
            namespace: namespace.to_string(),
            usage,
        }
    }

    /// Undoes a [`SessionNodes::place`].
    pub fn unplace(&mut self, placed: &PlacedUsage) {
        self.apply(placed.node, &placed.namespace, &placed.usage, false);
    }

    fn apply(&mut self, i: usize, namespace: &str, usage: &[(String, GpuUsage)], add: bool) {
        if let Some((_, entry)) = self.nodes.get(i).copied() {
            let (slots, score) =
                self.changed[i].get_or_insert_with(|| (entry.usage.clone(), entry.score));
            for (uuid, u) in usage {
                if let Some(d) = entry.devices.iter().position(|d| *d.id == **uuid) {
                    if add {
                        slots[d].add(u);
                    } else {
                        slots[d].sub(u);
                    }
                }
            }
            *score = node_score(&entry.devices, slots);
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
