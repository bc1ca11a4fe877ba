//! nodegroup through planning sessions: gangs are placed only in the groups their
//! queue allows, preferred groups fill first, a gang with no allowed room waits
//! with the rule that refused each node, and preemption evicts nobody on a node
//! the preemptor may not use.

use crate::gang::plan::plan;
use crate::ledger::{Ledger, NodeEntry};
use crate::node_load::NodeResources;
use crate::placement::node_traits::NodeTraits;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::nodes::{NodeSet, SessionNode};
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{gpu, gpu_task, job, placed_state, running_task};
use crate::volcano::framework::{GangKey, JobInfo, SessionOutcome};
use crate::volcano::objects::{NodeGroupAffinity, QueueSpec};
use crate::volcano::plugins::nodegroup::NODE_GROUP;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const ALLOCATE: &str = "actions: enqueue, allocate
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: nodegroup
";

const PREEMPT: &str = "actions: preempt
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: nodegroup
";

/// Nodes `node-<i>` of two one-slot GPUs each, in the given groups (`None`: no
/// group label).
fn nodes(groups: &[Option<&str>]) -> NodeSet {
    let mut ledger = Ledger::default();
    let mut labels = BTreeMap::new();
    for (n, group) in groups.iter().enumerate() {
        let group = group.map(|g| (NODE_GROUP.to_string(), g.to_string()));
        labels.insert(format!("node-{n}"), group);
        ledger.upsert_node(
            &format!("node-{n}"),
            NodeEntry {
                devices: (0..2).map(|i| gpu(n, i, 1)).collect(),
                ..Default::default()
            },
        );
    }
    let nodes = ledger
        .snapshot_nodes()
        .into_iter()
        .map(|(name, gpus)| {
            let resources = NodeResources {
                traits: Some(Arc::new(NodeTraits {
                    labels: labels[&name].clone().into_iter().collect(),
                    ..NodeTraits::default()
                })),
                ..NodeResources::default()
            };
            SessionNode::new(name, gpus, resources)
        })
        .collect();
    NodeSet::new(nodes, BTreeMap::new())
}

fn queue(required: &[&str], preferred: &[&str]) -> QueueInfo {
    let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    QueueInfo::idle(QueueSpec {
        affinity: Some(NodeGroupAffinity {
            required: names(required),
            preferred: names(preferred),
            ..NodeGroupAffinity::default()
        }),
        ..QueueSpec::new("gpu-queue")
    })
}

fn key(name: &str) -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: name.into(),
        single: false,
    }
}

/// A gang of `n` one-GPU tasks waiting in `gpu-queue`.
fn waiting(name: &str, n: u32, priority: i32) -> JobInfo {
    let k = key(name);
    let tasks = (0..n)
        .map(|i| {
            let mut t = gpu_task(&k, &format!("{name}-{i}"), 1);
            t.priority = priority;
            t
        })
        .collect();
    let mut j = job(name, "gpu-queue", n as usize, tasks);
    j.priority = priority;
    j
}

/// A gang of two running on both GPUs of `node-<node>`.
fn running(name: &str, node: usize, priority: i32) -> JobInfo {
    let k = key(name);
    let tasks = (0..2)
        .map(|i| {
            let mut t = running_task(&k, &format!("{name}-{i}"), node, i);
            t.priority = priority;
            t
        })
        .collect();
    let mut j = job(name, "gpu-queue", 2, tasks);
    j.priority = priority;
    j
}

fn run(conf: &str, nodes: NodeSet, queue: QueueInfo, jobs: Vec<JobInfo>) -> SessionOutcome {
    let conf = SchedulerConf::parse(conf).expect("conf");
    plan(placed_state(nodes, vec![queue], jobs), &conf)
}

/// How many members each node got.
fn placed(o: &SessionOutcome) -> BTreeMap<String, usize> {
    let mut by_node = BTreeMap::new();
    for m in o.commits.iter().flat_map(|c| &c.members) {
        if let Some(p) = &m.placement {
            *by_node.entry(p.node.clone()).or_default() += 1;
        }
    }
    by_node
}

const GROUPS: [Option<&str>; 4] = [None, Some("cpu-pool"), Some("gpu-pool"), Some("gpu-pool")];

#[test]
fn a_gang_goes_only_to_its_required_group() {
    let o = run(
        ALLOCATE,
        nodes(&GROUPS),
        queue(&["gpu-pool"], &[]),
        vec![waiting("train", 4, 0)],
    );
    assert_eq!(
        placed(&o),
        BTreeMap::from([("node-2".into(), 2), ("node-3".into(), 2)])
    );
}

#[test]
fn a_gang_with_no_room_in_its_group_waits_with_the_rule_that_refused() {
    let o = run(
        ALLOCATE,
        nodes(&GROUPS),
        queue(&["gpu-pool"], &[]),
        vec![waiting("train", 5, 0)],
    );
    assert!(o.commits.is_empty());
    let message = o.verdicts[&key("train")]
        .message
        .clone()
        .unwrap_or_default();
    for rule in [
        "1 node queue \"gpu-queue\": node group \"cpu-pool\" is not in its node-group affinity (gpu-pool) (nodegroup)",
        "1 node queue \"gpu-queue\": node has no volcano.sh/nodegroup-name label and its node-group affinity names groups (nodegroup)",
    ] {
        assert!(message.contains(rule), "{message}");
    }
}

#[test]
fn preferred_groups_fill_first() {
    let o = run(
        ALLOCATE,
        nodes(&GROUPS),
        queue(&["cpu-pool", "gpu-pool"], &["gpu-pool"]),
        vec![waiting("train", 5, 0)],
    );
    assert_eq!(
        placed(&o),
        BTreeMap::from([
            ("node-1".into(), 1),
            ("node-2".into(), 2),
            ("node-3".into(), 2)
        ])
    );
}

/// A gang of the queue still runs in `cpu-pool`, placed before the rule existed
/// (rules are ignored during execution); the only node the newcomer may use is
/// held by a more important gang. Evicting the old gang would free a node the
/// newcomer may not use, so nobody is evicted.
#[test]
fn preemption_evicts_nobody_on_a_node_the_preemptor_may_not_use() {
    let jobs = || {
        vec![
            running("old", 0, 10_000),
            running("vip", 1, 90_000),
            waiting("new", 1, 50_000),
        ]
    };
    let groups = [Some("cpu-pool"), Some("gpu-pool")];
    let evicted = |o: &SessionOutcome| -> BTreeSet<String> {
        o.evictions().map(|e| e.name.clone()).collect()
    };
    // Without the plugin, the old gang makes room.
    let without = PREEMPT.replace("- plugins:\n  - name: nodegroup\n", "");
    let o = run(&without, nodes(&groups), queue(&["gpu-pool"], &[]), jobs());
    assert_eq!(
        evicted(&o),
        BTreeSet::from(["old-0".into(), "old-1".into()])
    );
    let o = run(PREEMPT, nodes(&groups), queue(&["gpu-pool"], &[]), jobs());
    assert!(evicted(&o).is_empty(), "{:?}", evicted(&o));
    assert!(o.commits.is_empty());
}
