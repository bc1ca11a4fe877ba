//! A recorded trace as a workload: which jobs it makes, how long they run, and
//! that the replay creates the recorded pods and places them as the server
//! would, the same way every time.

use super::objects;
use super::simulate;
use super::tests::{cluster, setup};
use super::workload::Workload;
use serde_json::{Value, json};
use std::time::Duration;

const T0: i64 = 1_750_000_000;

fn at(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(T0 + seconds, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn pod(name: &str, gpus: u32, extra_annotations: Value) -> Value {
    let mut annotations = json!({"example.com/team": "vision"});
    for (k, v) in extra_annotations.as_object().into_iter().flatten() {
        annotations[k] = v.clone();
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                     "annotations": annotations},
        "spec": {
            "schedulerName": "vgpu-scheduler",
            "priorityClassName": "batch",
            "nodeSelector": {"gpu": "h100"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "containers": [{"name": "main", "resources": {"limits": {
                "nvidia.com/gpu": gpus.to_string()}}}]
        }
    })
}

fn line(seconds: i64, kind: &str, value: Value) -> String {
    let mut object = json!({"at": at(seconds)});
    object[kind] = value;
    object.to_string()
}

fn bound(seconds: i64, name: &str, node: &str) -> String {
    json!({"at": at(seconds), "bound": format!("ml/{name}"), "uid": format!("uid-{name}"), "node": node})
        .to_string()
}

fn gone(seconds: i64, name: &str) -> String {
    json!({"at": at(seconds), "gone": format!("ml/{name}"), "uid": format!("uid-{name}")})
        .to_string()
}

/// A gang of two that runs 10 minutes, a pod still running at the end, a pod
/// that never got a node, and a bind of a pod from before the recording.
fn trace() -> String {
    let group = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml", "uid": "pg-1"},
        "spec": {"minMember": 2, "queue": "training", "priorityClassName": "high"}
    });
    let member = |name: &str| pod(name, 2, json!({"scheduling.k8s.io/group-name": "train"}));
    [
        line(0, "podGroup", group),
        line(1, "pod", member("w0")),
        line(2, "pod", member("w1")),
        bound(3, "w0", "n1"),
        bound(5, "w1", "n1"),
        line(60, "pod", pod("solo", 1, json!({}))),
        bound(61, "solo", "n2"),
        bound(62, "old", "n2"),
        line(120, "pod", pod("late", 4, json!({}))),
        gone(605, "w0"),
        gone(605, "w1"),
        gone(3600, "old"),
    ]
    .join("\n")
        + "\n"
}

#[test]
fn a_trace_becomes_one_job_per_pod_and_one_per_gang() {
    let (workload, notes) = Workload::read(&trace()).unwrap();
    let names: Vec<&str> = workload.arrivals.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ml/train", "ml/solo", "ml/late"]);
    assert_eq!(workload.horizon, Some(Duration::from_secs(3600)));
    let [train, solo, late] = &workload.arrivals[..] else {
        panic!("three jobs");
    };
    // The gang: arrives with its first member, runs from its second bind to
    // its last pod gone, in the PodGroup's queue and priority class.
    assert_eq!(train.at, Some(Duration::from_secs(1)));
    assert_eq!(train.duration, Duration::from_secs(600));
    let gang = train.gang.as_ref().unwrap();
    assert_eq!((gang.members, gang.min_member), (2, Some(2)));
    assert_eq!(train.queue.as_deref(), Some("training"));
    assert_eq!(train.priority_class_name.as_deref(), Some("high"));
    assert_eq!(objects::job_gpus(train), 4);
    // Still running when the trace ended: until then.
    assert_eq!(solo.at, Some(Duration::from_secs(60)));
    assert_eq!(solo.duration, Duration::from_secs(3600 - 61));
    assert!(solo.gang.is_none());
    // Never bound: the median of the jobs that ran and went (the gang's).
    assert_eq!(late.duration, Duration::from_secs(600));
    assert!(
        notes.iter().any(|n| n.contains("1 jobs never started")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("2 bind or end events")),
        "{notes:?}"
    );
}

