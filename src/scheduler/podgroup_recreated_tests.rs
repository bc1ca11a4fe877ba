//! A Volcano PodGroup deleted and made again between two cycles (a Job
//! resubmitted under the same name) is a new object with no status: it gets
//! its status although the gang's verdict did not change.

use super::gang_tests::{Cluster, podgroup, queue};
use crate::cluster::api::VolcanoObject;
use crate::scheduler::GangConfig;
use serde_json::json;

fn the_group() -> VolcanoObject {
    VolcanoObject::PodGroup {
        namespace: "ml".into(),
        name: "job".into(),
    }
}

/// A PodGroup `ml/job` admitted by a first cycle, its status written.
async fn admitted_job() -> Cluster {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.s.apply_queue(&queue("team", json!({"weight": 1})));
    c.s.apply_podgroup(&podgroup("job", 2, "team", json!({})));
    c.s.run_gang_cycle().await;
    assert_eq!(c.status("PodGroup ml/job")["phase"], "Inqueue");
    c
}

#[tokio::test]
async fn a_podgroup_made_again_within_a_cycle_gets_its_status_again() {
    let c = admitted_job().await;

    // Deleted and made again before the next cycle: same name, same verdict.
    c.s.forget_podgroup("ml", "job");
    c.memory.forget_volcano_status(&the_group());
    c.s.apply_podgroup(&podgroup("job", 2, "team", json!({"uid": "pg-job-2"})));
    c.s.run_gang_cycle().await;
    let status = c.status("PodGroup ml/job");
    assert_eq!(status["phase"], "Inqueue", "{status}");
}

#[tokio::test]
async fn a_podgroup_seen_again_with_another_uid_gets_its_status_again() {
    // The watch missed the delete (it was down): the list shows the new
    // object only.
    let c = admitted_job().await;
    c.memory.forget_volcano_status(&the_group());
    c.s.apply_podgroup(&podgroup("job", 2, "team", json!({"uid": "pg-job-2"})));
    c.s.run_gang_cycle().await;
    assert_eq!(c.status("PodGroup ml/job")["phase"], "Inqueue");

    // The same object applied again (a status echo) writes nothing new.
    c.memory.forget_volcano_status(&the_group());
    c.s.apply_podgroup(&podgroup("job", 2, "team", json!({"uid": "pg-job-2"})));
    c.s.run_gang_cycle().await;
    assert!(c.status("PodGroup ml/job").is_null());
}
