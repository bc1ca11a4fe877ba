//! The nodegroup plugin end to end against the fake kube-apiserver: a Queue's
//! `spec.affinity` sends its gang, and a pod of the queue that reaches `/filter`
//! on its own, to the nodes labelled with its node group only; a required rule no
//! node matches leaves the gang gated, its PodGroup and events saying which rule
//! refused each node, until a node joins the group. A node relabelled into the
//! group and tainted by one update is judged by both at once: nodegroup admits it
//! and predicates refuse it to a gang that does not tolerate the taint.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;

const NS: &str = "ml";
const GROUP_LABEL: &str = "volcano.sh/nodegroup-name";

/// Volcano's configuration with nodegroup next to the queue plugins.
const CONF: &str = "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodegroup
    arguments:
      strict: true
";

fn conf() -> SchedulerConfFile {
    SchedulerConfFile::new(CONF)
}

/// A node of two whole GPUs, in `group` when given (`kubectl label node <name>
/// volcano.sh/nodegroup-name=<group>`).
fn group_node(name: &str, group: Option<&str>) -> Value {
    let mut n = gpu_node(name, 2, 1);
    if let Some(group) = group {
        n["metadata"]["labels"] = json!({ GROUP_LABEL: group });
    }
    n
}

/// The queue of the plugin guide: must use `gpu-pool`, prefers
/// `high-memory-pool`, never `cpu-only-pool`.
fn gpu_queue(required: &str) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "gpu-queue"},
        "spec": {"weight": 1, "affinity": {
            "nodeGroupAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [required],
                "preferredDuringSchedulingIgnoredDuringExecution": ["high-memory-pool"]},
            "nodeGroupAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": ["cpu-only-pool"]}}},
        "status": {"state": "Open"}
    })
}

/// A gang of `n` whole-GPU members in `gpu-queue`, created gated as the webhook
/// leaves them.
fn gang(api: &FakeApiServer, group: &str, n: u32) {
    tolerant_gang(api, group, n, &[]);
}

/// [`gang`] whose members tolerate `tolerations`.
fn tolerant_gang(api: &FakeApiServer, group: &str, n: u32, tolerations: &[Value]) {
    api.create(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group, "namespace": NS},
        "spec": {"minMember": n, "queue": "gpu-queue"}
    }));
    for i in 0..n {
        let mut p = gpu_pod(NS, &format!("{group}{i}"), 1, 80000, 0);
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": group});
        p["spec"]["schedulerName"] = json!(SCHEDULER);
        p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
        if !tolerations.is_empty() {
            p["spec"]["tolerations"] = json!(tolerations);
        }
        create_pod(api, p);
    }
}