#[test]
fn a_server_started_again_on_the_same_trace_does_not_make_a_pod_twice() {
    let again = format!(
        "{}{}\n{}\n",
        trace(),
        line(3700, "pod", pod("late", 4, json!({}))),
        bound(3701, "solo", "n1")
    );
    let (workload, notes) = Workload::read(&again).unwrap();
    assert_eq!(workload.arrivals.len(), 3);
    assert_eq!(
        workload.arrivals[2].at,
        Some(Duration::from_secs(120)),
        "first arrival counts"
    );
    assert!(!notes.iter().any(|n| n.contains("reuse")), "{notes:?}");
    let solo = &workload.arrivals[1];
    assert_eq!(
        solo.duration,
        Duration::from_secs(3701 - 61),
        "first bind counts"
    );
}

#[test]
fn the_recorded_pods_are_created_as_recorded_with_replay_uids() {
    let (workload, _) = Workload::read(&trace()).unwrap();
    let jobs = workload.expand(1);
    let (job, line) = (&jobs[0], &workload.arrivals[jobs[0].line]);
    assert_eq!(job.name, "ml/train");
    let now = super::replay::replay_epoch();
    let w1 = serde_json::to_value(objects::pod(job, line, 1, 0, now).unwrap()).unwrap();
    assert_eq!(w1["metadata"]["name"], "w1");
    assert_eq!(
        w1["metadata"]["uid"], "sim-uid-w1-0",
        "from the recorded UID"
    );
    assert_eq!(w1["metadata"]["annotations"]["example.com/team"], "vision");
    assert_eq!(
        w1["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
        "train"
    );
    assert_eq!(w1["spec"]["nodeSelector"]["gpu"], "h100");
    assert_eq!(w1["spec"]["tolerations"][0]["key"], "gpu");
    assert_eq!(w1["spec"]["priorityClassName"], "batch");
    assert_eq!(w1["status"]["phase"], "Pending");
    let group = objects::pod_group(job, line, now).unwrap();
    assert_eq!(group["metadata"]["name"], "train");
    assert_eq!(group["spec"]["minMember"], 2);
    assert_ne!(group["metadata"]["uid"], "pg-1", "a replay's own UID");
}

/// A gang of Kubernetes' own PodGroup, its members naming it in
/// `spec.schedulingGroup`, as `serve --record-trace` writes them.
fn native_trace() -> String {
    let group = json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml", "uid": "pg-1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup"}
    });
    let member = |name: &str| {
        let mut p = pod(name, 1, json!({}));
        p["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
        // The planner judges node selectors; the test's nodes have no labels.
        p["spec"].as_object_mut().unwrap().remove("nodeSelector");
        p
    };
    [
        line(0, "podGroup", group),
        line(1, "pod", member("w0")),
        line(2, "pod", member("w1")),
        bound(3, "w0", "n1"),
        bound(4, "w1", "n1"),
        gone(64, "w0"),
        gone(64, "w1"),
    ]
    .join("\n")
}

#[tokio::test]
async fn a_native_gang_in_a_trace_replays_as_one_gang() {
    let (workload, _) = Workload::read(&native_trace()).unwrap();
    let names: Vec<&str> = workload.arrivals.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ml/train"]);
    let train = &workload.arrivals[0];
    let gang = train.gang.as_ref().unwrap();
    assert_eq!((gang.members, gang.min_member), (2, Some(2)));
    assert_eq!(train.queue.as_deref(), Some("default"));
    let jobs = workload.expand(1);
    let now = super::replay::replay_epoch();
    let group = objects::pod_group(&jobs[0], train, now).unwrap();
    assert_eq!(group["apiVersion"], "scheduling.k8s.io/v1alpha2");
    let replayed_pods = replayed(&native_trace()).await;
    let mut placed: Vec<&str> = replayed_pods
        .bindings
        .iter()
        .map(|b| b.pod.as_str())
        .collect();
    placed.sort();
    assert_eq!(placed, ["ml/w0", "ml/w1"]);
    assert_eq!(replayed_pods.jobs.len(), 1, "one gang job");
    assert!(replayed_pods.jobs[0].started.is_some());
}

#[test]
fn a_yaml_workload_is_still_read_as_arrivals() {
    let (workload, notes) =
        Workload::read("arrivals: [{name: a, duration: 1m, pod: {gpus: 1}}]").unwrap();
    assert_eq!(workload.expand(1)[0].name, "a-0");
    assert!(notes.is_empty());
}

