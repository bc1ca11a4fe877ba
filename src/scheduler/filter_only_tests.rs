//! Gang pods known only from `/filter` are kept for a time and up to a number, on
//! the scheduler's clock; pods holding GPUs are kept whatever their age.

use super::GangConfig;
use super::gang_tests::Cluster;
use crate::extender::wire::ExtenderArgs;
use crate::gang::filter_only::FilterOnlyLimits;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::time::Duration;

/// A queue pod (a gang of its own) asking for one GPU with `mib` of memory.
fn queue_pod(name: &str, mib: u64) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "annotations": {"scheduling.volcano.sh/queue-name": "default"}},
        "spec": {"schedulerName": "vgpu-scheduler",
            "containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mib.to_string()}}}]}
    }))
    .expect("pod")
}

fn cluster(limits: FilterOnlyLimits) -> Cluster {
    Cluster::new(
        &[("n1", 1)],
        GangConfig {
            // The reservation outlives the time to live by far.
            timeout: Duration::from_secs(3600),
            filter_only: limits,
            ..GangConfig::default()
        },
    )
}

/// `/filter` for a pod the scheduler has not been shown otherwise: the node it
/// was given, or why not.
async fn filter(c: &Cluster, pod: &Pod) -> Result<String, String> {
    let answer =
        c.s.filter(ExtenderArgs {
            pod: Some(pod.clone()),
            nodes: None,
            node_names: Some(c.nodes.iter().collect()),
        })
        .await;
    match answer.node_names.as_deref() {
        Some([node]) => Ok(node.clone()),
        _ => Err(format!("{answer:?}")),
    }
}

/// The gangs the planner sees after a cycle.
async fn planned_gangs(c: &Cluster) -> Vec<String> {
    c.s.run_gang_cycle().await;
    let mut gangs: Vec<String> =
        c.s.gang_view()
            .gangs
            .iter()
            .map(|g| g.gang.clone())
            .collect();
    gangs.sort();
    gangs
}

fn dropped(c: &Cluster, reason: &str) -> u64 {
    let text = c.s.metrics().render(
        &crate::ledger::Ledger::default(),
        &crate::gang::GangView::default(),
    );
    let sample = format!("vgpu_scheduler_filter_only_pods_dropped_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&sample))
        .map_or(0, |v| v.trim().parse().expect("a count"))
}

#[tokio::test]
async fn an_untouched_filter_only_pod_expires_and_a_reserved_one_stays() {
    let c = cluster(FilterOnlyLimits {
        max: 100,
        ttl: Duration::from_secs(600),
    });
    let waiting = queue_pod("too-big", 200_000);
    let reserved = queue_pod("fits", 80_000);
    assert!(filter(&c, &waiting).await.is_err());
    assert_eq!(filter(&c, &reserved).await, Ok("n1".to_string()));
    assert_eq!(planned_gangs(&c).await, ["ml/fits", "ml/too-big"]);

    // Just short of the time to live, both are kept.
    c.clock.advance(Duration::from_secs(599));
    c.s.expire_reservations(true).await;
    assert_eq!(planned_gangs(&c).await, ["ml/fits", "ml/too-big"]);

    c.clock.advance(Duration::from_secs(1));
    c.s.expire_reservations(true).await;
    assert_eq!(planned_gangs(&c).await, ["ml/fits"]);
    assert!(c.pod("too-big").await.is_none(), "the store let it go too");
    assert!(c.pod("fits").await.is_some());
    assert_eq!(c.held(), 1, "the reservation is untouched");
    assert_eq!(dropped(&c, "expired"), 1);

    // Asked about again, a forgotten pod is learned again.
    assert!(filter(&c, &waiting).await.is_err());
    assert_eq!(planned_gangs(&c).await, ["ml/fits", "ml/too-big"]);
}

#[tokio::test]
async fn beyond_the_limit_the_pod_asked_about_longest_ago_goes() {
    let c = cluster(FilterOnlyLimits {
        max: 2,
        ttl: Duration::from_secs(600),
    });
    assert_eq!(
        filter(&c, &queue_pod("fits", 80_000)).await,
        Ok("n1".to_string())
    );
    for name in ["w0", "w1", "w2"] {
        c.clock.advance(Duration::from_secs(1));
        assert!(filter(&c, &queue_pod(name, 200_000)).await.is_err());
    }
    // The reserved pod is the oldest and stays; w0 and then w1 made room.
    assert_eq!(planned_gangs(&c).await, ["ml/fits", "ml/w2"]);
    assert_eq!(dropped(&c, "over-limit"), 2);
}
