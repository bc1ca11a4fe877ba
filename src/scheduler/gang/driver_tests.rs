//! Changes that arrive together make one planning cycle: a burst of changes told
//! while the planner waits out its debounce is planned once, not once more after
//! the cycle that already saw it.

use super::start;
use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::Cluster;
use std::sync::Arc;
use std::time::Duration;

/// The planning cycles run so far, as `/metrics` counts them.
fn cycles_run(c: &Cluster) -> u64 {
    let text = c.s.metrics().render(
        &crate::ledger::Ledger::default(),
        &crate::gang::GangView::default(),
    );
    text.lines()
        .find_map(|l| l.strip_prefix(r#"vgpu_scheduler_planning_cycles_total{outcome="run"} "#))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

/// A planner that runs only when woken (its period is an hour).
fn planner(c: &Cluster) -> Vec<tokio::task::JoinHandle<()>> {
    start(
        c.s.clone(),
        Duration::from_secs(3600),
        None,
        Arc::new(|| true),
    )
}

#[tokio::test(start_paused = true)]
async fn changes_told_during_the_debounce_make_one_cycle() {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    let tasks = planner(&c);
    let wake = c.s.gang_wake();
    for _ in 0..3 {
        wake.notify_one();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(cycles_run(&c), 1);
    // A later change is planned again.
    wake.notify_one();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(cycles_run(&c), 2);
    for t in tasks {
        t.abort();
    }
}