#[test]
fn a_trace_without_pods_is_refused() {
    let only_group = line(
        0,
        "podGroup",
        json!({"metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 1}}),
    );
    let e = Workload::read(&only_group).unwrap_err();
    assert!(e.contains("no pod waiting"), "{e}");
}

/// Whole cards, one after the other as recorded: the replay places the same
/// pods the same way each time.
#[tokio::test]
async fn a_trace_replays_its_pods_in_order_and_the_same_every_time() {
    let text = [
        line(0, "pod", pod("a", 2, json!({}))),
        bound(1, "a", "n1"),
        line(10, "pod", pod("b", 1, json!({}))),
        bound(11, "b", "n1"),
        line(20, "pod", pod("c", 4, json!({}))),
        bound(21, "c", "n2"),
        gone(30, "b"),
    ]
    .join("\n");
    // The recorded pods ask for a node label these test nodes lack: the replay
    // leaves kube-scheduler's own filters out, as documented.
    let run = || replayed(&text);
    let first = run().await;
    let placed: Vec<(&str, &str)> = first
        .bindings
        .iter()
        .map(|b| (b.pod.as_str(), b.node.as_str()))
        .collect();
    assert_eq!(placed, [("ml/a", "n1"), ("ml/b", "n1"), ("ml/c", "n2")]);
    let started: Vec<Option<f64>> = first.jobs.iter().map(|j| j.started).collect();
    assert_eq!(started, [Some(0.0), Some(10.0), Some(20.0)]);
    // Each pod runs as long as it did after its bind (the replay's binds come
    // at arrival, each a second earlier than recorded): all end by 29 s.
    assert_eq!(first.seconds, 29.0);
    let again = run().await;
    let summary = |r: &super::replay::ReplayResult| {
        serde_json::to_string(&super::summary::summarise("default", "", r)).unwrap()
    };
    assert_eq!(summary(&first), summary(&again));
    assert_eq!(first.bindings, again.bindings);
}

/// A pod of `name` recorded under `uid`.
/// The trace `text` replayed on the test cluster with the default variant.
async fn replayed(text: &str) -> super::replay::ReplayResult {
    let (workload, _) = Workload::read(text).unwrap();
    simulate(
        &cluster(),
        &workload,
        &[setup()],
        1,
        Duration::from_secs(5),
        false,
    )
    .await
    .unwrap()
    .remove(0)
}

fn pod_with_uid(name: &str, uid: &str, extra_annotations: Value) -> Value {
    let mut p = pod(name, 1, extra_annotations);
    p["metadata"]["uid"] = json!(uid);
    p
}

fn bound_uid(seconds: i64, name: &str, uid: &str, node: &str) -> String {
    json!({"at": at(seconds), "bound": format!("ml/{name}"), "uid": uid, "node": node}).to_string()
}

fn gone_uid(seconds: i64, name: &str, uid: &str) -> String {
    json!({"at": at(seconds), "gone": format!("ml/{name}"), "uid": uid}).to_string()
}

#[test]
fn a_podgroup_recorded_again_after_a_restart_stays_one_gang() {
    let group = |uid: &str| {
        json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "uid": uid},
            "spec": {"minMember": 1, "queue": "training"}
        })
    };
    let member = |name: &str| pod(name, 1, json!({"scheduling.k8s.io/group-name": "train"}));
    let text = [
        line(0, "podGroup", group("pg-1")),
        line(1, "pod", member("w0")),
        bound(2, "w0", "n1"),
        // The server started again on the same file: the same PodGroup again.
        line(100, "podGroup", group("pg-1")),
        line(101, "pod", member("w1")),
        bound(102, "w1", "n1"),
        gone(150, "w0"),
        gone(150, "w1"),
        // Deleted and created anew under its name: another gang.
        line(200, "podGroup", group("pg-2")),
        line(201, "pod", member("w2")),
    ]
    .join("\n");
    let (workload, _) = Workload::read(&text).unwrap();
    let gangs: Vec<(&str, u32)> = workload
        .arrivals
        .iter()
        .map(|l| (l.name.as_str(), l.gang.as_ref().map_or(0, |g| g.members)))
        .collect();
    assert_eq!(gangs, [("ml/train", 2), ("ml/train-r2", 1)]);
    assert_eq!(workload.arrivals[0].duration, Duration::from_secs(150 - 2));
    // The later PodGroup and its member carry the name it is replayed under.
    let later = workload.arrivals[1].recorded.as_ref().unwrap();
    let group = later.pod_group.as_ref().unwrap();
    assert_eq!(group.pointer("/metadata/name"), Some(&json!("train-r2")));
    let annotations = later.pods[0].metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations["scheduling.k8s.io/group-name"], "train-r2");
}

