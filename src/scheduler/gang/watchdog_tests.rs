//! A gang whose plan ran out with fewer members started than its minimum has
//! its started members evicted, once; a gang still within its plan, or whose
//! missing member may still come, is left alone.

use crate::scheduler::GangConfig;
use crate::scheduler::gang_tests::Cluster;
use std::time::Duration;

/// Gang `train` of two planned on one node, `t0` bound there, `t1` gone.
async fn half_started_gang() -> Cluster {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.gang("train", 2, "default", "t", 2);
    c.s.run_gang_cycle().await;
    assert!(
        !c.gated("t0").await && !c.gated("t1").await,
        "planned whole"
    );
    let nodes = c.filter("t0").await.expect("t0 follows its plan");
    c.bind("t0", &nodes[0]).await.expect("t0 binds");
    c.s.forget_pod("uid-t1");
    c
}

#[tokio::test]
async fn a_gang_half_started_when_its_plan_runs_out_has_its_started_members_evicted() {
    let c = half_started_gang().await;
    let timeout = GangConfig::default().timeout;
    c.clock.advance(timeout - Duration::from_secs(1));
    c.s.run_gang_cycle().await;
    assert!(
        c.memory.take_evicted().is_empty(),
        "the plan has not run out yet"
    );
    c.clock.advance(Duration::from_secs(2));
    c.s.run_gang_cycle().await;
    assert_eq!(c.evicted(), vec!["ml/t0".to_string()]);
}

#[tokio::test]
async fn a_gang_whose_missing_member_still_waits_is_not_evicted() {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.gang("train", 2, "default", "t", 2);
    c.s.run_gang_cycle().await;
    let nodes = c.filter("t0").await.expect("t0 follows its plan");
    c.bind("t0", &nodes[0]).await.expect("t0 binds");
    c.clock
        .advance(GangConfig::default().timeout + Duration::from_secs(1));
    c.s.run_gang_cycle().await;
    assert!(
        c.memory.take_evicted().is_empty(),
        "t1 is still coming: the start has not failed"
    );
}
