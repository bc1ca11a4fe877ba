//! Admission through the scheduler: a namespace's ResourceQuotas, read from a
//! cluster file or a watch, hold a gang back until they are raised or gone; an SLA
//! waiting time lets a gang past its queue's limit once the scheduler's clock says
//! it waited long enough.

use super::gang_tests::{Cluster, member, podgroup};
use crate::clock::Clock;
use crate::cluster::file::visit;
use crate::scheduler::GangConfig;
use crate::volcano::SchedulerConf;
use crate::volcano::framework::GangPhase;
use k8s_openapi::api::core::v1::ResourceQuota;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;

const QUOTA_CONF: &str = "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: resourcequota
  - name: proportion
";

/// The namespace's GPU quota as a cluster file states it: `hard` GPUs, of which
/// Kubernetes counts `used`.
fn quota_file(hard: u32, used: u32) -> String {
    format!(
        "apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpu-quota
  namespace: ml
spec:
  hard:
    requests.nvidia.com/gpu: \"{hard}\"
status:
  used:
    requests.nvidia.com/gpu: \"{used}\"
"
    )
}

/// PodGroup `group` of `n` one-GPU members stating a minimum of `n` GPUs.
fn gang_with_minimum(c: &Cluster, group: &str, n: u32, queue: &str, metadata: Value) {
    let mut pg = podgroup(group, n, queue, metadata);
    pg["spec"]["minResources"] = json!({"nvidia.com/gpu": n});
    c.s.apply_podgroup(&pg);
    for i in 0..n {
        c.add(&member(&format!("{group}-{i}"), group, i));
    }
}

async fn all_gated(c: &Cluster, group: &str, n: u32) -> bool {
    for i in 0..n {
        if !c.gated(&format!("{group}-{i}")).await {
            return false;
        }
    }
    true
}

#[tokio::test]
async fn a_gang_over_its_namespace_quota_waits_until_the_quota_is_raised() {
    let c = Cluster::new(&[("n1", 4)], GangConfig::default());
    c.s.set_gang_conf(SchedulerConf::parse(QUOTA_CONF).unwrap());
    // Kubernetes counts the gang's three gated members and one more pod of the
    // namespace: 4 used, of a quota lowered to 3 after they were created.
    gang_with_minimum(&c, "train", 3, "default", json!({}));
    visit(&quota_file(3, 4), |o| c.s.apply_cluster_object(&o)).unwrap();
    assert_eq!(c.s.run_gang_cycle().await, 0);
    let v = c.verdict("ml/train");
    assert_eq!(v.phase, GangPhase::Pending);
    assert_eq!(v.reason, Some("NotEnoughResources"));
    let message = v.message.unwrap_or_default();
    assert!(
        message.contains(
            "namespace \"ml\": resourcequota \"gpu-quota\": requests.nvidia.com/gpu would be 4 > hard 3"
        ),
        "{message}"
    );
    assert!(all_gated(&c, "train", 3).await);
    assert_eq!(c.held(), 0);

    // Raised to 4, as the watch delivers it: the gang is admitted and placed.
    let raised: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "gpu-quota", "namespace": "ml"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
        "status": {"used": {"requests.nvidia.com/gpu": "4"}}
    }))
    .unwrap();
    c.s.apply_quota(&raised);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    assert!(!c.gated("train-0").await);
    assert_eq!(c.held(), 3);
}

#[tokio::test]
async fn a_quota_deleted_while_the_watch_was_down_is_forgotten_at_the_relist() {
    let c = Cluster::new(&[("n1", 4)], GangConfig::default());
    c.s.set_gang_conf(SchedulerConf::parse(QUOTA_CONF).unwrap());
    gang_with_minimum(&c, "train", 2, "default", json!({}));
    visit(&quota_file(1, 2), |o| c.s.apply_cluster_object(&o)).unwrap();
    assert_eq!(c.s.run_gang_cycle().await, 0);
    // The relist no longer has the quota.
    c.s.retain_quotas(&HashSet::new());
    assert_eq!(c.s.run_gang_cycle().await, 1);
    assert_eq!(c.held(), 2);
}

#[tokio::test]
async fn an_overdue_gang_is_admitted_past_the_enqueue_limit_when_the_clock_says_so() {
    let c = Cluster::new(&[("n1", 4)], GangConfig::default());
    c.s.set_gang_conf(
        SchedulerConf::parse(
            "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: sla
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: 1.0
",
        )
        .unwrap(),
    );
    let now = |c: &Cluster| json!({"creationTimestamp": c.clock.wall().to_rfc3339()});
    gang_with_minimum(&c, "busy", 2, "default", now(&c));
    assert_eq!(c.s.run_gang_cycle().await, 1);
    // Two GPUs are left: the gang of three that may wait an hour is refused.
    let mut big = now(&c);
    big["annotations"] = json!({"volcano.sh/sla-waiting-time": "1h"});
    gang_with_minimum(&c, "big", 3, "default", big);
    assert_eq!(c.s.run_gang_cycle().await, 0);
    let v = c.verdict("ml/big");
    assert_eq!(v.phase, GangPhase::Pending);
    assert!(
        v.message.unwrap_or_default().contains("(overcommit)"),
        "refused by the enqueue limit"
    );

    c.clock.advance(Duration::from_secs(59 * 60));
    c.s.run_gang_cycle().await;
    assert_eq!(
        c.verdict("ml/big").phase,
        GangPhase::Pending,
        "not yet overdue"
    );

    c.clock.advance(Duration::from_secs(60));
    c.s.run_gang_cycle().await;
    assert_eq!(
        c.verdict("ml/big").phase,
        GangPhase::Inqueue,
        "overdue: admitted past the limit, waiting for room"
    );
    // Its admission holds the room it waits for: a newcomer that would fit the
    // two free GPUs is refused.
    gang_with_minimum(&c, "small", 1, "default", now(&c));
    assert_eq!(c.s.run_gang_cycle().await, 0);
    assert_eq!(c.verdict("ml/small").phase, GangPhase::Pending);
    assert!(all_gated(&c, "small", 1).await);

    // The busy gang finishes: the overdue gang takes the room.
    for i in 0..2 {
        let mut done = member(&format!("busy-{i}"), "busy", i);
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        c.add(&done);
    }
    c.s.run_gang_cycle().await;
    for i in 0..3 {
        assert!(!c.gated(&format!("big-{i}")).await, "big-{i} released");
    }
}
