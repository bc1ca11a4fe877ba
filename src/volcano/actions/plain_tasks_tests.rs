//! Tasks that ask for no vGPU, through a session: they are placed by what they
//! request of a node (CPU, memory, a pod slot), counted on it once placed, whole
//! gangs or none; a preemptor among them that does not fit makes room like a
//! vGPU one; and they are never evicted for a vGPU preemptor, which they free
//! nothing for.

use super::allocate::Allocate;
use super::preempt::Preempt;
use crate::node_load::NodeResources;
use crate::placement::node_traits::NodeTraits;
use crate::placement::pod_affinity::AffinityPod;
use crate::placement::resource_fit::pod_footprint;
use crate::resources::Resources;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::conf_fixture::priority_gang_then;
use crate::volcano::framework::job::{JobInfo, TaskInfo, TaskPlacement};
use crate::volcano::framework::nodes::{NodeSet, SessionNode};
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::framework::testing::{gang_key, job, state, task};
use crate::volcano::framework::{Action, QueueInfo, Session, TaskStatus};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Allocate and preempt, the predicates deciding where.
fn conf() -> String {
    priority_gang_then("allocate, preempt", &[("predicates", &[])])
}

/// A gated task whose pod requests `cpu` CPUs.
pub(super) fn cpu_task(job: &str, name: &str, cpu: i64) -> TaskInfo {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }))
    .expect("pod");
    let requests = Resources::from_units([("cpu", cpu)]);
    let mut t = task(&gang_key(job), name, requests);
    t.pod = Arc::new(pod);
    t
}

/// The same task running on `node`.
pub(super) fn running(mut t: TaskInfo, node: &str) -> TaskInfo {
    t.status = TaskStatus::Running;
    t.gated = false;
    t.placement = Some(TaskPlacement {
        node: node.into(),
        devices: Vec::new(),
        init_count: 0,
    });
    t
}

/// Nodes without GPUs of `cpu` CPUs and `pods` pod slots each, holding what the
/// running tasks on them request (as the pod watch counts them).
fn cpu_nodes(nodes: &[(&str, i64, i64)], jobs: &[JobInfo]) -> NodeSet {
    labelled_cpu_nodes(nodes, &|_| BTreeMap::new(), jobs)
}

/// [`cpu_nodes`] whose labels `labels` gives by node name; the running tasks on
/// them are also seen as the pod watch keeps them for inter-pod affinity.
pub(super) fn labelled_cpu_nodes(
    nodes: &[(&str, i64, i64)],
    labels: &dyn Fn(&str) -> BTreeMap<String, String>,
    jobs: &[JobInfo],
) -> NodeSet {
    let nodes = nodes
        .iter()
        .map(|(name, cpu, pods)| {
            let mut requested = Resources::default();
            let mut on_node = Vec::new();
            for t in jobs.iter().flat_map(|j| &j.tasks) {
                if t.placement.as_ref().is_some_and(|p| p.node == *name) {
                    requested.add(&pod_footprint(&t.pod));
                    on_node.push(Arc::new(AffinityPod::of(&t.pod)));
                }
            }
            SessionNode::new(
                (*name).into(),
                Arc::default(),
                NodeResources {
                    allocatable: Resources::from_units([("cpu", *cpu), ("pods", *pods)]),
                    requested,
                    traits: Some(Arc::new(NodeTraits {
                        labels: labels(name),
                        ..NodeTraits::default()
                    })),
                    pods: Arc::new(on_node),
                },
            )
        })
        .collect();
    NodeSet::new(nodes, BTreeMap::new())
}

fn run(nodes: &[(&str, i64, i64)], jobs: Vec<JobInfo>, actions: &[&dyn Action]) -> SessionOutcome {
    let nodes = cpu_nodes(nodes, &jobs);
    run_on(nodes, jobs, actions)
}

/// Runs `actions` in a session over `nodes` and `jobs`, with [`conf`].
pub(super) fn run_on(
    nodes: NodeSet,
    jobs: Vec<JobInfo>,
    actions: &[&dyn Action],
) -> SessionOutcome {
    run_with(&conf(), nodes, jobs, actions)
}

/// Runs `actions` in a session over `nodes` and `jobs`, with the configuration
/// `conf`.
pub(super) fn run_with(
    conf: &str,
    nodes: NodeSet,
    jobs: Vec<JobInfo>,
    actions: &[&dyn Action],
) -> SessionOutcome {
    let conf = SchedulerConf::parse(conf).expect("conf");
    let mut st = state(
        Resources::from_units([("cpu", 64)]),
        vec![QueueInfo::idle(QueueSpec::new("q"))],
        Vec::new(),
    );
    st.nodes = nodes;
    st.jobs = jobs
        .into_iter()
        .map(|j| (j.key.clone(), std::sync::Arc::new(j)))
        .collect();
    let mut session = Session::open(st, registry::build(&conf).expect("builds"));
    for action in actions {
        action.execute(&mut session);
    }
    session.close()
}

