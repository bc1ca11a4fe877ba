//! Preempt and reclaim ask the queue even when the preemptor fits a node as it
//! stands, as Volcano does: proportion's deserved share and Open state,
//! capacity's real capability and its per-dimension rule for "within deserved".

use super::preempt::Preempt;
use super::reclaim::Reclaim;
use crate::resources::Resources;
use crate::volcano::conf::{Action, PluginOption, SchedulerConf};
use crate::volcano::framework::job::JobInfo;
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{gpu_nodes, gpu_task, job, placed_state, running_task};
use crate::volcano::framework::{Action as SessionAction, GangKey, Session};
use crate::volcano::objects::{QueueSpec, QueueState};
use crate::volcano::plugins::registry;
use std::collections::BTreeSet;

const GPU: &str = "nvidia.com/gpu";

/// Volcano's default first tier (priority, gang, conformance), then the quota
/// plugin alone; enqueue, allocate and `action`.
fn conf(quota_plugin: &str, action: Action) -> SchedulerConf {
    let mut conf = SchedulerConf {
        actions: vec![Action::Enqueue, Action::Allocate, action],
        ..SchedulerConf::default()
    };
    conf.tiers[1].plugins = vec![PluginOption::named(quota_plugin).into()];
    conf
}

fn key(name: &str) -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: name.into(),
        single: false,
    }
}

/// `n` running one-GPU tasks of job `name` (minMember 1) on `node`, from GPU `first`.
fn running(name: &str, queue: &str, node: usize, first: u32, n: u32, priority: i32) -> JobInfo {
    let k = key(name);
    let tasks = (0..n)
        .map(|i| {
            let mut t = running_task(&k, &format!("{name}-{i}"), node, first + i);
            t.priority = priority;
            t
        })
        .collect();
    let mut j = job(name, queue, 1, tasks);
    j.priority = priority;
    j
}

/// A waiting job of one one-GPU task.
fn waiting(name: &str, queue: &str, priority: i32) -> JobInfo {
    let k = key(name);
    let mut t = gpu_task(&k, &format!("{name}-0"), 1);
    t.priority = priority;
    let mut j = job(name, queue, 1, vec![t]);
    j.priority = priority;
    j
}

fn queue(spec: QueueSpec, request: i64) -> QueueInfo {
    QueueInfo {
        request: Resources::from_units([(GPU, request)]),
        ..QueueInfo::idle(spec)
    }
}

/// Two nodes of two GPUs; runs `action` alone on the session.
fn run(
    conf: &SchedulerConf,
    queues: Vec<QueueInfo>,
    jobs: Vec<JobInfo>,
    action: &dyn SessionAction,
) -> SessionOutcome {
    let state = placed_state(gpu_nodes(2, 2, 1), queues, jobs);
    let mut session = Session::open(state, registry::build(conf).expect("builds"));
    action.execute(&mut session);
    session.close()
}

fn evicted(o: &SessionOutcome) -> BTreeSet<String> {
    o.evictions().map(|e| e.name.clone()).collect()
}

fn placed(o: &SessionOutcome) -> Vec<String> {
    o.placements().map(|m| m.name.clone()).collect()
}

/// Queue `q` may hold 2 GPUs (its capability) and holds them on node-0; node-1
/// is free. A higher-priority job of `q` fits node-1 as it stands, but its queue
/// is full: it preempts the lower-priority job of its queue instead of growing
/// the queue past its limit.
#[test]
fn preempt_within_a_full_queue_evicts_rather_than_growing_past_the_queue_limit() {
    for plugin in ["proportion", "capacity"] {
        let spec = QueueSpec {
            capability: Some(Resources::from_units([(GPU, 2)])),
            deserved: Some(Resources::from_units([(GPU, 2)])),
            ..QueueSpec::new("q")
        };
        let o = run(
            &conf(plugin, Action::Preempt),
            vec![queue(spec, 3)],
            vec![running("low", "q", 0, 0, 2, 1), waiting("high", "q", 100)],
            &Preempt,
        );
        assert_eq!(evicted(&o).len(), 1, "{plugin}: {o:?}");
        assert!(
            evicted(&o).iter().all(|v| v.starts_with("low-")),
            "{plugin}: {o:?}"
        );
        assert_eq!(placed(&o), ["high-0"], "{plugin}");
    }
}

/// With room in its queue, the preemptor takes the free node and nobody goes.
#[test]
fn preempt_with_room_in_the_queue_evicts_nobody() {
    let spec = QueueSpec {
        capability: Some(Resources::from_units([(GPU, 3)])),
        deserved: Some(Resources::from_units([(GPU, 3)])),
        ..QueueSpec::new("q")
    };
    let o = run(
        &conf("capacity", Action::Preempt),
        vec![queue(spec, 3)],
        vec![running("low", "q", 0, 0, 2, 1), waiting("high", "q", 100)],
        &Preempt,
    );
    assert!(evicted(&o).is_empty(), "{o:?}");
    assert_eq!(placed(&o), ["high-0"]);
}

