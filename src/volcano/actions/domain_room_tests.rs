//! The gang eviction actions passing over the domains that cannot hold a gang
//! even with every victim there gone: no trial there, and the same decisions
//! as trying every victim bundle, for GPU gangs and gangs without GPUs, in
//! gangpreempt and gangreclaim alike.

use super::domain_room::could_hold;
use super::gang_eviction::{GangEvictionRules, RoomCheck, SearchEffort, evict_for_checking_room};
use super::gang_eviction_arguments::GangEvictionArguments;
use super::gang_eviction_tests::{CONF, names, queues, training_gang, waiting};
use super::gang_preempt::PreemptRules;
use super::gang_reclaim::ReclaimRules;
use crate::resources::Resources;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::Session;
use crate::volcano::framework::job::{JobInfo, TaskInfo, TaskPlacement, TaskStatus};
use crate::volcano::framework::nodes::NodeSet;
use crate::volcano::framework::testing::{
    gang_key, gpu_nodes, gpu_task, job, placed_state, running_task, task,
};
use crate::volcano::plugins::registry;
use proptest::prelude::*;
use std::collections::BTreeSet;

/// gangpreempt's search for `waiting`'s plan over two nodes of two GPUs:
/// whether a plan was found (`Err`: why not) and the effort it took.
fn search_for(jobs: Vec<JobInfo>, waiting: &str) -> (Result<bool, String>, SearchEffort) {
    let (found, effort, _) =
        search_in(gpu_nodes(2, 2, 1), jobs, waiting, &PreemptRules, could_hold);
    (found, effort)
}

/// The search of the action of `rules` for `waiting`'s plan over `nodes`,
/// passing over the domains `room` rejects: whether a plan was found, the
/// effort, who it evicts.
fn search_in(
    nodes: NodeSet,
    jobs: Vec<JobInfo>,
    waiting: &str,
    rules: &dyn GangEvictionRules,
    room: RoomCheck,
) -> (Result<bool, String>, SearchEffort, BTreeSet<String>) {
    let conf = SchedulerConf::parse(CONF).expect("conf");
    let state = placed_state(nodes, queues(), jobs);
    let mut session = Session::open(state, registry::build(&conf).expect("builds"));
    let mut effort = SearchEffort::default();
    let found = evict_for_checking_room(
        &mut session,
        rules,
        GangEvictionArguments::default(),
        &gang_key(waiting),
        &mut effort,
        room,
    );
    let found = found.map(|plan| plan.is_some());
    (found, effort, session.evicted().clone())
}

#[test]
fn gang_preempt_tries_no_plan_where_every_victim_gone_still_leaves_too_few_gpus() {
    // Two waiting tasks of three GPUs each: six, and the cluster has four, all
    // held by lower-priority gangs that could each go whole.
    let k = gang_key("wide");
    let tasks = (0..2)
        .map(|i| gpu_task(&k, &format!("wide-{i}"), 3))
        .collect();
    let mut wide = job("wide", "training", 2, tasks);
    wide.priority = 100;
    let jobs = vec![training_gang("a", 0, 10), training_gang("b", 1, 10), wide];
    let (found, effort) = search_for(jobs, "wide");
    assert_eq!(
        found,
        Err("its waiting tasks do not fit in <cluster-top-hypernode> even with every victim there gone".into())
    );
    assert_eq!(
        effort,
        SearchEffort {
            trials: 0,
            domains_without_room: 1
        }
    );
}

#[test]
fn gang_preempt_still_tries_plans_where_the_victims_make_enough_room() {
    let jobs = vec![
        training_gang("low", 0, 10),
        training_gang("high", 1, 1000),
        waiting("urgent", "training", 100),
    ];
    let (found, effort) = search_for(jobs, "urgent");
    assert_eq!(found, Ok(true));
    assert_eq!(
        effort,
        SearchEffort {
            trials: 1,
            domains_without_room: 0
        }
    );
}

/// Every GPU of a small cluster held by a training job or free, and a waiting
/// gang of a few multi-GPU tasks: of higher priority in training (gangpreempt),
/// or in inference (gangreclaim).
#[derive(Debug, Clone)]
struct Crowd {
    reclaim: bool,
    gpus_per_node: u32,
    slots: u32,
    /// Per node, per GPU: the victim job holding it, if any.
    held: Vec<Vec<Option<usize>>>,
    /// Per victim job: its priority and how many of its tasks it needs.
    victims: Vec<(i32, usize)>,
    /// Per waiting task, its GPUs.
    wants: Vec<u32>,
}

fn crowd() -> impl Strategy<Value = Crowd> {
    (any::<bool>(), 1usize..=3, 1u32..=3, 1u32..=2).prop_flat_map(
        |(reclaim, nodes, gpus_per_node, slots)| {
            (
                proptest::collection::vec(
                    proptest::collection::vec(
                        proptest::option::of(0usize..3),
                        gpus_per_node as usize,
                    ),
                    nodes,
                ),
                proptest::collection::vec(
                    (prop_oneof![Just(10), Just(20), Just(500)], 1usize..=3),
                    3,
                ),
                proptest::collection::vec(1u32..=3, 1..=3),
            )
                .prop_map(move |(held, victims, wants)| Crowd {
                    reclaim,
                    gpus_per_node,
                    slots,
                    held,
                    victims,
                    wants,
                })
        },
    )
}

impl Crowd {
    fn nodes(&self) -> NodeSet {
        gpu_nodes(self.held.len(), self.gpus_per_node, self.slots)
    }