const ALL: [&str; 4] = ["n1", "n2", "n3", "n4"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queues_node_group_affinity_sends_its_gang_and_its_pods_to_the_groups_nodes() {
    let api = FakeApiServer::start().await;
    // The smallest names are outside the group: without the plugin they would
    // be chosen first.
    api.create(group_node("n1", None));
    api.create(group_node("n2", Some("cpu-only-pool")));
    api.create(group_node("n3", Some("gpu-pool")));
    api.create(group_node("n4", Some("gpu-pool")));
    api.create(gpu_queue("gpu-pool"));
    gang(&api, "train", 3);
    let conf = conf();
    let server = LiveServer::start_planning(&api, &conf).await;
    wait_for(&server, "the gang released", || {
        (0..3).all(|i| !gang_gated(&api, NS, &format!("train{i}")))
    })
    .await;
    let group: BTreeSet<&str> = BTreeSet::from(["n3", "n4"]);
    for i in 0..3 {
        let name = format!("train{i}");
        let planned = annotation(&api_pod(&api, NS, &name), "hami.io/vgpu-node")
            .expect("planned node")
            .to_string();
        assert!(
            group.contains(planned.as_str()),
            "{name} planned on {planned}"
        );
        let node = server.schedule(&api, NS, &name, &ALL).await;
        assert_eq!(node, planned, "{name} follows its plan");
        device_plugin_allocated(&api, NS, &name);
    }
    // A pod of the queue that reached kube-scheduler without our gate goes
    // through /filter: it gets the group's last free GPU, not n1's.
    let mut solo = gpu_pod(NS, "solo", 1, 80000, 0);
    solo["metadata"]["annotations"] = json!({"scheduling.volcano.sh/queue-name": "gpu-queue"});
    solo["spec"]["schedulerName"] = json!(SCHEDULER);
    create_pod(&api, solo);
    let node = server.schedule(&api, NS, "solo", &ALL).await;
    assert!(group.contains(node.as_str()), "solo on {node}");
    device_plugin_allocated(&api, NS, "solo");
    // The group is full: the next pod of the queue is refused everywhere, and
    // FailedNodes says which rule refused the nodes outside the group.
    let mut late = gpu_pod(NS, "late", 1, 80000, 0);
    late["metadata"]["annotations"] = json!({"scheduling.volcano.sh/queue-name": "gpu-queue"});
    late["spec"]["schedulerName"] = json!(SCHEDULER);
    let late = create_pod(&api, late);
    let answer = server.filter(&late, &ALL).await;
    let failed = &answer["FailedNodes"];
    assert!(
        answer["NodeNames"]
            .as_array()
            .is_none_or(|names| names.is_empty()),
        "{answer}"
    );
    let n1 = failed["n1"].as_str().unwrap_or_default();
    assert!(
        n1.contains(
            "queue \"gpu-queue\": node has no volcano.sh/nodegroup-name label and its node-group affinity names groups (nodegroup)"
        ),
        "{answer}"
    );
    let n2 = failed["n2"].as_str().unwrap_or_default();
    assert!(
        n2.contains(
            "queue \"gpu-queue\": node group \"cpu-only-pool\" is in the required anti-affinity of its node-group affinity (nodegroup)"
        ),
        "{answer}"
    );
    // Nothing landed outside the group: every GPU in use is one of its four.
    let usage = cluster_usage(&api);
    let group_gpus: BTreeSet<String> = ["n3", "n4"]
        .iter()
        .flat_map(|n| (0..2).map(|i| gpu_id(n, i)))
        .collect();
    assert_eq!(usage.keys().cloned().collect::<BTreeSet<_>>(), group_gpus);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_group_no_node_has_leaves_the_gang_waiting_with_the_reason() {
    let api = FakeApiServer::start().await;
    api.create(group_node("n1", None));
    api.create(group_node("n2", Some("cpu-only-pool")));
    api.create(group_node("n3", Some("a100-pool")));
    api.create(gpu_queue("h100-pool"));
    gang(&api, "train", 2);
    let conf = conf();
    let server = LiveServer::start_planning(&api, &conf).await;
    let reason = "node group \"a100-pool\" is not in its node-group affinity (h100-pool, high-memory-pool) (nodegroup)";
    wait_for(&server, "the PodGroup to say why", || {
        podgroup_message(&api, NS, "train").contains(reason)
    })
    .await;
    let message = podgroup_message(&api, NS, "train");
    for rule in [
        "node group \"cpu-only-pool\" is in the required anti-affinity of its node-group affinity (nodegroup)",
        "node has no volcano.sh/nodegroup-name label and its node-group affinity names groups (nodegroup)",
    ] {
        assert!(message.contains(rule), "{message}");
    }
    assert!(gang_gated(&api, NS, "train0") && gang_gated(&api, NS, "train1"));
    wait_for(&server, "a GangWaiting event with the reason", || {
        api.events_for(NS, "train0").iter().any(|e| {
            e["reason"] == "GangWaiting"
                && [&e["message"], &e["note"]]
                    .iter()
                    .any(|text| text.as_str().is_some_and(|t| t.contains(reason)))
        })
    })
    .await;
    // The node joins the group (`kubectl label node n3 ... --overwrite`): the
    // gang is placed there.
    api.update(group_node("n3", Some("h100-pool")));
    wait_for(&server, "the gang released", || {
        !gang_gated(&api, NS, "train0") && !gang_gated(&api, NS, "train1")
    })
    .await;
    for name in ["train0", "train1"] {
        let pod = api_pod(&api, NS, name);
        assert_eq!(annotation(&pod, "hami.io/vgpu-node"), Some("n3"), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_relabelled_and_tainted_at_once_is_judged_by_its_new_group_and_taint() {
    let api = FakeApiServer::start().await;
    api.create(group_node("n1", None));
    api.create(group_node("n2", Some("a100-pool")));
    api.create(gpu_queue("h100-pool"));
    let conf = conf();
    let server = LiveServer::start_planning(&api, &conf).await;
    // One update (`kubectl edit node n2`): into the queue's group, tainted for it.
    let mut n2 = group_node("n2", Some("h100-pool"));
    n2["spec"]["taints"] = json!([{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]);
    api.update(n2);
    let toleration = json!({"key": "dedicated", "operator": "Equal", "value": "ml",
        "effect": "NoSchedule"});
    tolerant_gang(&api, "plain", 1, &[]);
    tolerant_gang(&api, "tolerant", 1, &[toleration]);
    wait_for(&server, "the tolerant gang released", || {
        !gang_gated(&api, NS, "tolerant0")
    })
    .await;
    let planned =
        annotation(&api_pod(&api, NS, "tolerant0"), "hami.io/vgpu-node").map(str::to_string);
    assert_eq!(
        planned.as_deref(),
        Some("n2"),
        "nodegroup sees n2's new group"
    );
    let taint = "untolerated taint {dedicated: ml}";
    wait_for(&server, "the other PodGroup to say why", || {
        podgroup_message(&api, NS, "plain").contains(taint)
    })
    .await;
    assert!(
        gang_gated(&api, NS, "plain0"),
        "predicates see n2's new taint"
    );
}