/// A PodGroup deleted and created again under its name while the first one's
/// gang still runs in the replay (a what-if variant can make it run later):
/// both gangs are placed, each under its own PodGroup.
#[tokio::test]
async fn podgroups_of_one_name_alive_together_are_both_replayed() {
    let group = |uid: &str| {
        json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "uid": uid},
            "spec": {"minMember": 2}
        })
    };
    let member = |name: &str| {
        let mut p = pod_with_uid(
            name,
            &format!("uid-{name}"),
            json!({"scheduling.k8s.io/group-name": "train"}),
        );
        // The planner places gangs and judges node selectors; the test's nodes
        // have no labels.
        p["spec"].as_object_mut().unwrap().remove("nodeSelector");
        p
    };
    let text = [
        line(0, "podGroup", group("pg-1")),
        line(1, "pod", member("a0")),
        line(1, "pod", member("a1")),
        bound(2, "a0", "n1"),
        bound(2, "a1", "n1"),
        line(5, "podGroup", group("pg-2")),
        line(6, "pod", member("b0")),
        line(6, "pod", member("b1")),
        bound(7, "b0", "n2"),
        bound(7, "b1", "n2"),
        gone(60, "a0"),
        gone(60, "a1"),
        gone(70, "b0"),
        gone(70, "b1"),
    ]
    .join("\n");
    let result = replayed(&text).await;
    let jobs: Vec<(&str, bool)> = result
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.started.is_some()))
        .collect();
    assert_eq!(jobs, [("ml/train", true), ("ml/train-r2", true)]);
    assert_eq!(result.bindings.len(), 4);
}

#[test]
fn pods_created_again_under_one_name_get_names_and_uids_of_their_own() {
    let text = [
        line(0, "pod", pod_with_uid("web-0", "u-a", json!({}))),
        bound_uid(1, "web-0", "u-a", "n1"),
        gone_uid(10, "web-0", "u-a"),
        line(11, "pod", pod_with_uid("web-0", "u-b", json!({}))),
        bound_uid(12, "web-0", "u-b", "n1"),
    ]
    .join("\n");
    let (workload, notes) = Workload::read(&text).unwrap();
    let names: Vec<&str> = workload.arrivals.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ml/web-0", "ml/web-0-r2"]);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("1 pods reuse") && n.contains("ml/web-0 -> web-0-r2")),
        "{notes:?}"
    );
    let jobs = workload.expand(1);
    let now = super::replay::replay_epoch();
    let uids: Vec<String> = jobs
        .iter()
        .map(|j| {
            let line = &workload.arrivals[j.line];
            objects::pod(j, line, 0, 0, now)
                .unwrap()
                .metadata
                .uid
                .unwrap()
        })
        .collect();
    assert_eq!(uids, ["sim-u-a-0", "sim-u-b-0"]);
}

/// Two pods of one name, the second arriving while the first still runs: the
/// replay places both.
#[tokio::test]
async fn pods_of_one_name_alive_together_are_both_replayed() {
    let text = [
        line(0, "pod", pod_with_uid("web-0", "u-a", json!({}))),
        bound_uid(1, "web-0", "u-a", "n1"),
        line(5, "pod", pod_with_uid("web-0", "u-b", json!({}))),
        bound_uid(6, "web-0", "u-b", "n1"),
        gone_uid(20, "web-0", "u-a"),
        gone_uid(30, "web-0", "u-b"),
    ]
    .join("\n");
    let result = replayed(&text).await;
    let placed: Vec<&str> = result.bindings.iter().map(|b| b.pod.as_str()).collect();
    assert_eq!(placed, ["ml/web-0", "ml/web-0-r2"]);
    let started: Vec<Option<f64>> = result.jobs.iter().map(|j| j.started).collect();
    assert_eq!(started, [Some(0.0), Some(5.0)]);
}
