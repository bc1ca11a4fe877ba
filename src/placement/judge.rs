//! What plugins say about nodes: predicates that rule a node out and scores that
//! order the rest (Volcano's predicate and node-order extension points).

use crate::fit::{NodeView, PodContext};
use crate::node_metrics::MeasuredUsage;
use crate::resources::{Resources, VgpuDims};
use k8s_openapi::api::core::v1::Pod;

/// The pod being placed, as plugins see it.
#[derive(Debug, Clone, Copy)]
pub struct TaskFacts<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// Its vGPU request, if it asks for vGPUs.
    pub gpu: Option<&'a PodContext>,
    /// Its CPU and memory requests (milli-units), plus its vGPU dimensions.
    pub resreq: &'a Resources,
    /// The pod itself.
    pub pod: Option<&'a Pod>,
    /// The queue it is scheduled in; `None` for a pod outside queue scheduling
    /// (no PodGroup, no queue annotation, or gang scheduling off).
    pub queue: Option<&'a str>,
    /// The names its vGPU dimensions go by in `resreq`.
    pub dims: &'a VgpuDims,
    /// Its required pod (anti-)affinity and the other pods' anti-affinity against
    /// it, gathered over the pods on the nodes; `None` when neither applies (or
    /// no predicate runs).
    pub pod_affinity: Option<&'a super::pod_affinity::InterPodAffinity>,
    /// Its preferred pod (anti-)affinity weights per topology domain, gathered
    /// over the pods on the nodes; `None` when nothing is preferred (or no
    /// plugin scores it).
    pub preferred_pod_affinity: Option<&'a super::preferred_pod_affinity::PreferredPodAffinity>,
}

/// A candidate node, as plugins see it.
#[derive(Debug, Clone, Copy)]
pub struct NodeFacts<'a> {
    /// Node name.
    pub name: &'a str,
    /// Its GPUs and their usage.
    pub gpus: NodeView<'a>,
    /// Allocatable CPU and memory (milli-units).
    pub allocatable: &'a Resources,
    /// CPU and memory requested by the pods on it (milli-units).
    pub requested: &'a Resources,
    /// Its labels, taints and cordon, when the Node has been seen.
    pub traits: Option<&'a super::node_traits::NodeTraits>,
    /// What it measurably uses (metrics-server), judged now.
    pub measured: MeasuredUsage<'a>,
}

/// Predicates and scores over nodes.
pub trait NodeJudge {
    /// Whether any predicate runs (otherwise every node passes).
    fn filters(&self) -> bool;

    /// Whether any node-order score runs (otherwise every node scores 0).
    fn scores(&self) -> bool;

    /// Whether some node-order score can tell nodes apart for this task.
    fn scores_task(&self, _task: &TaskFacts<'_>) -> bool {
        self.scores()
    }

    /// Rules the node out for the task, with a reason; `Ok` lets it through.
    fn predicate(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> Result<(), String>;

    /// The plugins' summed score of the node for the task (higher is better).
    fn score(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64;

    /// The weight of preferred inter-pod affinity, which is scored over all
    /// candidates at once (see `placement::preferred_pod_affinity`); 0: not
    /// scored.
    fn pod_affinity_weight(&self) -> f64 {
        0.0
    }
}

/// No plugin opinion: every node passes and scores 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJudge;

impl NodeJudge for NoJudge {
    fn filters(&self) -> bool {
        false
    }

    fn scores(&self) -> bool {
        false
    }

    fn predicate(&self, _: &TaskFacts<'_>, _: &NodeFacts<'_>) -> Result<(), String> {
        Ok(())
    }

    fn score(&self, _: &TaskFacts<'_>, _: &NodeFacts<'_>) -> f64 {
        0.0
    }
}
