//! The room a session ranks its nodes by: it follows every placement the session
//! makes and takes back, and it screens out the nodes that cannot hold a pod
//! before any of them is fitted, with the reasons a job is told unchanged.

use super::nodes::{NodeSet, SessionNode};
use super::testing::{gpu, gpu_nodes, gpu_share, vgpu, vgpu_task_facts};
use crate::device::model::PodDevices;
use crate::fit::{FitRequest, NodeView, Placement, QuotaHeadroom};
use crate::ledger::{Ledger, NodeEntry, PodEntry, PodPhase};
use crate::placement::{
    NoJudge, NodeFacts, NodeRejection, NodeSource, RankFacts, choose_node, evaluate_all,
};
use crate::rank_index::{GpuRoom, rooms_of};
use crate::resources::{Resources, VgpuDims};
use proptest::prelude::*;
use std::cell::Cell;
use std::collections::BTreeMap;

/// A session's nodes, counting the fits asked of them.
struct CountingFits<'a> {
    nodes: &'a NodeSet,
    fits: Cell<usize>,
}

impl NodeSource for CountingFits<'_> {
    fn len(&self) -> usize {
        self.nodes.len()
    }

    fn name(&self, i: usize) -> &str {
        self.nodes.name(i)
    }

    fn sorted_by_name(&self) -> bool {
        self.nodes.sorted_by_name()
    }

    fn rank(&self, i: usize, request: &crate::device::request::PodRequest) -> Option<RankFacts> {
        self.nodes.rank(i, request)
    }

    fn fit(&self, i: usize, request: &FitRequest<'_>) -> Result<Placement, NodeRejection> {
        self.fits.set(self.fits.get() + 1);
        self.nodes.fit(i, request)
    }

    fn quota(&self, namespace: &str) -> QuotaHeadroom {
        self.nodes.quota(namespace)
    }

    fn facts(&self, i: usize) -> Option<NodeFacts<'_>> {
        self.nodes.facts(i)
    }
}

/// The rooms of every node worked out anew from the usage the session shows.
fn rooms_anew(nodes: &NodeSet) -> BTreeMap<String, Vec<GpuRoom>> {
    nodes
        .iter()
        .map(|n| {
            let usage = nodes.usage(&n.name).unwrap_or_default();
            let view = NodeView {
                usage,
                ..n.gpus.view()
            };
            (n.name.clone(), rooms_of(&view).collect())
        })
        .collect()
}

/// The rooms the session ranks every node by.
fn rooms_kept(nodes: &NodeSet) -> BTreeMap<String, Vec<GpuRoom>> {
    nodes
        .iter()
        .map(|n| {
            let rooms = nodes.rooms(&n.name).unwrap_or_default();
            (n.name.clone(), rooms.to_vec())
        })
        .collect()
}

/// Three nodes of two GPUs of four slots, the first one partly used in the
/// ledger already.
fn three_nodes_one_busy() -> NodeSet {
    let mut ledger = Ledger::default();
    for n in 0..3 {
        ledger.upsert_node(
            &format!("node-{n}"),
            NodeEntry {
                devices: (0..2).map(|i| gpu(n, i, 4)).collect(),
                ..NodeEntry::default()
            },
        );
    }
    ledger.add_pod(PodEntry::new(
        "held".into(),
        "ns".into(),
        "held".into(),
        "node-0".into(),
        vec![vec![gpu_share(0, 0, 40000, 50)]],
        0,
        PodPhase::Bound,
    ));
    let nodes = ledger
        .snapshot_nodes()
        .into_iter()
        .map(|(name, gpus)| SessionNode::new(name, gpus, Default::default()))
        .collect();
    NodeSet::new(nodes, BTreeMap::new())
}