fn two_queues(reclaimer: QueueSpec) -> Vec<QueueInfo> {
    vec![
        queue(reclaimer, 1),
        queue(
            QueueSpec {
                reclaimable: true,
                ..QueueSpec::new("busy")
            },
            4,
        ),
    ]
}

/// Every GPU is held by queue `busy`; queue `team` waits with one task.
fn full_cluster(reclaimer: &str) -> Vec<JobInfo> {
    vec![
        running("a", "busy", 0, 0, 2, 1),
        running("b", "busy", 1, 0, 2, 1),
        waiting("w", reclaimer, 1),
    ]
}

/// A Closed queue reclaims nothing under proportion, as under capacity.
#[test]
fn a_closed_queue_does_not_reclaim() {
    for plugin in ["proportion", "capacity"] {
        let team = |state| QueueSpec {
            state,
            deserved: Some(Resources::from_units([(GPU, 2)])),
            ..QueueSpec::new("team")
        };
        let open = run(
            &conf(plugin, Action::Reclaim),
            two_queues(team(QueueState::Open)),
            full_cluster("team"),
            &Reclaim,
        );
        assert_eq!(evicted(&open).len(), 1, "{plugin}: {open:?}");
        let closed = run(
            &conf(plugin, Action::Reclaim),
            two_queues(team(QueueState::Closed)),
            full_cluster("team"),
            &Reclaim,
        );
        assert!(evicted(&closed).is_empty(), "{plugin}: {closed:?}");
    }
}

/// Capacity: the per-dimension rule for "within deserved" does not let a queue
/// reclaim past its real capability: a task within the deserved GPUs but asking
/// more CPU than the queue may ever hold reclaims nothing.
#[test]
fn capacity_reclaims_only_within_the_real_capability() {
    let team = QueueSpec {
        capability: Some(Resources::from_units([("cpu", 1)])),
        deserved: Some(Resources::from_units([(GPU, 2), ("cpu", 1)])),
        ..QueueSpec::new("team")
    };
    let o = reclaim_for_a_cpu_asker(team);
    assert!(evicted(&o).is_empty(), "{o:?}");
}

/// Reclaim under capacity for queue `team`, whose waiting task asks one GPU and
/// four CPUs, on a cluster whose every GPU queue `busy` holds.
fn reclaim_for_a_cpu_asker(team: QueueSpec) -> SessionOutcome {
    let mut jobs = full_cluster("team");
    if let Some(j) = jobs.last_mut() {
        for t in &mut j.tasks {
            t.resreq.set("cpu", 4000);
            t.requests.set("cpu", 4000);
        }
    }
    run(
        &conf("capacity", Action::Reclaim),
        two_queues(team),
        jobs,
        &Reclaim,
    )
}

/// Capacity's per-dimension rule: a task asking GPUs and CPU reclaims when it
/// stays within the deserved GPUs, although the queue's CPU is past its
/// deserved amount.
#[test]
fn capacity_reclaims_when_one_asked_dimension_is_within_deserved() {
    let team = QueueSpec {
        deserved: Some(Resources::from_units([(GPU, 2), ("cpu", 1)])),
        ..QueueSpec::new("team")
    };
    let o = reclaim_for_a_cpu_asker(team);
    assert_eq!(evicted(&o).len(), 1, "{o:?}");
}

/// Hierarchical capacity: queue `a1` reclaims from its sibling `a2` before it
/// reaches into queue `b`, although `b`'s pods matter less (Volcano's victim
/// queue order: the queues sharing the deepest ancestor first).
#[test]
fn hierarchical_capacity_reclaims_from_the_nearest_queue_first() {
    let mut conf = conf("capacity", Action::Reclaim);
    std::sync::Arc::make_mut(&mut conf.tiers[1].plugins[0])
        .flags
        .insert("enableHierarchy".into(), true);
    let spec = |name: &str, parent: Option<&str>, deserved: i64| QueueSpec {
        parent: parent.map(str::to_owned),
        deserved: Some(Resources::from_units([(GPU, deserved)])),
        reclaimable: true,
        ..QueueSpec::new(name)
    };
    let queues = vec![
        queue(spec("a", None, 2), 3),
        queue(spec("a1", Some("a"), 1), 1),
        queue(spec("a2", Some("a"), 1), 2),
        queue(spec("b", None, 2), 2),
    ];
    // Each node holds one pod of a2 (GPU 0) and one of b (GPU 1).
    let jobs = vec![
        running("a2n0", "a2", 0, 0, 1, 10),
        running("a2n1", "a2", 1, 0, 1, 10),
        running("bn0", "b", 0, 1, 1, 1),
        running("bn1", "b", 1, 1, 1, 1),
        waiting("w", "a1", 100),
    ];
    let o = run(&conf, queues, jobs, &Reclaim);
    assert_eq!(evicted(&o).len(), 1, "{o:?}");
    assert!(
        evicted(&o).iter().all(|v| v.starts_with("a2n")),
        "{:?}",
        evicted(&o)
    );
}
