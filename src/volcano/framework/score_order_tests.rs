//! A session that walks its nodes in the kept score order chooses what ranking
//! every node chooses: the same node and GPUs, the same nodes fitted in vain,
//! the same reasons when none fits, whatever the session placed and took back
//! and whichever policy the pod asks for; and the kept order, brought up to date
//! node by node, is the order worked out anew.

use super::nodes::{NodeSet, SessionNode};
use super::score_order::ScoreOrder;
use super::testing::{gpu, gpu_share, vgpu, vgpu_task_facts};
use crate::device::model::PodDevices;
use crate::fit::PodContext;
use crate::ledger::{Ledger, NodeEntry, PodEntry, PodPhase};
use crate::placement::{NoJudge, choose_node};
use crate::policy::NodePolicy;
use crate::resources::{Resources, VgpuDims};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One node: per GPU its slots, whether it is healthy, and the MiB and percent
/// of compute pods already hold on it.
type NodeShape = Vec<(u32, bool, u64, u32)>;

fn node_shape() -> impl Strategy<Value = NodeShape> {
    // Untouched GPUs are common, so that nodes tie on their score.
    let held = prop_oneof![2 => Just(0u64), 1 => 1u64..90000];
    prop::collection::vec((1u32..4, prop::bool::weighted(0.9), held, 0u32..=100), 1..4)
}

/// The session's nodes as the ledger shows `shapes` (a held share larger than
/// its GPU leaves the GPU full).
fn session_nodes(shapes: &[NodeShape]) -> Vec<SessionNode> {
    let mut ledger = Ledger::default();
    for (n, gpus) in shapes.iter().enumerate() {
        let devices = gpus
            .iter()
            .enumerate()
            .map(|(i, (slots, healthy, _, _))| {
                let mut d = gpu(n, i as u32, *slots);
                d.health = *healthy;
                d
            })
            .collect();
        ledger.upsert_node(
            &format!("node-{n}"),
            NodeEntry {
                devices,
                ..NodeEntry::default()
            },
        );
        for (i, (_, _, memory, cores)) in gpus.iter().enumerate() {
            if *memory == 0 {
                continue;
            }
            let name = format!("held-{n}-{i}");
            ledger.add_pod(PodEntry::new(
                name.clone(),
                "ns".into(),
                name,
                format!("node-{n}"),
                vec![vec![gpu_share(n, i as u32, (*memory).min(81559), *cores)]],
                0,
                PodPhase::Bound,
            ));
        }
    }
    ledger
        .snapshot_nodes()
        .into_iter()
        .map(|(name, gpus)| SessionNode::new(name, gpus, Default::default()))
        .collect()
}

/// A request of `gpus` GPUs with `memory` MiB each under `policy`.
fn request(gpus: u32, memory: u64, policy: NodePolicy) -> PodContext {
    let mut ctx = vgpu("asked", gpus, memory);
    ctx.policies.node = policy;
    ctx
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn walking_the_score_order_chooses_what_ranking_every_node_chooses(
        shapes in prop::collection::vec(node_shape(), 1..9),
        placements in prop::collection::vec((0u32..3, 1000u64..60000, prop::bool::ANY), 0..8),
        asks in prop::collection::vec((1u32..3, 1000u64..85000, prop::bool::ANY), 1..6),
    ) {
        let nodes: Vec<Arc<SessionNode>> = session_nodes(&shapes).into_iter().map(Arc::new).collect();
        let order = Arc::new(ScoreOrder::of(&nodes));
        let index = Arc::new(super::nodes::position_index(&nodes));
        let mut ranked_all = NodeSet::shared(nodes, index, BTreeMap::new());
        let mut walked = ranked_all.clone().with_score_order(order);
        let (resreq, dims) = (Resources::new(), VgpuDims::default());
        // The session places pods where it chooses, changing those nodes' scores.
        for (gpus, memory, spread) in placements {
            let policy = if spread { NodePolicy::Spread } else { NodePolicy::Binpack };
            let ctx = request(gpus.max(1), memory, policy);
            let chosen = choose_node(&ranked_all, &ctx, &vgpu_task_facts(&ctx, &resreq, &dims), &NoJudge);
            if let Ok(choice) = chosen {
                let devices: PodDevices = choice.placement.devices.clone();
                prop_assert!(ranked_all.place("ns", &choice.node, &devices, 0, &resreq).is_some());
                prop_assert!(walked.place("ns", &choice.node, &devices, 0, &resreq).is_some());
            }
        }
        for (gpus, memory, spread) in asks {
            let policy = if spread { NodePolicy::Spread } else { NodePolicy::Binpack };
            let ctx = request(gpus, memory, policy);
            let all = choose_node(&ranked_all, &ctx, &vgpu_task_facts(&ctx, &resreq, &dims), &NoJudge);
            let walk = choose_node(&walked, &ctx, &vgpu_task_facts(&ctx, &resreq, &dims), &NoJudge);
            match (&all, &walk) {
                (Ok(a), Ok(w)) => {
                    prop_assert_eq!(&a.node, &w.node);
                    prop_assert_eq!(&a.placement.devices, &w.placement.devices);
                    prop_assert_eq!(a.rank.to_bits(), w.rank.to_bits());
                }
                (Err(a), Err(w)) => prop_assert_eq!(a, w),
                _ => prop_assert!(false, "one chose, the other did not: {:?} / {:?}", all, walk),
            }
        }
    }

    #[test]
    fn the_order_kept_node_by_node_is_the_order_worked_out_anew(
        before in prop::collection::vec(node_shape(), 1..9),
        after in prop::collection::vec(node_shape(), 9),
        replaced in prop::collection::vec(0usize..9, 0..12),
    ) {
        let mut nodes: Vec<Arc<SessionNode>> = session_nodes(&before).into_iter().map(Arc::new).collect();
        let others: Vec<Arc<SessionNode>> = session_nodes(&after).into_iter().map(Arc::new).collect();
        let mut kept = ScoreOrder::of(&nodes);
        for i in replaced {
            if i >= nodes.len() {
                continue;
            }
            let new = Arc::clone(&others[i]);
            kept.replace(i, &nodes[i], &new);
            nodes[i] = new;
            prop_assert_eq!(&kept, &ScoreOrder::of(&nodes));
        }
    }
}
