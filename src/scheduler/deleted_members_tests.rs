//! Gang members deleted before they were ever placed: Volcano reads a pod with a
//! deletion timestamp as Releasing whatever its phase, so such a member is
//! neither planned nor counted towards its gang's minimum, and its queue is not
//! charged for it.

use super::gang_tests::{Cluster, member};
use crate::scheduler::GangConfig;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `name` of PodGroup `group`, gated, and being deleted.
fn deleted_member(name: &str, group: &str, created: u32) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = member(name, group, created);
    pod.metadata.deletion_timestamp = Some(Time("2026-01-01T00:01:00Z".parse().expect("time")));
    pod
}

#[tokio::test]
async fn a_member_deleted_while_waiting_does_not_complete_its_gang() {
    let c = Cluster::new(&[("n1", 4)], GangConfig::default());
    // A pair: p0 waits, p1 was deleted before it was ever placed.
    c.gang("pair", 2, "default", "p", 1);
    c.add(&deleted_member("p1", "pair", 1));
    assert_eq!(c.s.run_gang_cycle().await, 0, "nothing is planned");
    assert!(c.gated("p0").await, "p0 still waits for a second member");
    assert_eq!(c.held(), 0, "no GPU is reserved for either");
    let v = c.verdict("ml/pair");
    assert_eq!(v.ready, 0, "{v:?}");
    assert!(
        v.message
            .as_deref()
            .is_some_and(|m| m.contains("1 of minMember 2")),
        "{v:?}"
    );
}

#[tokio::test]
async fn a_gang_completed_by_a_new_member_starts_without_the_deleted_one() {
    let c = Cluster::new(&[("n1", 4)], GangConfig::default());
    c.gang("pair", 2, "default", "p", 1);
    c.add(&deleted_member("p1", "pair", 1));
    c.add(&member("p2", "pair", 2));
    assert_eq!(c.s.run_gang_cycle().await, 1);
    assert!(!c.gated("p0").await);
    assert!(!c.gated("p2").await);
    assert!(c.gated("p1").await, "the deleted member is not planned");
    assert_eq!(c.held(), 2);
}
