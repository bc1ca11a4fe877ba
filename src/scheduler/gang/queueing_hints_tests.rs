//! Queueing hints, kept tasks and kept jobs change what a cycle costs, never what
//! it decides:
//! on random clusters and workloads (gangs of mixed sizes in weighted queues,
//! priorities, preemption and reclaim; queues reweighed, PodGroups moved to other
//! queues, nodes joining), a scheduler planning with them makes the
//! same placements, evictions and verdicts, cycle after cycle, as one whose every
//! session is built anew and tries every job.

use crate::gang::job_cache::JobCache;
use crate::gang::queueing_hints::QueueingHints;
use crate::gang::task_cache::TaskCache;
use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::{Cluster, gpu_node, member, podgroup, queue};
use crate::volcano::framework::GangPhase;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// Preemption and reclaim besides allocate (the other half of the cases plan
/// with the default configuration).
const WITH_EVICTIONS: &str = "actions: \"enqueue, allocate, preempt, reclaim, backfill\"
tiers: [{plugins: [{name: priority}, {name: gang}, {name: conformance}]}, {plugins: [{name: proportion}]}]
";

/// One gang of the workload: minMember, extra members, queue, memory each
/// member asks (MiB), priority.
type GangSpec = (u32, u32, usize, u64, i32);

/// What happens between two cycles.
#[derive(Debug, Clone)]
enum Change {
    /// The next gang of the workload arrives.
    Arrive,
    /// The `n`th pod the ledger holds leaves (room is freed).
    Leave(usize),
    /// The `n`th member gets a new pod version that changes nothing.
    Relabel(usize),
    /// The `n`th queue gets weight `w`.
    Reweigh(usize, u32),
    /// The `n`th gang's PodGroup moves to the `q`th queue.
    Requeue(usize, usize),
    /// A node of this many whole cards joins.
    NodeJoins(usize),
    /// Nothing: the period elapsed.
    Tick,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        2 => Just(Change::Arrive),
        2 => (0usize..64).prop_map(Change::Leave),
        2 => (0usize..64).prop_map(Change::Relabel),
        1 => (0usize..4, 1u32..5).prop_map(|(n, w)| Change::Reweigh(n, w)),
        1 => (0usize..16, 0usize..4).prop_map(|(n, q)| Change::Requeue(n, q)),
        1 => (1usize..3).prop_map(Change::NodeJoins),
        1 => Just(Change::Tick),
    ]
}

/// A member asking `mem` MiB of one GPU, at `priority`.
fn sized_member(name: &str, group: &str, created: u32, mem: u64, priority: i32) -> Pod {
    let mut pod = member(name, group, created);
    if let Some(spec) = pod.spec.as_mut() {
        spec.priority = Some(priority);
        if let Some(limits) = spec
            .containers
            .first_mut()
            .and_then(|c| c.resources.as_mut())
            .and_then(|r| r.limits.as_mut())
        {
            limits.insert("nvidia.com/gpumem".into(), Quantity(mem.to_string()));
        }
    }
    pod
}

/// Two schedulers over the same cluster: one planning incrementally, one from
/// scratch.
struct Pair {
    incremental: Cluster,
    scratch: Cluster,
    /// Nodes joined so far.
    joined: std::cell::Cell<usize>,
}

impl Pair {
    fn new(nodes: &[usize], queues: usize, evictions: bool) -> Self {
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let spec: Vec<(&str, usize)> = names
            .iter()
            .map(String::as_str)
            .zip(nodes.iter().copied())
            .collect();
        let make = || {
            let c = Cluster::new(&spec, GangConfig::default());
            if evictions {
                c.s.set_gang_conf(crate::volcano::load_conf(WITH_EVICTIONS).expect("conf"));
            }
            for q in 0..queues {
                c.s.apply_queue(&queue(
                    &format!("q{q}"),
                    json!({"weight": q + 1, "reclaimable": true}),
                ));
            }
            c
        };
        Self {
            incremental: make(),
            scratch: make(),
            joined: std::cell::Cell::new(0),
        }
    }

    fn both(&self) -> [&Cluster; 2] {
        [&self.incremental, &self.scratch]
    }

    fn arrive(&self, g: usize, (min, extra, q, mem, priority): GangSpec, queues: usize) {
        let group = format!("g{g}");
        for c in self.both() {
            c.s.apply_podgroup(&podgroup(
                &group,
                min,
                &format!("q{}", q % queues),
                json!({}),
            ));
            for m in 0..min + extra {
                c.add(&sized_member(
                    &format!("g{g}m{m}"),
                    &group,
                    g as u32,
                    mem,
                    priority,
                ));
            }
        }
    }

    /// The `n`th pod the incremental side's ledger holds (by UID), if any.
    fn held_pod(&self, n: usize) -> Option<String> {
        let uids: Vec<String> = self
            .incremental
            .s
            .with_ledger(|l| l.pods().map(|p| p.uid.clone()).collect());
        let mut uids = uids;
        uids.sort();
        (!uids.is_empty()).then(|| uids[n % uids.len()].clone())
    }

