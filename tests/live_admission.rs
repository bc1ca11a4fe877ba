//! Admission end to end against the fake kube-apiserver: a gang waits while its
//! namespace's ResourceQuota cannot hold its minimum, its PodGroup naming the
//! quota and the dimension, and goes once the quota is raised; a gang past its
//! SLA waiting time is admitted and placed ahead of an older one.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};

const NS: &str = "ml";

/// The namespace quota next to the queue plugin, in one tier (as Volcano
/// documents it): a job must fit both.
const QUOTA_CONF: &str = "actions: enqueue, allocate, backfill
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: resourcequota
  - name: proportion
";

/// sla beside gang, the enqueue limit below them.
const SLA_CONF: &str = "actions: enqueue, allocate, backfill
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: sla
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: 1.0
";

fn conf(text: &str) -> SchedulerConfFile {
    SchedulerConfFile::new(text)
}

/// PodGroup `group` stating a minimum of `n` GPUs, with `n` gated members of one
/// GPU (80000 MiB) each, as the webhook leaves them. `metadata` is merged into the
/// PodGroup's (annotations, a creation time from before the test).
fn gang(api: &FakeApiServer, group: &str, n: u32, metadata: Value) {
    let mut pg = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group, "namespace": NS},
        "spec": {"minMember": n, "queue": "default", "minResources": {"nvidia.com/gpu": n}}
    });
    if let (Some(meta), Some(extra)) = (pg["metadata"].as_object_mut(), metadata.as_object()) {
        meta.extend(extra.clone());
    }
    api.create(pg);
    for i in 0..n {
        let mut p = gpu_pod(NS, &format!("{group}-{i}"), 1, 80000, 0);
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": group});
        p["spec"]["schedulerName"] = json!(SCHEDULER);
        p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
        create_pod(api, p);
    }
}

fn members(group: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{group}-{i}")).collect()
}

fn podgroup(api: &FakeApiServer, name: &str) -> Value {
    api.get("PodGroup", Some(NS), name).unwrap_or(Value::Null)
}

/// ResourceQuota `gpu-quota` of the namespace: `hard` GPUs, `used` of them counted.
fn gpu_quota(hard: u32, used: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": NS},
        "spec": {"hard": {"requests.nvidia.com/gpu": hard.to_string()}},
        "status": {
            "hard": {"requests.nvidia.com/gpu": hard.to_string()},
            "used": {"requests.nvidia.com/gpu": used.to_string()}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_over_its_namespace_quota_waits_with_the_reason_until_the_quota_is_raised() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 4, 1);
    let conf = conf(QUOTA_CONF);
    let server = LiveServer::start_planning(&api, &conf).await;
    // A pod of the namespace already runs on one GPU.
    create_pod(&api, gpu_pod(NS, "solo", 1, 80000, 0));
    server.schedule(&api, NS, "solo", &["n1"]).await;
    device_plugin_allocated(&api, NS, "solo");
    api.set_pod_phase(NS, "solo", "Running");
    // Kubernetes counts every pod from its creation, gated or not: the running
    // pod and the gang's two members make 3, of a quota lowered to 2 after they
    // were created. The fake has no quota controller, so the test writes the
    // count the controller would (before the gang, so that no cycle sees the
    // gang without its quota).
    api.create(gpu_quota(2, 3));
    gang(&api, "train", 2, json!({}));

    let reason = "namespace \"ml\": resourcequota \"gpu-quota\": requests.nvidia.com/gpu would be 3 > hard 2";
    wait_for(&server, "the quota named on the PodGroup", || {
        podgroup(&api, "train")["status"]["conditions"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains(reason))
    })
    .await;
    let group = podgroup(&api, "train");
    assert_eq!(group["status"]["phase"], "Pending", "{group}");
    assert_eq!(group["status"]["conditions"][0]["type"], "Unschedulable");
    assert_eq!(
        group["status"]["conditions"][0]["reason"],
        "NotEnoughResources"
    );
    assert!(members("train", 2).iter().all(|m| gang_gated(&api, NS, m)));

    // The administrator raises the quota: the gang is admitted and released.
    api.update(gpu_quota(3, 3));
    wait_for(&server, "the gang released", || {
        members("train", 2).iter().all(|m| !gang_gated(&api, NS, m))
    })
    .await;
    // The status is written after the gates are lifted, in the same cycle.
    wait_for(&server, "the PodGroup marked scheduled", || {
        podgroup(&api, "train")["status"]["conditions"][0]["type"] == "Scheduled"
    })
    .await;
    let group = podgroup(&api, "train");
    let message = group["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap_or("");
    assert!(!message.contains("resourcequota"), "{group}");
    assert_eq!(group["status"]["phase"], "Running", "{group}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_past_its_sla_waiting_time_is_admitted_and_placed_ahead_of_an_older_one() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 4, 1);
    let ago = |minutes: i64| {
        (chrono::Utc::now() - chrono::Duration::minutes(minutes))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    // In creation order `early` comes first and would leave two GPUs, too few
    // for `overdue`; but `overdue` was allowed to wait an hour and has waited
    // ninety minutes.
    gang(&api, "early", 2, json!({"creationTimestamp": ago(120)}));
    gang(
        &api,
        "overdue",
        4,
        json!({"creationTimestamp": ago(90),
            "annotations": {"sla-waiting-time": "1h"}}),
    );
    let conf = conf(SLA_CONF);
    let server = LiveServer::start_planning(&api, &conf).await;

    wait_for(&server, "the overdue gang released", || {
        members("overdue", 4)
            .iter()
            .all(|m| !gang_gated(&api, NS, m))
    })
    .await;
    wait_for(&server, "the older gang refused", || {
        podgroup(&api, "early")["status"]["conditions"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("(overcommit)"))
    })
    .await;
    let early = podgroup(&api, "early");
    assert_eq!(early["status"]["phase"], "Pending", "{early}");
    assert!(members("early", 2).iter().all(|m| gang_gated(&api, NS, m)));
}
