//! Figures a plugin kept from one session go to the next session's plugin only
//! when that plugin was built from the same configuration entry: a reloaded
//! configuration that changes a plugin's arguments or switches makes it derive
//! everything again, whatever its figures depend on.

use super::testing::{gang_key, gpus, job, state, task};
use super::{QueueInfo, SessionState, TaskStatus, Tiers};
use crate::volcano::conf::SchedulerConf;
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use std::sync::Arc;

/// drf alone, with `switches` (indented YAML lines under its entry).
fn drf(switches: &str) -> Tiers {
    let conf = format!("actions: allocate\ntiers:\n- plugins:\n  - name: drf\n{switches}");
    registry::build(&SchedulerConf::parse(&conf).expect("parses")).expect("builds")
}

/// A cluster of 4 GPUs in which one job runs on 2 (drf keeps its share).
fn cluster() -> SessionState {
    let key = gang_key("a");
    let tasks = (0..2)
        .map(|i| {
            let mut t = task(&key, &format!("a-{i}"), gpus(1));
            t.status = TaskStatus::Running;
            t
        })
        .collect();
    let mut st = state(
        gpus(4),
        vec![QueueInfo::idle(QueueSpec::new("q"))],
        Vec::new(),
    );
    let running = Arc::new(job("a", "q", 1, tasks));
    st.jobs.insert(running.key.clone(), running);
    st
}

/// What plugins built with `now` hold, before opening, once handed what plugins
/// built with `before` kept from a session over the cluster.
fn handed(before: &str, now: &str) -> String {
    let mut last = drf(before);
    last.open(&cluster());
    let mut next = drf(now);
    next.reuse(last.keep());
    format!("{:?}", next.keep())
}

/// What plugins built with `switches` keep from a session over the cluster.
fn derived(switches: &str) -> String {
    let mut tiers = drf(switches);
    tiers.open(&cluster());
    format!("{:?}", tiers.keep())
}

/// What plugins built with `switches` hold before anything is handed to them.
fn nothing(switches: &str) -> String {
    format!("{:?}", drf(switches).keep())
}

const PLAIN: &str = "";
const HIERARCHY: &str = "    enableHierarchy: true\n";
const NO_JOB_ORDER: &str = "    enableJobOrder: false\n";

#[test]
fn kept_figures_go_to_a_plugin_built_from_the_same_entry() {
    assert_ne!(
        derived(PLAIN),
        nothing(PLAIN),
        "drf keeps the running job's share"
    );
    assert_eq!(handed(PLAIN, PLAIN), derived(PLAIN));
    assert_eq!(handed(HIERARCHY, HIERARCHY), derived(HIERARCHY));
}

#[test]
fn kept_figures_are_dropped_when_the_plugins_entry_changed() {
    for (before, now) in [
        (PLAIN, HIERARCHY),
        (HIERARCHY, PLAIN),
        (PLAIN, NO_JOB_ORDER),
    ] {
        assert_eq!(
            handed(before, now),
            nothing(now),
            "drf built with {now:?} after drf built with {before:?}"
        );
    }
}