/// What a session does to its nodes.
#[derive(Debug, Clone)]
enum Step {
    Place {
        node: usize,
        gpu: u32,
        memory: u64,
        cores: u32,
    },
    Release {
        node: usize,
        gpu: u32,
        memory: u64,
        cores: u32,
    },
    TakeBackPlacement(usize),
    TakeBackRelease(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let share = (0usize..3, 0u32..2, 0u64..50000, 0u32..=100);
    prop_oneof![
        share
            .clone()
            .prop_map(|(node, gpu, memory, cores)| Step::Place {
                node,
                gpu,
                memory,
                cores
            }),
        share.prop_map(|(node, gpu, memory, cores)| Step::Release {
            node,
            gpu,
            memory,
            cores
        }),
        (0usize..8).prop_map(Step::TakeBackPlacement),
        (0usize..8).prop_map(Step::TakeBackRelease),
    ]
}

proptest! {
    /// Whatever the session places, evicts and takes back, the rooms it ranks
    /// nodes by are the ones the usage it shows gives.
    #[test]
    fn session_rooms_follow_placements_and_evictions(steps in proptest::collection::vec(step(), 1..24)) {
        let mut nodes = three_nodes_one_busy();
        prop_assert_eq!(rooms_kept(&nodes), rooms_anew(&nodes));
        let (mut placed, mut released) = (Vec::new(), Vec::new());
        for step in steps {
            match step {
                Step::Place { node, gpu, memory, cores } => {
                    let devices: PodDevices = vec![vec![gpu_share(node, gpu, memory, cores)]];
                    let name = format!("node-{node}");
                    if let Some(p) = nodes.place("ns", &name, &devices, 0, &Resources::new()) {
                        placed.push(p);
                    }
                }
                Step::Release { node, gpu, memory, cores } => {
                    let devices: PodDevices = vec![vec![gpu_share(node, gpu, memory, cores)]];
                    let name = format!("node-{node}");
                    if let Some(r) = nodes.release("ns", &name, &devices, 0, &Resources::new()) {
                        released.push(r);
                    }
                }
                Step::TakeBackPlacement(k) if k < placed.len() => nodes.unplace(&placed.remove(k)),
                Step::TakeBackRelease(k) if k < released.len() => {
                    nodes.unrelease(&released.remove(k))
                }
                Step::TakeBackPlacement(_) | Step::TakeBackRelease(_) => {}
            }
            prop_assert_eq!(rooms_kept(&nodes), rooms_anew(&nodes));
        }
    }
}

/// Places `count` pods each asking both GPUs of a node, where the session
/// chooses.
fn fill_whole_nodes(nodes: &mut NodeSet, count: usize) {
    let whole_node = vgpu("whole", 2, 80000);
    let (resreq, dims) = (Resources::new(), VgpuDims::default());
    for _ in 0..count {
        let choice = choose_node(
            &*nodes,
            &whole_node,
            &vgpu_task_facts(&whole_node, &resreq, &dims),
            &NoJudge,
        )
        .expect("an empty node is left");
        nodes
            .place("ns", &choice.node, &choice.placement.devices, 0, &resreq)
            .expect("the chosen node is known");
    }
}

/// A session that has filled most nodes fits its next pod on a node with room
/// without fitting the full ones first (binpack ranks them best), and chooses
/// the node fitting every node would.
#[test]
fn a_session_fits_only_the_nodes_with_room() {
    let mut nodes = gpu_nodes(40, 2, 1);
    fill_whole_nodes(&mut nodes, 30);
    let (resreq, dims) = (Resources::new(), VgpuDims::default());
    // One GPU of one more node taken: it ranks first among the nodes with room.
    let one = vgpu("one", 1, 80000);
    let half = choose_node(
        &nodes,
        &one,
        &vgpu_task_facts(&one, &resreq, &dims),
        &NoJudge,
    )
    .expect("nodes have room");
    nodes
        .place("ns", &half.node, &half.placement.devices, 0, &resreq)
        .expect("the chosen node is known");

    let counting = CountingFits {
        nodes: &nodes,
        fits: Cell::new(0),
    };
    let choice = choose_node(
        &counting,
        &one,
        &vgpu_task_facts(&one, &resreq, &dims),
        &NoJudge,
    )
    .expect("nodes have room");
    assert_eq!(choice.node, half.node, "the fullest node with room");
    assert_eq!(counting.fits.get(), 1, "only the node with room is fitted");
    let (fitting, _) = evaluate_all(
        &nodes,
        &one,
        &vgpu_task_facts(&one, &resreq, &dims),
        &NoJudge,
    );
    assert_eq!(
        fitting.len(),
        10,
        "the half-taken node and the nine empty nodes fit"
    );
}

/// When no node can hold the pod, the job is told every node's reason, as
/// fitting every node tells it.
#[test]
fn screened_out_nodes_still_give_their_reasons() {
    let mut nodes = gpu_nodes(4, 2, 1);
    fill_whole_nodes(&mut nodes, 4);
    let (resreq, dims) = (Resources::new(), VgpuDims::default());
    let one = vgpu("one", 1, 1000);
    let counting = CountingFits {
        nodes: &nodes,
        fits: Cell::new(0),
    };
    let failed = choose_node(
        &counting,
        &one,
        &vgpu_task_facts(&one, &resreq, &dims),
        &NoJudge,
    )
    .expect_err("every node is full");
    let (_, every_node) = evaluate_all(
        &nodes,
        &one,
        &vgpu_task_facts(&one, &resreq, &dims),
        &NoJudge,
    );
    assert_eq!(failed, every_node);
    assert_eq!(failed.len(), 4);
}

/// Two sessions over the very same nodes differ when what is said of all the
/// nodes together differs (a soft taint somewhere changes every node's score).
#[test]
fn node_sets_differ_by_what_is_said_of_all_nodes() {
    use super::nodes::{AcrossNodes, position_index};
    use std::sync::Arc;
    let nodes: Vec<Arc<SessionNode>> = gpu_nodes(2, 1, 4).iter().cloned().map(Arc::new).collect();
    let shared = Arc::new(nodes);
    let index = Arc::new(position_index(&shared[..]));
    let open =
        |across| NodeSet::shared_knowing(shared.clone(), index.clone(), BTreeMap::new(), across);
    assert_eq!(open(AcrossNodes::default()), open(AcrossNodes::default()));
    let tainted = AcrossNodes {
        soft_taints: true,
        ..AcrossNodes::default()
    };
    assert_ne!(open(AcrossNodes::default()), open(tainted));
}
