//! nodeorder: kube-scheduler's node scores, in the planner. kube-scheduler scores
//! the nodes it offers `/filter` itself; the planner places gang members before
//! kube-scheduler sees them, so their preferences (preferred node affinity, soft
//! taints) must count there. See `placement::node_preferences`.
//!
//! Weights, as Volcano names them: `nodeaffinity.weight` (default 1),
//! `tainttoleration.weight` (default 1), `leastrequested.weight`,
//! `mostrequested.weight`, `balancedresource.weight` (default 0 here, where
//! Volcano's default is 1 for leastrequested and balancedresource: the pod's GPU
//! node policy already orders nodes by the resource that matters, and a CPU
//! spread on top would undo GPU binpacking; give a weight to have it).
//! `podaffinity.weight` (default 2, as Volcano's) scores preferred pod affinity
//! and anti-affinity, both the task's own terms and those of the pods on the
//! nodes, as kube-scheduler's InterPodAffinity score does (see
//! `placement::preferred_pod_affinity`); node choice spreads it over the
//! candidates. Only the planner runs this plugin: for a pod `/filter` and
//! `/prioritize` are asked about, kube-scheduler scores it itself.
//! `imagelocality.weight`, `selectorspread.weight`, `podtopologyspread.weight`
//! and `volumebinding.weight` are accepted and have no effect: they depend on
//! other pods' images, spread and volumes, which are kube-scheduler's to judge.

use crate::placement::node_preferences::{
    balanced, least_requested, most_requested, node_affinity, taint_toleration,
};
use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::SessionState;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;

/// Scores kube-scheduler owns; accepted so an existing configuration loads.
const WITHOUT_EFFECT: [&str; 4] = [
    "imagelocality.weight",
    "selectorspread.weight",
    "podtopologyspread.weight",
    "volumebinding.weight",
];

/// The nodeorder plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOrder {
    node_affinity: f64,
    taint_toleration: f64,
    least_requested: f64,
    most_requested: f64,
    balanced: f64,
    pod_affinity: f64,
    /// Some node of the session has a `PreferNoSchedule` taint (otherwise the
    /// taint score is the same everywhere and is skipped).
    soft_taints: bool,
}

/// Builds the plugin from its weights.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    let args = &ctx.args;
    let mut known = vec![
        "nodeaffinity.weight",
        "tainttoleration.weight",
        "leastrequested.weight",
        "mostrequested.weight",
        "balancedresource.weight",
        "podaffinity.weight",
    ];
    known.extend(WITHOUT_EFFECT);
    args.only(&known)?;
    for key in WITHOUT_EFFECT {
        args.integer_at_least(key, 0)?;
    }
    let weight = |key: &str, default: i64| -> Result<f64, ConfError> {
        Ok(args.integer_at_least(key, 0)?.unwrap_or(default) as f64)
    };
    Ok(Some(Box::new(NodeOrder {
        node_affinity: weight("nodeaffinity.weight", 1)?,
        taint_toleration: weight("tainttoleration.weight", 1)?,
        least_requested: weight("leastrequested.weight", 0)?,
        most_requested: weight("mostrequested.weight", 0)?,
        balanced: weight("balancedresource.weight", 0)?,
        pod_affinity: weight("podaffinity.weight", 2)?,
        soft_taints: false,
    })))
}

impl NodeOrder {
    fn prefers_nodes(task: &TaskFacts<'_>) -> bool {
        task.pod
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .is_some_and(|p| !p.is_empty())
    }
}

impl Plugin for NodeOrder {
    fn name(&self) -> &'static str {
        "nodeorder"
    }

    fn open(&mut self, state: &SessionState) {
        self.soft_taints = state.nodes.across().soft_taints;
    }

    fn planner_only(&self) -> bool {
        true
    }

    fn scores_nodes(&self) -> bool {
        true
    }

    fn scores_task(&self, task: &TaskFacts<'_>) -> bool {
        (self.node_affinity > 0.0 && Self::prefers_nodes(task))
            || (self.taint_toleration > 0.0 && self.soft_taints)
            || self.least_requested > 0.0
            || self.most_requested > 0.0
            || self.balanced > 0.0
            || (self.pod_affinity > 0.0
                && task.preferred_pod_affinity.is_some_and(|p| !p.is_empty()))
    }

    fn pod_affinity_weight(&self) -> f64 {
        self.pod_affinity
    }

    fn node_order(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        let mut score = 0.0;
        if let (Some(pod), Some(traits)) = (task.pod, node.traits) {
            if self.node_affinity > 0.0 {
                score += self.node_affinity * node_affinity(pod, node.name, traits);
            }
            if self.taint_toleration > 0.0 && self.soft_taints {
                score += self.taint_toleration * taint_toleration(pod, traits);
            }
        }
        let (alloc, used, asks) = (node.allocatable, node.requested, task.resreq);
        if self.least_requested > 0.0 {
            score += self.least_requested * least_requested(alloc, used, asks);
        }
        if self.most_requested > 0.0 {
            score += self.most_requested * most_requested(alloc, used, asks);
        }
        if self.balanced > 0.0 {
            score += self.balanced * balanced(alloc, used, asks);
        }
        score
    }
}
