//! A PodGroup created before its pods, as a Volcano Job's controller creates it:
//! enqueue admits it (Pending → Inqueue) and writes that status, because the
//! controller creates the pods only once the PodGroup reads Inqueue; the pods
//! then run as any gang's do.

use super::gang_tests::{Cluster, member, podgroup, queue};
use crate::scheduler::GangConfig;
use serde_json::json;

async fn schedule(c: &Cluster, name: &str) {
    let nodes = c
        .filter(name)
        .await
        .unwrap_or_else(|e| panic!("filter {name}: {e}"));
    c.bind(name, &nodes[0])
        .await
        .unwrap_or_else(|e| panic!("bind {name}: {e}"));
}

#[tokio::test]
async fn a_podgroup_without_pods_is_admitted_and_its_pods_run_once_created() {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.s.apply_queue(&queue("team", json!({"weight": 1})));
    c.s.apply_podgroup(&podgroup("job", 2, "team", json!({})));
    assert_eq!(c.s.run_gang_cycle().await, 0);
    let status = c.status("PodGroup ml/job");
    assert_eq!(status["phase"], "Inqueue", "{status}");
    assert_eq!(c.verdict("ml/job").members, 0);
    let team = c.status("Queue team");
    assert_eq!(team["inqueue"], 1, "{team}");
    // Another cycle with still no pods: still Inqueue, not taken back to Pending.
    c.s.run_gang_cycle().await;
    assert_eq!(c.status("PodGroup ml/job")["phase"], "Inqueue");
    // The pods come one at a time: with one of two, the group stays Inqueue.
    c.add(&member("job-0", "job", 0));
    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(c.status("PodGroup ml/job")["phase"], "Inqueue");
    assert!(c.gated("job-0").await);
    c.add(&member("job-1", "job", 1));
    assert_eq!(c.s.run_gang_cycle().await, 1);
    schedule(&c, "job-0").await;
    schedule(&c, "job-1").await;
    c.s.run_gang_cycle().await;
    let status = c.status("PodGroup ml/job");
    assert_eq!(status["phase"], "Running", "{status}");
}

#[tokio::test]
async fn a_podgroup_without_pods_beyond_its_queue_capability_stays_pending() {
    let c = Cluster::new(&[("n1", 4)], GangConfig::default());
    c.s.apply_queue(&queue(
        "small",
        json!({"weight": 1, "capability": {"nvidia.com/gpu": "1"}}),
    ));
    let mut group = podgroup("big", 2, "small", json!({}));
    group["spec"]["minResources"] = json!({"nvidia.com/gpu": "2"});
    c.s.apply_podgroup(&group);
    c.s.run_gang_cycle().await;
    let status = c.status("PodGroup ml/big");
    assert_eq!(status["phase"], "Pending", "{status}");
    assert_eq!(
        status["conditions"][0]["reason"], "NotEnoughResources",
        "{status}"
    );
}

#[tokio::test]
async fn a_finished_podgroup_whose_pods_are_gone_keeps_its_status() {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    let mut group = podgroup("done", 1, "default", json!({}));
    group["status"] = json!({"phase": "Completed", "succeeded": 1});
    c.s.apply_podgroup(&group);
    c.s.run_gang_cycle().await;
    assert!(c.status("PodGroup ml/done").is_null());
    assert!(c.s.gang_view().gangs.iter().all(|g| g.gang != "ml/done"));
}
