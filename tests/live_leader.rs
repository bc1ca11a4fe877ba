//! Leader election in live mode: two replicas on one API server hold exactly one
//! `coordination.k8s.io/v1` Lease between them, both serve, the leader alone does
//! cluster-wide housekeeping, and when the leader dies the other takes over.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const NS: &str = "inference";
const LEASE_NS: &str = "default";

fn replica(name: &str) -> LiveOptions {
    LiveOptions::args(&[
        "--leader-elect=true",
        "--leader-elect-resource-namespace",
        LEASE_NS,
        "--reservation-ttl",
        "3s",
    ])
    .env("POD_NAME", name)
}

fn leases(api: &FakeApiServer) -> Vec<Value> {
    api.list("Lease")
}

fn holder(api: &FakeApiServer) -> Option<String> {
    api.get("Lease", Some(LEASE_NS), SCHEDULER)
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(String::from))
}

#[tokio::test]
async fn one_leader_both_serve_and_failover_within_twenty_seconds() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 2, 10);
    add_node(&api, "gpu-b", 2, 10);
    let mut a = LiveServer::start_with(&api, replica("replica-a")).await;
    let mut b = LiveServer::start_with(&api, replica("replica-b")).await;

    assert!(
        api.wait_until(Duration::from_secs(10), |x| holder(x).is_some())
            .await,
        "a Lease {LEASE_NS}/{SCHEDULER} with a holder appears: {:?}",
        leases(&api)
    );
    // Stable: one Lease, one holder, over two election rounds of each replica.
    let first = holder(&api).expect("holder");
    assert!(
        first == "replica-a" || first == "replica-b",
        "holder {first}"
    );
    let (lead, follow) = if first == "replica-a" {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let leading = r#"vgpu_scheduler_leader_election_rounds_total{outcome="leading"}"#;
    let following = r#"vgpu_scheduler_leader_election_rounds_total{outcome="following"}"#;
    let follower_led = follow.metric(leading).await;
    let led = lead.metric(leading).await;
    let followed = follow.metric(following).await;
    let timeout = Duration::from_secs(10);
    lead.wait_metric(leading, led + 2, timeout).await;
    follow.wait_metric(following, followed + 2, timeout).await;
    assert_eq!(
        follow.metric(leading).await,
        follower_led,
        "the follower never led meanwhile"
    );
    let all = leases(&api);
    assert_eq!(all.len(), 1, "exactly one Lease: {all:?}");
    assert_eq!(all[0]["metadata"]["name"], SCHEDULER);
    assert_eq!(all[0]["metadata"]["namespace"], LEASE_NS);
    assert_eq!(holder(&api).as_deref(), Some(first.as_str()), "no flapping");
    let renewed = |x: &FakeApiServer| {
        x.get("Lease", Some(LEASE_NS), SCHEDULER)
            .and_then(|l| l["spec"]["renewTime"].as_str().map(String::from))
    };
    let renew_before = renewed(&api);
    assert!(
        api.wait_until(Duration::from_secs(6), |x| renewed(x) != renew_before)
            .await,
        "the leader renews its lease"
    );

    // Both replicas are ready and answer the extender.
    for s in [&a, &b] {
        assert_eq!(s.get("/readyz").await.0, 200);
    }
    // A reservation lives in the replica that made it (the pod is written once,
    // at /bind): each replica holds its own, and lets it go when it expires.
    create_pod(&api, gpu_pod(NS, "via-a", 1, 10000, 10));
    create_pod(&api, gpu_pod(NS, "via-b", 1, 10000, 10));
    a.filter_one(&api, NS, "via-a", &["gpu-a", "gpu-b"]).await;
    b.filter_one(&api, NS, "via-b", &["gpu-a", "gpu-b"]).await;
    let uid_a = uid_of(&api_pod(&api, NS, "via-a"));
    let uid_b = uid_of(&api_pod(&api, NS, "via-b"));
    for (s, uid) in [(&a, &uid_a), (&b, &uid_b)] {
        let (state, ok) = s
            .wait_state(Duration::from_secs(2), |st| st.pod(uid).is_some())
            .await;
        assert!(ok, "the replica holds its reservation: {}", state.0);
    }
    for s in [&a, &b] {
        let (state, ok) = s
            .wait_state(Duration::from_secs(10), |st| st.pods().is_empty())
            .await;
        assert!(ok, "unbound reservations expire: {}", state.0);
    }
    // What either replica binds, every replica learns from the watch.
    create_pod(&api, gpu_pod(NS, "bound-a", 1, 10000, 10));
    create_pod(&api, gpu_pod(NS, "bound-b", 1, 10000, 10));
    a.schedule(&api, NS, "bound-a", &["gpu-a"]).await;
    b.schedule(&api, NS, "bound-b", &["gpu-b"]).await;
    let bound_a = uid_of(&api_pod(&api, NS, "bound-a"));
    let bound_b = uid_of(&api_pod(&api, NS, "bound-b"));
    for s in [&a, &b] {
        let (state, ok) = s
            .wait_state(Duration::from_secs(5), |st| {
                st.pod(&bound_a).is_some() && st.pod(&bound_b).is_some()
            })
            .await;
        assert!(ok, "both bound pods in every replica's ledger: {}", state.0);
    }
    for n in ["bound-a", "bound-b"] {
        api.delete("Pod", Some(NS), n);
    }
    for s in [&a, &b] {
        let (state, ok) = s
            .wait_state(Duration::from_secs(5), |st| st.pods().is_empty())
            .await;
        assert!(ok, "{}", state.0);
    }

    // Kill the leader: the other replica takes the lease over.
    let (leader, follower, survivor) = if first == "replica-a" {
        (&mut a, "replica-b", &b)
    } else {
        (&mut b, "replica-a", &a)
    };
    let transitions_before = api
        .get("Lease", Some(LEASE_NS), SCHEDULER)
        .and_then(|l| l["spec"]["leaseTransitions"].as_i64())
        .unwrap_or(0);
    leader.kill();
    let killed = Instant::now();
    let took_over = api
        .wait_until(Duration::from_secs(25), |x| {
            holder(x).as_deref() == Some(follower)
        })
        .await;
    let elapsed = killed.elapsed();
    eprintln!("lease taken over by {follower} after {elapsed:?}");
    assert!(
        took_over,
        "{follower} did not take the lease within 25 s: {:?}\nlog:\n{}",
        leases(&api),
        survivor.log_tail(20)
    );
    assert!(
        elapsed <= Duration::from_secs(22),
        "takeover took {elapsed:?}"
    );
    let lease = api.get("Lease", Some(LEASE_NS), SCHEDULER).expect("lease");
    assert_eq!(
        lease["spec"]["leaseTransitions"].as_i64(),
        Some(transitions_before + 1),
        "{lease}"
    );
    assert_eq!(leases(&api).len(), 1);

    // The survivor schedules and binds.
    create_pod(&api, gpu_pod(NS, "after-failover", 1, 10000, 10));
    survivor
        .schedule(&api, NS, "after-failover", &["gpu-a", "gpu-b"])
        .await;
}

