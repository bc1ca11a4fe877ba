//! task-topology through planning sessions: a PS/worker gang with affinity
//! `ps,worker` lands together where the node policy would spread it, with
//! anti-affinity `ps` its parameter servers land on different nodes each with
//! its workers, a ps added to a running job avoids the running ps, and a job
//! whose annotations name a role it does not have is placed as without them.

use crate::gang::plan::plan;
use crate::policy::NodePolicy;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::job::GpuAsk;
use crate::volcano::framework::nodes::NodeSet;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{gpu_nodes, gpu_task, job, placed_state, running_task};
use crate::volcano::framework::{GangKey, JobInfo, SessionOutcome, TaskInfo};
use crate::volcano::objects::QueueSpec;
use crate::volcano::task_topology::TopologyAnnotations;
use std::collections::BTreeMap;

/// Volcano's configuration with task-topology weighted as in the plugin guide.
const WITH_TOPOLOGY: &str = "actions: enqueue, allocate
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: task-topology
    arguments:
      task-topology.weight: 10
";

const WITHOUT_TOPOLOGY: &str = "actions: enqueue, allocate
tiers:
- plugins:
  - name: priority
  - name: gang
";

fn key() -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: "tf".into(),
        single: false,
    }
}

/// A waiting task of `role` asking for one whole GPU, placed by `policy`.
fn member(role: &str, i: usize, policy: NodePolicy) -> TaskInfo {
    let mut t = gpu_task(&key(), &format!("{role}-{i}"), 1);
    t.role = Some(role.into());
    if let GpuAsk::Vgpu(ctx) = &mut t.gpu {
        std::sync::Arc::make_mut(ctx).policies.node = policy;
    }
    t
}

/// The gang `tf` with these tasks, all needed, and these annotations.
fn gang(tasks: Vec<TaskInfo>, affinity: Option<&str>, anti: Option<&str>) -> JobInfo {
    let n = tasks.len();
    let mut j = job("tf", "q", n, tasks);
    j.task_topology = Some(TopologyAnnotations {
        affinity: affinity.map(str::to_owned),
        anti_affinity: anti.map(str::to_owned),
        task_order: None,
    });
    j
}

fn run(conf: &str, nodes: NodeSet, jobs: Vec<JobInfo>) -> SessionOutcome {
    let conf = SchedulerConf::parse(conf).expect("conf");
    let queue = QueueInfo::idle(QueueSpec::new("q"));
    plan(placed_state(nodes, vec![queue], jobs), &conf)
}

/// Each placed task's node, by task name.
fn placements(o: &SessionOutcome) -> BTreeMap<String, String> {
    o.commits
        .iter()
        .flat_map(|c| &c.members)
        .filter_map(|m| Some((m.name.clone(), m.placement.as_ref()?.node.clone())))
        .collect()
}

fn on(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(t, n)| (t.to_string(), n.to_string()))
        .collect()
}

#[test]
fn affinity_keeps_the_ps_and_its_workers_on_one_node() {
    let tf = || {
        let tasks = std::iter::once(member("ps", 0, NodePolicy::Spread))
            .chain((0..3).map(|i| member("worker", i, NodePolicy::Spread)))
            .collect();
        gang(tasks, Some("ps,worker"), None)
    };
    let o = run(WITHOUT_TOPOLOGY, gpu_nodes(4, 4, 1), vec![tf()]);
    assert_eq!(
        placements(&o),
        on(&[
            ("ps-0", "node-0"),
            ("worker-0", "node-1"),
            ("worker-1", "node-2"),
            ("worker-2", "node-3")
        ]),
        "the spread policy alone puts every task on a node of its own"
    );
    let o = run(WITH_TOPOLOGY, gpu_nodes(4, 4, 1), vec![tf()]);
    assert_eq!(
        placements(&o),
        on(&[
            ("ps-0", "node-0"),
            ("worker-0", "node-0"),
            ("worker-1", "node-0"),
            ("worker-2", "node-0")
        ])
    );
}

#[test]
fn anti_affinity_puts_each_ps_on_its_own_node_with_its_workers() {
    let tf = || {
        let tasks = (0..2)
            .map(|i| member("ps", i, NodePolicy::Binpack))
            .chain((0..2).map(|i| member("worker", i, NodePolicy::Binpack)))
            .collect();
        gang(tasks, Some("ps,worker"), Some("ps"))
    };
    let o = run(WITHOUT_TOPOLOGY, gpu_nodes(2, 4, 1), vec![tf()]);
    assert_eq!(
        placements(&o),
        on(&[
            ("ps-0", "node-0"),
            ("ps-1", "node-0"),
            ("worker-0", "node-0"),
            ("worker-1", "node-0")
        ]),
        "binpack alone fills the first node"
    );
    let o = run(WITH_TOPOLOGY, gpu_nodes(2, 4, 1), vec![tf()]);
    assert_eq!(
        placements(&o),
        on(&[
            ("ps-0", "node-0"),
            ("worker-0", "node-0"),
            ("ps-1", "node-1"),
            ("worker-1", "node-1")
        ])
    );
    // The task order follows the buckets: each ps, then the worker it attracts.
    let order: Vec<&str> = o.commits[0]
        .members
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(order, vec!["ps-0", "worker-0", "ps-1", "worker-1"]);
}

