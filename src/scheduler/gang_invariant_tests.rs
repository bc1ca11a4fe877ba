//! Property tests of gang scheduling: random gangs, queues, binds, deletions and
//! finishes. After every step no GPU is overbooked, no gated pod holds GPUs, and
//! a gang the planner placed never holds fewer than minMember members unless
//! members were deleted or finished afterwards.

use super::GangConfig;
use super::gang_tests::{Cluster, member, podgroup, queue};
use crate::cluster::api::ClusterApi;
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
enum Op {
    /// A gang of `size` pods with minMember `min` in queue `queue`.
    Gang {
        size: usize,
        min: usize,
        queue: usize,
    },
    /// A planning cycle.
    Cycle,
    /// kube-scheduler schedules member `member` of gang `gang` (if ungated).
    Schedule { gang: usize, member: usize },
    /// A member is deleted.
    Delete { gang: usize, member: usize },
    /// Every member of a gang finishes.
    Finish { gang: usize },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1usize..=5, 1usize..=5, 0usize..3).prop_map(|(size, min, queue)| Op::Gang { size, min: min.min(size), queue }),
        4 => Just(Op::Cycle),
        4 => (0usize..16, 0usize..5).prop_map(|(gang, member)| Op::Schedule { gang, member }),
        1 => (0usize..16, 0usize..5).prop_map(|(gang, member)| Op::Delete { gang, member }),
        1 => (0usize..16).prop_map(|gang| Op::Finish { gang }),
    ]
}

struct Gang {
    name: String,
    min: usize,
    members: Vec<String>,
    disturbed: bool,
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn check(c: &Cluster, gangs: &[Gang]) -> Result<(), TestCaseError> {
    c.s.with_ledger(|l| {
        for (_, entry) in l.nodes() {
            for (d, u) in entry.devices.iter().zip(entry.usage.iter()) {
                prop_assert!(u.used <= d.count, "{} overbooked", d.id);
            }
        }
        Ok(())
    })?;
    for g in gangs {
        let mut held = 0;
        for m in &g.members {
            let Some(pod) = c.pod(m).await else { continue };
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let holds = c.s.with_ledger(|l| l.pod(&uid).is_some());
            let gated = c.gated(m).await;
            prop_assert!(!(gated && holds), "{m} is gated but holds GPUs");
            if holds {
                held += 1;
            }
        }
        if !g.disturbed {
            prop_assert!(
                held == 0 || held >= g.min,
                "gang {} holds {held} members, minMember {}",
                g.name,
                g.min
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn gangs_are_placed_whole_and_never_overbook(
        gpus in prop::collection::vec(1usize..=4, 1..=3),
        ops in prop::collection::vec(op_strategy(), 1..30),
    ) {
        let names: Vec<String> = (0..gpus.len()).map(|i| format!("n{i}")).collect();
        let layout: Vec<(&str, usize)> = names.iter().map(String::as_str).zip(gpus.iter().copied()).collect();
        let c = Cluster::new(&layout, GangConfig::default());
        c.s.apply_queue(&queue("gold", json!({"weight": 2})));
        c.s.apply_queue(&queue("capped", json!({"weight": 1, "capability": {"nvidia.com/gpu": "2"}})));
        let queues = ["default", "gold", "capped"];
        let rt = rt();
        let mut gangs: Vec<Gang> = Vec::new();
        let mut created = 0u32;
        let mut finished: BTreeSet<usize> = BTreeSet::new();
        for op in ops {
            match op {
                Op::Gang { size, min, queue } => {
                    let name = format!("g{}", gangs.len());
                    c.s.apply_podgroup(&podgroup(&name, min as u32, queues[queue], json!({})));
                    let mut members = Vec::new();
                    for i in 0..size {
                        let pod_name = format!("{name}-m{i}");
                        created += 1;
                        c.add(&member(&pod_name, &name, created % 60));
                        members.push(pod_name);
                    }
                    gangs.push(Gang { name, min, members, disturbed: false });
                }
                Op::Cycle => {
                    rt.block_on(c.s.run_gang_cycle());
                }
                Op::Schedule { gang, member } => {
                    if gangs.is_empty() { continue; }
                    let g = &gangs[gang % gangs.len()];
                    let Some(m) = g.members.get(member % g.members.len()).cloned() else { continue };
                    let alive = rt.block_on(c.pod(&m)).is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none());
                    if alive
                        && !rt.block_on(c.gated(&m))
                        && let Ok(nodes) = rt.block_on(c.filter(&m))
                    {
                        let _ = rt.block_on(c.bind(&m, &nodes[0]));
                    }
                }
                Op::Delete { gang, member } => {
                    if gangs.is_empty() { continue; }
                    let i = gang % gangs.len();
                    let g = &mut gangs[i];
                    let m = g.members[member % g.members.len()].clone();
                    if rt.block_on(c.memory.evict_pod("ml", &m)).is_ok() {
                        c.s.forget_pod(&format!("uid-{m}"));
                        g.disturbed = true;
                    }
                }
                Op::Finish { gang } => {
                    if gangs.is_empty() { continue; }
                    let i = gang % gangs.len();
                    if !finished.insert(i) { continue; }
                    gangs[i].disturbed = true;
                    for m in gangs[i].members.clone() {
                        if let Some(mut p) = rt.block_on(c.pod(&m)) {
                            p.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
                            c.s.apply_pod(&p);
                        }
                    }
                }
            }
            rt.block_on(check(&c, &gangs))?;
        }
    }
}