#[tokio::test]
async fn a_lease_held_by_kube_scheduler_is_never_taken_over() {
    // As with HAMi's flags: --leader-elect-resource-name names the Lease the pod's
    // kube-scheduler holds, which has lapsed (kube-scheduler restarting).
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-a", 1, 10);
    let kube_scheduler = "sched-0_5b1c1f4e-2c39-4d5b-9a43-0c6f0e7d2a11";
    api.create(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": SCHEDULER, "namespace": LEASE_NS},
        "spec": {
            "holderIdentity": kube_scheduler,
            "leaseDurationSeconds": 1,
            "renewTime": "2020-01-01T00:00:00.000000Z"
        }
    }));
    let server = LiveServer::start_with(&api, replica("replica-a")).await;
    // Two election rounds decided to leave the Lease alone. By the second, the
    // Lease had gone unrenewed here for longer than its 1 s duration, so a server
    // that campaigned on it would have taken it over in that round.
    server
        .wait_log_count(
            "this Lease belongs to kube-scheduler",
            2,
            Duration::from_secs(15),
        )
        .await;
    // The second round has ended too, so any write it made has been answered.
    let rounds = "vgpu_scheduler_leader_election_rounds_total";
    server
        .wait_metric(
            &format!(r#"{rounds}{{outcome="following"}}"#),
            2,
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(
        server
            .metric(&format!(r#"{rounds}{{outcome="leading"}}"#))
            .await,
        0
    );
    assert_eq!(holder(&api).as_deref(), Some(kube_scheduler));
}