/// A node too small for the whole bucket loses to one that takes it all, even
/// when binpack prefers the fuller node.
#[test]
fn the_bucket_goes_where_it_fits_whole() {
    // Another job holds three of node-0's four GPUs: binpack prefers node-0.
    let other = GangKey {
        name: "other".into(),
        ..key()
    };
    let busy = (0..3)
        .map(|i| running_task(&other, &format!("busy-{i}"), 0, i))
        .collect();
    let busy = job("other", "q", 3, busy);
    let tf = || {
        let tasks = vec![
            member("ps", 0, NodePolicy::Binpack),
            member("worker", 0, NodePolicy::Binpack),
        ];
        gang(tasks, Some("ps,worker"), None)
    };
    let o = run(
        WITHOUT_TOPOLOGY,
        gpu_nodes(2, 4, 1),
        vec![busy.clone(), tf()],
    );
    assert_eq!(
        placements(&o),
        on(&[("ps-0", "node-0"), ("worker-0", "node-1")]),
        "binpack alone splits the pair"
    );
    let o = run(WITH_TOPOLOGY, gpu_nodes(2, 4, 1), vec![busy, tf()]);
    assert_eq!(
        placements(&o),
        on(&[("ps-0", "node-1"), ("worker-0", "node-1")])
    );
}

/// Tasks placed in earlier sessions repel too: a ps added to a running job
/// avoids the node of the running ps, where binpack would send it.
#[test]
fn a_ps_added_to_a_running_job_avoids_the_running_ps() {
    let mut running_ps = running_task(&key(), "ps-0", 0, 0);
    running_ps.role = Some("ps".into());
    let mut tf = gang(
        vec![running_ps, member("ps", 1, NodePolicy::Binpack)],
        None,
        Some("ps"),
    );
    tf.min_member = 1;
    let o = run(WITHOUT_TOPOLOGY, gpu_nodes(2, 4, 1), vec![tf.clone()]);
    assert_eq!(placements(&o), on(&[("ps-1", "node-0")]));
    let o = run(WITH_TOPOLOGY, gpu_nodes(2, 4, 1), vec![tf]);
    assert_eq!(placements(&o), on(&[("ps-1", "node-1")]));
}

/// Volcano refuses a topology naming a role the job does not have: the job is
/// placed exactly as without the plugin.
#[test]
fn a_topology_naming_a_missing_role_is_ignored_and_the_job_still_placed() {
    let tf = |affinity: &str| {
        let tasks = (0..2)
            .map(|i| member("ps", i, NodePolicy::Spread))
            .chain((0..2).map(|i| member("worker", i, NodePolicy::Spread)))
            .collect();
        gang(tasks, Some(affinity), Some("ps"))
    };
    let without = run(WITHOUT_TOPOLOGY, gpu_nodes(4, 4, 1), vec![tf("ps,worker")]);
    for garbage in ["ps,chief", "$%GF$^trtqwrg^", "ps,ps"] {
        let o = run(WITH_TOPOLOGY, gpu_nodes(4, 4, 1), vec![tf(garbage)]);
        assert_eq!(o.commits.len(), 1, "{garbage}: the gang is placed");
        assert_eq!(placements(&o), placements(&without), "{garbage}");
    }
}

/// The seed's PodGroup (workers attract the ps and repel each other, ps first):
/// the ps and the two workers its first bucket takes share a node, their pull to
/// the ps outweighing their repulsion; the other two workers each go to a node
/// of their own, though binpack prefers the fuller ones.
#[test]
fn the_seed_example_keeps_two_workers_with_the_ps_and_spreads_the_rest() {
    let tasks = std::iter::once(member("ps", 0, NodePolicy::Binpack))
        .chain((0..4).map(|i| member("worker", i, NodePolicy::Binpack)))
        .collect();
    let mut tf = gang(tasks, Some("worker,ps"), Some("worker"));
    if let Some(t) = tf.task_topology.as_mut() {
        t.task_order = Some("ps,worker".into());
    }
    let o = run(WITH_TOPOLOGY, gpu_nodes(4, 4, 1), vec![tf]);
    assert_eq!(
        placements(&o),
        on(&[
            ("ps-0", "node-0"),
            ("worker-0", "node-0"),
            ("worker-1", "node-0"),
            ("worker-2", "node-1"),
            ("worker-3", "node-2")
        ])
    );
}
