//! A gang's members alike are judged against every node once, not once each,
//! and the gang waits with the same message either way; a member alike to one
//! that failed before a placement is judged again.

use super::allocate::Allocate;
use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::conf::PluginOption;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{gang_key, gpu_nodes, gpu_task, job, placed_state};
use crate::volcano::framework::tiers::{Slot, Tiers};
use crate::volcano::framework::{Action, Session, TaskInfo};
use crate::volcano::objects::QueueSpec;
use std::sync::{Arc, Mutex};

/// A predicate that lets every node through and records which task it judged.
#[derive(Debug, Clone, Default)]
struct Recorder {
    judged: Arc<Mutex<Vec<String>>>,
}

impl Plugin for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn filters_nodes(&self) -> bool {
        true
    }

    fn predicate(&self, task: &TaskFacts<'_>, _: &NodeFacts<'_>) -> Result<(), String> {
        self.judged
            .lock()
            .expect("recorder")
            .push(task.name.to_string());
        Ok(())
    }
}

const NODES: usize = 3;

/// Allocates job `j` of `tasks` (minMember: all of them) on three nodes of two
/// whole GPUs; returns the tasks the predicate judged, one entry per node, and
/// the message the gang waits with.
fn allocate(tasks: Vec<TaskInfo>) -> (Vec<String>, Option<String>) {
    let recorder = Recorder::default();
    let tiers = Tiers::new(vec![vec![
        Slot::new(
            Box::new(crate::volcano::plugins::gang::Gang),
            PluginOption::named("gang"),
        ),
        Slot::new(Box::new(recorder.clone()), PluginOption::named("recorder")),
    ]]);
    let min = tasks.len();
    let mut j = job("j", "q", min, tasks);
    j.inqueue = true;
    let state = placed_state(
        gpu_nodes(NODES, 2, 1),
        vec![QueueInfo::idle(QueueSpec::new("q"))],
        vec![j],
    );
    let mut session = Session::open(state, tiers);
    Allocate.execute(&mut session);
    let outcome = session.close();
    let message = outcome
        .verdicts
        .get(&gang_key("j"))
        .and_then(|v| v.message.clone());
    let judged = recorder.judged.lock().expect("recorder").clone();
    (judged, message)
}

#[test]
fn members_alike_that_fit_no_node_are_judged_once_and_all_counted() {
    let key = gang_key("j");
    let tasks = (0..4)
        .map(|m| gpu_task(&key, &format!("m{m}"), 4))
        .collect();
    let (judged, message) = allocate(tasks);
    assert_eq!(judged, vec!["m0"; NODES], "the first member, on every node");
    assert_eq!(
        message.as_deref(),
        Some(
            "4/4 tasks in gang unschedulable: 4 did not fit any node (3 nodes NodeInsufficientDevice)"
        ),
    );
}

#[test]
fn members_asking_differently_are_each_judged() {
    let key = gang_key("j");
    let tasks = vec![
        gpu_task(&key, "m0", 4),
        gpu_task(&key, "m1", 3),
        gpu_task(&key, "m2", 4),
    ];
    let (judged, message) = allocate(tasks);
    let mut expected = vec!["m0"; NODES];
    expected.extend(vec!["m1"; NODES]);
    assert_eq!(judged, expected);
    assert_eq!(
        message.as_deref(),
        Some(
            "3/3 tasks in gang unschedulable: 3 did not fit any node (3 nodes NodeInsufficientDevice)"
        ),
    );
}

#[test]
fn a_member_alike_to_one_that_failed_before_a_placement_is_judged_again() {
    let key = gang_key("j");
    // In task order (by name here): m0 fails, m1 is placed, m2 (alike to m0)
    // meets nodes that changed.
    let tasks = vec![
        gpu_task(&key, "m0", 4),
        gpu_task(&key, "m1", 1),
        gpu_task(&key, "m2", 4),
    ];
    let (judged, _) = allocate(tasks);
    assert_eq!(judged.iter().filter(|n| *n == "m0").count(), NODES);
    assert_eq!(judged.iter().filter(|n| *n == "m2").count(), NODES);
}
