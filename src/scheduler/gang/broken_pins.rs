//! Members pinned to a node that can no longer take them. A pod that asks for no
//! vGPU is pinned to its planned node when its gate is lifted (`gang::pin`), and
//! a pod without gates can never be gated again nor have its node affinity
//! changed: if, before the pod is bound, that node is deleted, cordoned or tainted
//! against it, kube-scheduler will never place it; if a pod bound there since
//! repels it (or is repelled by it) through required pod anti-affinity,
//! kube-scheduler will not place it while that pod runs; if that node has had no
//! room for it for the gang timeout, kube-scheduler has kept it Pending all along
//! (`pins_without_room`). Such a pod is evicted (it
//! is still Pending, so no PodDisruptionBudget is consulted) for its controller to
//! recreate; the new pod is gated by the webhook and planned again with its gang.
//! A pod no controller owns would be lost by that, so it is left in place with a
//! Warning event saying it must be recreated.

use crate::cluster::api::EventType;
use crate::gang::book::Member;
use crate::gang::pin::waiting_pin;
use crate::gang::planner_book::PlannerBook;
use crate::ledger::Ledger;
use crate::placement::node_predicates::admits;
use crate::placement::node_traits::NodeTraits;
use crate::placement::pod_affinity::{AFFINITY, InterPodAffinity};
use crate::placement::resource_fit::{fits_node, pod_footprint};
use crate::resources::Resources;
use crate::scheduler::Scheduler;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};

/// A pinned member whose node refuses it.
struct BrokenPin {
    namespace: String,
    name: String,
    uid: String,
    node: String,
    why: String,
    owned: bool,
}

/// Why the node `m` is pinned to will not take it, if it will not. Room is
/// judged apart ([`has_room`]): a full node frees up as its pods finish.
fn pin_refused(ledger: &Ledger, m: &Member, node: &str) -> Option<String> {
    let Some(traits) = ledger.load().get(node).and_then(|n| n.traits.as_deref()) else {
        return Some("the node is gone".to_string());
    };
    let nothing = Resources::default();
    admits(&m.pod, node, traits, &nothing, &nothing, &nothing)
        .err()
        .or_else(|| repelled(ledger, m, &traits.labels))
}

/// Whether what the pods bound to `node` request leaves room for `m`.
fn has_room(ledger: &Ledger, m: &Member, node: &str) -> bool {
    ledger
        .load()
        .get(node)
        .is_none_or(|n| fits_node(&n.allocatable, &n.requested, &pod_footprint(&m.pod)).is_ok())
}

/// Why pod anti-affinity keeps `m` off a node with `labels`, if it does: a pod
/// bound there since the pin (kube-scheduler did not see the unbound member)
/// repels it, or is one it repels. Pod affinity is not judged: the pods it
/// follows may be planned members not bound yet, and kube-scheduler waits for them.
fn repelled(ledger: &Ledger, m: &Member, labels: &BTreeMap<String, String>) -> Option<String> {
    let mut check = InterPodAffinity::new(&m.pod).in_namespaces(ledger.load().namespaces().clone());
    let every_pod = check.has_own_terms();
    for (_, n) in ledger.load().nodes() {
        let node_labels = NodeTraits::labels_of(n.traits.as_deref());
        for pod in n.pods.iter() {
            if every_pod || !pod.anti_affinity.is_empty() {
                check.add(pod, node_labels);
            }
        }
    }
    match check.admits(labels) {
        Err(reason) if reason != AFFINITY => Some(reason.to_string()),
        _ => None,
    }
}

impl Scheduler {
    /// Evicts owned members pinned to a node that refuses them; warns about the
    /// others (see the module documentation).
    pub(super) async fn release_broken_pins(&self, copy: &Mutex<PlannerBook>) {
        let (now, wait) = (self.clock.now(), self.config.gang.timeout);
        let broken: Vec<BrokenPin> = {
            let book = self.gang.book.read();
            let ledger = self.ledger.read();
            let mut without_room = self.gang.pins_without_room.lock();
            // Only members pinned as the planner's copy of the book knows them,
            // and members changed since, are looked at.
            let copy = copy.lock();
            let uids: BTreeSet<&String> = copy
                .watched()
                .waiting_pins()
                .chain(&book.pending_changes().members)
                .collect();
            let pinned: Vec<(&Member, &str)> = uids
                .into_iter()
                .filter_map(|uid| book.members().get(uid))
                .filter_map(|m| Some((&**m, waiting_pin(m)?)))
                .collect();
            without_room.retain(&pinned.iter().map(|(m, _)| m.uid.clone()).collect());
            pinned
                .into_iter()
                .filter_map(|(m, node)| {
                    let room = has_room(&ledger, m, node);
                    let why = pin_refused(&ledger, m, node).or_else(|| {
                        let waited = without_room.observe(&m.uid, room, now, wait)?;
                        Some(format!(
                            "the node has had no room for it for {}s",
                            waited.as_secs()
                        ))
                    })?;
                    Some(BrokenPin {
                        namespace: m.namespace.clone(),
                        name: m.name.clone(),
                        uid: m.uid.clone(),
                        node: node.to_string(),
                        why,
                        owned: m.owner_kind.is_some(),
                    })
                })
                .collect()
        };
        for pin in broken {
            let pod = format!("{}/{}", pin.namespace, pin.name);
            if !pin.owned {
                self.event(
                    (&pin.namespace, &pin.name, &pin.uid),
                    EventType::Warning,
                    "PinnedNodeRefuses",
                    format!(
                        "planned onto node {} which now refuses it ({}); no controller owns this pod, so it is left in place: delete and recreate it to have it planned again",
                        pin.node, pin.why
                    ),
                )
                .await;
                continue;
            }
            tracing::warn!(%pod, node = %pin.node, why = %pin.why, "pinned member's node refuses it; evicting it for its controller to recreate");
            match self.api.evict_pod(&pin.namespace, &pin.name).await {
                Ok(()) => {
                    self.event(
                        (&pin.namespace, &pin.name, &pin.uid),
                        EventType::Warning,
                        "PinnedNodeRefuses",
                        format!(
                            "planned onto node {} which now refuses it ({}); evicted so that its controller recreates it and it is planned again",
                            pin.node, pin.why
                        ),
                    )
                    .await;
                    if !self.api.reports_changes() {
                        self.forget_pod(&pin.uid);
                    }
                }
                Err(e) => {
                    tracing::warn!(%pod, error = %e, "could not evict a member whose pinned node refuses it")
                }
            }
        }
    }
}
