//! The Node objects of a full-`Nodes` `/filter` (`nodeCacheCapable: false`).
//!
//! They come from the caller, not from the cluster: kube-scheduler's cache, which
//! may be older than the ledger's watch, or any client that can reach `/filter`.
//! So they are candidates, not truth:
//!
//! * a node the ledger knows is updated from the object only when the object's
//!   `resourceVersion` is newer than the one the ledger's entry was built from (the
//!   order the watch applies them in), and even then only to take capacity away:
//!   fewer slots, less memory or compute, a GPU gone or unhealthy, the node
//!   unusable. It never adds a GPU, raises a capacity or makes a GPU healthy again;
//!   that news comes from the cluster.
//! * a node the ledger does not know (a Cluster Autoscaler template node, as in
//!   HAMi's simulation path, or a name nobody registered) is fitted on its own
//!   registration with nothing booked on it, and answered without side effects: no
//!   reservation, no annotation, no event, and nothing remembered.

use super::registration;
use super::{FilterMode, PodContext, Scheduler};
use crate::device::model::GpuDevice;
use crate::extender::node_names::NodeNames;
use crate::extender::wire::{ExtenderArgs, ExtenderFilterResult, NodeItems};
use crate::fit::{FitRequest, Placement, fit_pod};
use crate::ledger::NodeEntry;
use k8s_openapi::api::core::v1::Node;
use std::collections::{BTreeMap, HashSet};

impl Scheduler {
    /// Takes from the request's Node objects what may be taken (see the module
    /// documentation) and returns the names of those the ledger does not know.
    pub(crate) fn consider_candidate_nodes(&self, nodes: &NodeItems) -> HashSet<String> {
        let mut unknown = HashSet::new();
        for object in &nodes.items {
            let node = object.node();
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            let known_version = match self.ledger.read().node(name) {
                None => {
                    unknown.insert(name.to_string());
                    continue;
                }
                Some(entry) => entry.source_version.clone(),
            };
            if is_newer(
                node.metadata.resource_version.as_deref(),
                known_version.as_deref(),
            ) {
                self.restrict_node(name, node);
            }
        }
        unknown
    }

    /// Applies a newer Node object to a known node, taking capacity away only.
    fn restrict_node(&self, name: &str, node: &Node) {
        let candidate = registration::node_entry(node, None);
        let ready = !self.config.check_device_plugin_health
            || registration::device_plugin_ready(
                node,
                &self.config.nvidia.resource_count_name,
                self.clock
                    .wall()
                    .with_timezone(&chrono::Local)
                    .naive_local(),
            );
        let mut ledger = self.ledger.write();
        let Some(known) = ledger.node(name) else {
            return;
        };
        let mut entry = restricted(known, candidate);
        if !ready {
            registration::apply_health(&mut entry, false);
        }
        entry.source_version = node.metadata.resource_version.as_deref().map(Box::from);
        ledger.upsert_node(name, entry);
    }

    /// Fits the pod on nodes the ledger does not know, each on its own registration
    /// with nothing booked on it, as HAMi's simulation path does. The answer names
    /// the node the pod would go to (every fitting node in `--filter-mode all`);
    /// `Err` carries the reasons when none fits.
    pub(crate) fn fit_template_nodes(
        &self,
        ctx: &PodContext,
        args: &ExtenderArgs,
        templates: &HashSet<String>,
    ) -> Result<ExtenderFilterResult, BTreeMap<String, String>> {
        if templates.is_empty() {
            return Err(BTreeMap::new());
        }
        let quota = self.ledger.read().quota_headroom(&ctx.namespace);
        let request = FitRequest {
            request: &ctx.request,
            policies: &ctx.policies,
            selectors: &ctx.selectors,
            quota,
        };
        let mut fits: Vec<(String, Placement)> = Vec::new();
        let mut failed = BTreeMap::new();
        let objects = args.nodes.iter().flat_map(|n| &n.items);
        for object in objects.filter(|o| o.name().is_some_and(|n| templates.contains(n))) {
            let name = object.name().unwrap_or_default().to_string();
            let entry = registration::node_entry(object.node(), None).indexed();
            let fit = match entry.unusable() {
                Some(reason) => Err(reason.to_string()),
                None => fit_pod(entry.view(), &request).map_err(|e| e.to_string()),
            };
            match fit {
                Ok(placement) => fits.push((name, placement)),
                Err(reason) => {
                    failed.insert(name, reason);
                }
            }
        }
        if fits.is_empty() {
            return Err(failed);
        }
        fits.sort_by(|(na, a), (nb, b)| {
            ctx.policies
                .node
                .prefers(b.node_score, a.node_score)
                .then_with(|| na.cmp(nb))
        });
        if self.config.filter_mode == FilterMode::Single {
            fits.truncate(1);
        }
        let chosen: HashSet<&str> = fits.iter().map(|(n, _)| n.as_str()).collect();
        let items = args
            .nodes
            .iter()
            .flat_map(|n| &n.items)
            .filter(|o| o.name().is_some_and(|n| chosen.contains(n)))
            .cloned()
            .collect();
        self.metrics.filter_outcome("simulated");
        Ok(ExtenderFilterResult {
            nodes: Some(NodeItems { items }),
            ..Default::default()
        })
    }
}

