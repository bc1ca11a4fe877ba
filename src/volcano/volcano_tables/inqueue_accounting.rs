//! Two scenarios Volcano writes alike for its proportion and capacity plugins
//! (`TestJobEnqueuedOnOtherPluginsReject` and
//! `TestNoDoubleCountingForInqueueJobWithBindingTasks` in both test files): what
//! an admitted job reserves in its queue, and when. Each plugin's module runs
//! them with its own queue and states Volcano's expectation.

use super::support::{Table, bound, group, node_alloc, phase, pod, resources, tiers_conf};
use crate::volcano::actions::allocate::Allocate;
use crate::volcano::actions::enqueue::Enqueue;
use crate::volcano::framework::{Action, GangPhase};
use crate::volcano::objects::QueueSpec;
use std::collections::BTreeMap;

/// pgA and pgB (one 1-CPU pod each, minResources the same) wait in `q1`, which
/// has room for one of them; enqueue with `plugin` and capacity-card in one
/// tier. Volcano's second plugin of the tier is written inside its test to
/// refuse pgA by name; here capacity-card refuses it for a real reason when
/// `card_asked` (pgA's minimum asks an A100 card, of which q1's card quota allows
/// none). The phases of pgA and pgB after it.
pub(super) fn enqueue_after_a_co_tier_refusal(
    plugin: &str,
    mut q1: QueueSpec,
    card_asked: bool,
) -> (Option<GangPhase>, Option<GangPhase>) {
    let mut pg_a = group("pgA", "q1", 1, GangPhase::Pending);
    let mut min_a = resources("1", "1G");
    if card_asked {
        min_a.set("card/NVIDIA-A100", 1000);
    }
    pg_a.min_resources = Some(min_a);
    let mut pg_b = group("pgB", "q1", 1, GangPhase::Pending);
    pg_b.min_resources = Some(resources("1", "1G"));
    q1.card_quota.insert("NVIDIA-A100".into(), 0);
    let t = Table {
        nodes: vec![("n1", node_alloc("4", "4G", 10))],
        queues: vec![q1],
        groups: vec![pg_a, pg_b],
        pods: vec![
            pod("podA", "", false, resources("1", "1G"), "pgA"),
            pod("podB", "", false, resources("1", "1G"), "pgB"),
        ],
        ..Table::default()
    };
    let conf = tiers_conf(
        "enqueue",
        &[&[
            (plugin, &["JobEnqueued"]),
            ("capacity-card", &["JobEnqueued"]),
        ]],
    );
    let o = t.run(&conf, &[&Enqueue as &dyn Action]);
    (phase(&o, "pgA"), phase(&o, "pgB"))
}

/// Two scheduling cycles with `plugin` alone (allocatable, overused, enqueued)
/// on n1 (4 CPUs, 8Gi), `q1` holding 4 CPUs. Cycle 1 allocates pgA (Inqueue,
/// three 1-CPU pods, minResources 3 CPUs and 3Gi); cycle 2 sees pgA's pods bound
/// to n1 while its PodGroup still reads Inqueue, and pgB (Pending, one 1-CPU pod)
/// arrives: the CPU left is pgB's unless pgA's minimum is counted both as held
/// and as reserved. The pods each cycle binds.
pub(super) fn binding_tasks_then_a_newcomer(
    plugin: &str,
    q1: QueueSpec,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let one = || resources("1", "1Gi");
    let mut pg_a = group("pgA", "q1", 3, GangPhase::Inqueue);
    pg_a.min_resources = Some(resources("3", "3Gi"));
    let mut t = Table {
        nodes: vec![("n1", node_alloc("4", "8Gi", 10))],
        queues: vec![q1],
        groups: vec![pg_a],
        pods: ["pA1", "pA2", "pA3"]
            .into_iter()
            .map(|name| pod(name, "", false, one(), "pgA"))
            .collect(),
        ..Table::default()
    };
    let conf = |actions| {
        tiers_conf(
            actions,
            &[&[(plugin, &["Allocatable", "Overused", "JobEnqueued"])]],
        )
    };
    let cycle1 = bound(&t.run(&conf("allocate"), &[&Allocate as &dyn Action]));
    // Bound where cycle 1 put them (the one node), not yet seen running.
    for p in &mut t.pods {
        p.node = "n1";
        p.running = true;
    }
    let mut pg_b = group("pgB", "q1", 1, GangPhase::Pending);
    pg_b.min_resources = Some(one());
    t.groups.push(pg_b);
    t.pods.push(pod("pB1", "", false, one(), "pgB"));
    let cycle2 = t.run(
        &conf("enqueue, allocate"),
        &[&Enqueue as &dyn Action, &Allocate],
    );
    (cycle1, bound(&cycle2))
}