    async fn apply(
        &self,
        change: &Change,
        arrived: &mut usize,
        workload: &[GangSpec],
        queues: usize,
    ) {
        match change {
            Change::Arrive => {
                if let Some(spec) = workload.get(*arrived) {
                    self.arrive(*arrived, *spec, queues);
                    *arrived += 1;
                }
            }
            Change::Leave(n) => {
                if let Some(uid) = self.held_pod(*n) {
                    for c in self.both() {
                        c.s.forget_pod(&uid);
                    }
                }
            }
            Change::Relabel(n) => {
                let members: usize = workload[..*arrived]
                    .iter()
                    .map(|(min, extra, ..)| (min + extra) as usize)
                    .sum();
                if members == 0 {
                    return;
                }
                let mut k = n % members;
                let mut name = None;
                for (g, (min, extra, ..)) in workload[..*arrived].iter().enumerate() {
                    let size = (min + extra) as usize;
                    if k < size {
                        name = Some(format!("g{g}m{k}"));
                        break;
                    }
                    k -= size;
                }
                let Some(name) = name else { return };
                for c in self.both() {
                    if let Some(mut pod) = c.pod(&name).await {
                        pod.metadata
                            .labels
                            .get_or_insert_default()
                            .insert("touched".into(), format!("{n}"));
                        c.add(&pod);
                    }
                }
            }
            Change::Reweigh(n, weight) => {
                for c in self.both() {
                    c.s.apply_queue(&queue(
                        &format!("q{}", n % queues),
                        json!({"weight": weight, "reclaimable": true}),
                    ));
                }
            }
            Change::Requeue(n, q) => {
                if *arrived == 0 {
                    return;
                }
                let g = n % *arrived;
                let (min, ..) = workload[g];
                for c in self.both() {
                    c.s.apply_podgroup(&podgroup(
                        &format!("g{g}"),
                        min,
                        &format!("q{}", q % queues),
                        json!({}),
                    ));
                }
            }
            Change::NodeJoins(gpus) => {
                let name = format!("joined{}", self.joined.get());
                self.joined.set(self.joined.get() + 1);
                for c in self.both() {
                    c.s.apply_node(&gpu_node(&name, *gpus));
                }
            }
            Change::Tick => {}
        }
    }

    /// One cycle on each side; the scratch side first forgets everything it
    /// kept, so its session is built anew and tries every job.
    async fn cycle(&self) -> (usize, usize) {
        {
            let memory = self.scratch.s.gang.planner.lock().await;
            *memory.hints.lock() = QueueingHints::default();
            *memory.tasks.lock() = TaskCache::default();
            *memory.jobs.lock() = JobCache::default();
        }
        let a = self.incremental.s.run_gang_cycle().await;
        let b = self.scratch.s.run_gang_cycle().await;
        (a, b)
    }
}

/// What a side decided: every pod the ledger holds with its node and GPUs, every
/// gang's phase, ready count and reason.
type Decisions = (
    BTreeMap<String, (String, String)>,
    BTreeMap<String, (GangPhase, usize, Option<&'static str>)>,
);

fn decisions(c: &Cluster) -> Decisions {
    let held = c.s.with_ledger(|l| {
        l.pods()
            .map(|p| (p.uid.clone(), (p.node.clone(), format!("{:?}", p.devices))))
            .collect()
    });
    let gangs =
        c.s.gang_view()
            .gangs
            .iter()
            .map(|g| (g.gang.clone(), (g.phase, g.ready, g.reason)))
            .collect();
    (held, gangs)
}

fn gang_spec() -> impl Strategy<Value = GangSpec> {
    (
        1u32..4,
        0u32..2,
        0usize..3,
        prop_oneof![Just(20_000u64), Just(40_000u64), Just(80_000u64)],
        prop_oneof![Just(0i32), Just(100i32), Just(1000i32)],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn incremental_cycles_decide_what_sessions_built_anew_decide(
        nodes in proptest::collection::vec(1usize..4, 1..4),
        queues in 1usize..4,
        evictions in any::<bool>(),
        workload in proptest::collection::vec(gang_spec(), 2..10),
        initial in 1usize..6,
        changes in proptest::collection::vec(change(), 1..14),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let pair = Pair::new(&nodes, queues, evictions);
            let mut arrived = 0;
            for _ in 0..initial.min(workload.len()) {
                pair.apply(&Change::Arrive, &mut arrived, &workload, queues).await;
            }
            let (a, b) = pair.cycle().await;
            prop_assert_eq!(a, b, "committed in the first cycle");
            prop_assert_eq!(decisions(&pair.incremental), decisions(&pair.scratch));
            for (step, change) in changes.iter().enumerate() {
                pair.apply(change, &mut arrived, &workload, queues).await;
                let (a, b) = pair.cycle().await;
                prop_assert_eq!(a, b, "committed after step {} ({:?})", step, change);
                prop_assert_eq!(
                    decisions(&pair.incremental),
                    decisions(&pair.scratch),
                    "after step {} ({:?})", step, change
                );
            }
            Ok(())
        })?;
    }
}