/// The candidate names of a request without the nodes the ledger does not know.
pub(crate) fn known_names(names: &NodeNames, unknown: &HashSet<String>) -> NodeNames {
    names.iter().filter(|n| !unknown.contains(*n)).collect()
}

/// Whether a Node object's `resourceVersion` is newer than the one the ledger's
/// entry was built from. resourceVersions are opaque to clients, but the API
/// server's are increasing integers, and the watch applies them in that order;
/// anything that does not compare (a missing or non-numeric version) is not newer.
fn is_newer(candidate: Option<&str>, known: Option<&str>) -> bool {
    let parse = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
    matches!((parse(candidate), parse(known)), (Some(c), Some(k)) if c > k)
}

/// `candidate` limited to what `known` registered: only GPUs `known` has, each
/// with the smaller slot count, memory and compute, only the MIG profiles and
/// placements both list, healthy only if both say so,
/// with the known GPU's model, mode and topology; a node `known` found unusable
/// stays unusable, and cordons add up.
fn restricted(known: &NodeEntry, candidate: NodeEntry) -> NodeEntry {
    let devices = candidate
        .devices
        .iter()
        .filter_map(|c| {
            let k = known.devices.iter().find(|k| k.id == c.id)?;
            Some(GpuDevice {
                count: c.count.min(k.count),
                devmem: c.devmem.min(k.devmem),
                devcore: c.devcore.min(k.devcore),
                health: c.health && k.health,
                mig_profiles: crate::device::mig::restrict_profiles(
                    &k.mig_profiles,
                    &c.mig_profiles,
                ),
                ..k.clone()
            })
        })
        .collect();
    let (unusable_reason, registration_error) = match known.unusable_reason {
        Some(reason) => (Some(reason), known.registration_error.clone()),
        None => (
            candidate.unusable_reason,
            candidate.registration_error.clone(),
        ),
    };
    let mut cordoned = known.cordoned.clone();
    cordoned.extend(candidate.cordoned.iter().cloned());
    NodeEntry {
        devices,
        registration_error,
        unusable_reason,
        cordoned,
        // Decoded anew when the cluster sends its own object, whatever it holds.
        source_fingerprint: None,
        ..NodeEntry::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(id: &str, count: u32, devmem: u64, health: bool) -> GpuDevice {
        GpuDevice {
            id: id.into(),
            index: 0,
            count,
            devmem,
            devcore: 100,
            model: "NVIDIA H100 80GB HBM3".into(),
            numa: 0,
            health,
            mode: "hami-core".into(),
            pair_scores: BTreeMap::new(),
            mig_profiles: Vec::new(),
        }
    }

    fn entry(devices: Vec<GpuDevice>) -> NodeEntry {
        NodeEntry {
            devices,
            ..NodeEntry::default()
        }
    }

    #[test]
    fn a_candidate_only_takes_capacity_away() {
        let known = entry(vec![
            gpu("GPU-a", 10, 81559, false),
            gpu("GPU-b", 10, 81559, true),
        ]);
        let mut bigger = gpu("GPU-a", 60, 120_000, true);
        bigger.model = "NVIDIA B200".into();
        let candidate = entry(vec![
            bigger,
            gpu("GPU-b", 4, 40000, true),
            gpu("GPU-new", 10, 81559, true),
        ]);
        let merged = restricted(&known, candidate);
        assert_eq!(
            merged.devices,
            vec![gpu("GPU-a", 10, 81559, false), gpu("GPU-b", 4, 40000, true)]
        );
    }

    #[test]
    fn an_unusable_node_stays_unusable() {
        let mut known = entry(vec![gpu("GPU-a", 10, 81559, true)]);
        known.unusable_reason = Some(registration::NODE_DEVICE_PLUGIN_NOT_READY);
        let merged = restricted(&known, entry(vec![gpu("GPU-a", 10, 81559, true)]));
        assert_eq!(
            merged.unusable_reason,
            Some(registration::NODE_DEVICE_PLUGIN_NOT_READY)
        );
    }

    #[test]
    fn only_a_numerically_newer_version_is_newer() {
        assert!(is_newer(Some("12"), Some("11")));
        assert!(!is_newer(Some("11"), Some("12")));
        assert!(!is_newer(Some("12"), Some("12")));
        assert!(!is_newer(Some("12"), None));
        assert!(!is_newer(None, Some("1")));
        assert!(!is_newer(Some("x"), Some("1")));
    }
}