/// Where each planned member of the outcome goes, by name.
pub(super) fn planned(o: &SessionOutcome) -> BTreeMap<String, Option<String>> {
    o.commits
        .iter()
        .flat_map(|c| &c.members)
        .map(|m| (m.name.clone(), m.placement.as_ref().map(|p| p.node.clone())))
        .collect()
}

#[test]
fn a_cpu_only_gang_that_does_not_fit_whole_is_not_placed_at_all() {
    let gang = job(
        "mpi",
        "q",
        2,
        vec![cpu_task("mpi", "launcher", 5), cpu_task("mpi", "worker", 5)],
    );
    let o = run(&[("a", 8, 110)], vec![gang], &[&Allocate]);
    assert!(o.commits.is_empty(), "{:?}", planned(&o));
    let verdict = &o.verdicts[&gang_key("mpi")];
    let message = verdict.message.as_deref().unwrap_or("");
    assert!(message.contains("Insufficient cpu"), "{message}");
}

#[test]
fn cpu_only_members_are_planned_onto_nodes_with_room_counting_each_other() {
    let gang = job(
        "mpi",
        "q",
        3,
        vec![
            cpu_task("mpi", "launcher", 5),
            cpu_task("mpi", "w0", 5),
            cpu_task("mpi", "w1", 5),
        ],
    );
    // Room for two five-CPU members on a, one on b; c has CPUs but no pod slot.
    let o = run(
        &[("a", 10, 110), ("b", 6, 110), ("c", 64, 0)],
        vec![gang],
        &[&Allocate],
    );
    let nodes = planned(&o);
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    let on = |n: &str| nodes.values().filter(|v| v.as_deref() == Some(n)).count();
    assert_eq!((on("a"), on("b"), on("c")), (2, 1, 0), "{nodes:?}");
}

#[test]
fn a_cpu_only_preemptor_that_does_not_fit_evicts_a_lower_priority_pod() {
    let mut victim = running(cpu_task("batch", "batch-0", 6), "a");
    victim.priority = 1;
    let mut batch = job("batch", "q", 1, vec![victim]);
    batch.priority = 1;
    let mut preemptor = cpu_task("urgent", "urgent-0", 4);
    preemptor.priority = 100;
    let mut urgent = job("urgent", "q", 1, vec![preemptor]);
    urgent.priority = 100;
    let o = run(
        &[("a", 8, 110)],
        vec![batch, urgent],
        &[&Allocate, &Preempt],
    );
    let evicted: Vec<&str> = o.evictions().map(|e| e.name.as_str()).collect();
    assert_eq!(evicted, vec!["batch-0"]);
    assert_eq!(
        planned(&o).get("urgent-0"),
        Some(&Some("a".to_string())),
        "pipelined where the room is made"
    );
}

#[test]
fn a_pod_holding_no_gpu_is_not_evicted_for_a_vgpu_preemptor() {
    use crate::volcano::framework::testing::{gpu_nodes, gpu_task, placed_state, running_task};
    let mut cpu_pod = running(cpu_task("web", "web-0", 2), "node-0");
    cpu_pod.priority = 1;
    let mut web = job("web", "q", 1, vec![cpu_pod]);
    web.priority = 1;
    let mut gpu_pod = running_task(&gang_key("train"), "train-0", 0, 0);
    gpu_pod.priority = 50;
    let mut train = job("train", "q", 1, vec![gpu_pod]);
    train.priority = 50;
    let mut preemptor = gpu_task(&gang_key("urgent"), "urgent-0", 1);
    preemptor.priority = 100;
    let mut urgent = job("urgent", "q", 1, vec![preemptor]);
    urgent.priority = 100;
    let conf = SchedulerConf::parse(&conf()).expect("conf");
    let st = placed_state(
        gpu_nodes(1, 1, 1),
        vec![QueueInfo::idle(QueueSpec::new("q"))],
        vec![web, train, urgent],
    );
    let mut session = Session::open(st, registry::build(&conf).expect("builds"));
    Preempt.execute(&mut session);
    let o = session.close();
    let evicted: Vec<&str> = o.evictions().map(|e| e.name.as_str()).collect();
    assert_eq!(
        evicted,
        vec!["train-0"],
        "the lower-priority CPU pod frees no GPU"
    );
}