    fn jobs(&self) -> Vec<JobInfo> {
        let mut jobs = Vec::new();
        for (v, (priority, min)) in self.victims.iter().enumerate() {
            let name = format!("v{v}");
            let k = gang_key(&name);
            let mut tasks = Vec::new();
            for (node, gpus) in self.held.iter().enumerate() {
                for (gpu, holder) in gpus.iter().enumerate() {
                    if *holder == Some(v) {
                        let task = format!("{name}-{node}-{gpu}");
                        tasks.push(running_task(&k, &task, node, gpu as u32));
                    }
                }
            }
            if tasks.is_empty() {
                continue;
            }
            let min = (*min).min(tasks.len());
            let mut j = job(&name, "training", min, tasks);
            j.priority = *priority;
            jobs.push(j);
        }
        let k = gang_key("wide");
        let tasks = self
            .wants
            .iter()
            .enumerate()
            .map(|(i, gpus)| gpu_task(&k, &format!("wide-{i}"), *gpus))
            .collect();
        let queue = if self.reclaim {
            "inference"
        } else {
            "training"
        };
        let mut wide = job("wide", queue, self.wants.len(), tasks);
        wide.priority = 100;
        jobs.push(wide);
        jobs
    }

    fn rules(&self) -> &'static dyn GangEvictionRules {
        if self.reclaim {
            &ReclaimRules
        } else {
            &PreemptRules
        }
    }
}

proptest! {
    /// Passing over the domains that cannot hold the gang changes no decision:
    /// the same plan, the same victims, as trying every bundle there.
    #[test]
    fn passing_over_domains_without_room_decides_as_trying_them(c in crowd()) {
        let try_all: RoomCheck = |_, _, _, _, _| true;
        let (found, effort, evicted) = search_in(c.nodes(), c.jobs(), "wide", c.rules(), could_hold);
        let (found_all, effort_all, evicted_all) = search_in(c.nodes(), c.jobs(), "wide", c.rules(), try_all);
        prop_assert_eq!(found.is_ok(), found_all.is_ok());
        prop_assert_eq!(found.ok(), found_all.ok());
        prop_assert_eq!(evicted, evicted_all);
        prop_assert!(effort.trials <= effort_all.trials);
    }
}

/// One node of 4 CPUs, both taken by a running gang `low` of two 2-CPU tasks.
fn cpu_node_and_low_gang() -> (NodeSet, JobInfo) {
    let node = crate::volcano::framework::nodes::SessionNode::new(
        "node-0".into(),
        Default::default(),
        crate::node_load::NodeResources {
            allocatable: Resources::from_units([("cpu", 4), ("pods", 110)]),
            requested: Resources::from_units([("cpu", 4), ("pods", 2)]),
            ..Default::default()
        },
    );
    let k = gang_key("low");
    let tasks = (0..2)
        .map(|i| {
            let mut t = cpu_task(&k, &format!("low-{i}"), 2);
            t.status = TaskStatus::Running;
            t.gated = false;
            t.placement = Some(TaskPlacement {
                node: "node-0".into(),
                devices: Vec::new(),
                init_count: 0,
            });
            t
        })
        .collect();
    let mut low = job("low", "training", 2, tasks);
    low.priority = 10;
    (NodeSet::new(vec![node], Default::default()), low)
}

/// A pending task without GPUs whose pod requests `cpus` CPUs.
fn cpu_task(job: &crate::volcano::framework::GangKey, name: &str, cpus: i64) -> TaskInfo {
    let mut t = task(job, name, Resources::from_units([("cpu", cpus)]));
    t.pod = std::sync::Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpus.to_string()}}}]}
        }))
        .expect("pod"),
    );
    t
}

/// A waiting gang of two tasks of `cpus` CPUs each, above `low`'s priority.
fn cpu_gang(cpus: i64) -> JobInfo {
    let k = gang_key("cpu");
    let tasks = (0..2)
        .map(|i| cpu_task(&k, &format!("cpu-{i}"), cpus))
        .collect();
    let mut j = job("cpu", "training", 2, tasks);
    j.priority = 100;
    j
}

#[test]
fn a_gang_without_gpus_is_held_to_the_cpus_the_victims_would_leave() {
    let try_all: RoomCheck = |_, _, _, _, _| true;
    // Two tasks of 3 CPUs: 6, and the node has 4 even with low gone.
    let (node, low) = cpu_node_and_low_gang();
    let (found, effort, _) = search_in(
        node.clone(),
        vec![low.clone(), cpu_gang(3)],
        "cpu",
        &PreemptRules,
        could_hold,
    );
    assert!(found.is_err(), "{found:?}");
    assert_eq!(
        effort,
        SearchEffort {
            trials: 0,
            domains_without_room: 1
        }
    );
    let (tried, _, _) = search_in(
        node.clone(),
        vec![low.clone(), cpu_gang(3)],
        "cpu",
        &PreemptRules,
        try_all,
    );
    assert!(
        tried.is_err(),
        "trying anyway finds nothing either: {tried:?}"
    );
    // Two tasks of 2 CPUs fit once low is gone: tried, and low goes.
    let (found, effort, evicted) = search_in(
        node,
        vec![low, cpu_gang(2)],
        "cpu",
        &PreemptRules,
        could_hold,
    );
    assert_eq!(found, Ok(true));
    assert_eq!(effort.trials, 1);
    assert_eq!(evicted, names(&["uid-low-0", "uid-low-1"]));
}
