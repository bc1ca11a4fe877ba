//! What the scheduler records into a trace: a vGPU pod of ours the first time it
//! is seen waiting (from a watch event or, without one, from `/filter`), its
//! bind and its end, each once; PodGroups once; times from the scheduler's
//! clock.

use super::event_order_tests::bind;
use super::{Scheduler, SchedulerConfig};
use crate::clock::ManualClock;
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::ExtenderArgs;
use crate::metrics::Metrics;
use crate::trace::{TraceEvent, TraceRecorder, TraceSettings, parse_trace};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn node() -> Node {
    serde_json::from_value(json!({"metadata": {"name": "n1", "annotations": {
        "hami.io/node-nvidia-register": r#"[{"id":"GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true,"index":0,"mode":"hami-core"}]"#}}}))
    .unwrap()
}

fn pod(name: &str, scheduler: &str, gpus: bool) -> Pod {
    let limits = if gpus {
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})
    } else {
        json!({"cpu": "1"})
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {"schedulerName": scheduler,
                 "containers": [{"name": "c", "resources": {"limits": limits}}]}
    }))
    .unwrap()
}

struct Recording {
    scheduler: Arc<Scheduler>,
    clock: Arc<ManualClock>,
    writer: crate::trace::TraceWriter,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn epoch() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_750_000_000, 0).unwrap()
}

fn recording() -> Recording {
    recording_following(TraceSettings::default().tracked)
}

/// A recording that follows at most `tracked` pods at once.
fn recording_following(tracked: usize) -> Recording {
    let clock = ManualClock::starting_at(epoch());
    let memory = Arc::new(MemoryCluster::new(vec![node()], Vec::new(), true));
    let api: Arc<dyn ClusterApi> = memory;
    let scheduler = Arc::new(Scheduler::with_clock(
        SchedulerConfig::default(),
        api,
        Arc::new(Metrics::new()),
        clock.clone(),
    ));
    scheduler.load(&ClusterObjects {
        nodes: vec![node()],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let settings = TraceSettings {
        flush_every: Duration::from_secs(3600),
        tracked,
        ..TraceSettings::default()
    };
    let (recorder, writer) =
        TraceRecorder::open(&path, &settings, scheduler.metrics().trace_dropped.clone()).unwrap();
    assert!(scheduler.record_trace(recorder));
    Recording {
        scheduler,
        clock,
        writer,
        path,
        _dir: dir,
    }
}

impl Recording {
    /// Stops the writer; every event with its seconds since the clock's start.
    fn finish(self) -> Vec<(f64, TraceEvent)> {
        self.writer.finish();
        let text = std::fs::read_to_string(&self.path).unwrap();
        parse_trace(&text)
            .unwrap()
            .lines
            .into_iter()
            .map(|l| ((l.at - epoch()).num_milliseconds() as f64 / 1000.0, l.event))
            .collect()
    }
}

fn kinds(events: &[(f64, TraceEvent)]) -> Vec<String> {
    events
        .iter()
        .map(|(at, e)| match e {
            TraceEvent::Pod(p) => format!("{at} pod {}", p.metadata.name.as_deref().unwrap()),
            TraceEvent::Bound { pod, node, .. } => format!("{at} bound {pod} {node}"),
            TraceEvent::Gone { pod, .. } => format!("{at} gone {pod}"),
            TraceEvent::PodGroup(g) => format!("{at} podGroup {}", g["metadata"]["name"]),
        })
        .collect()
}

#[tokio::test]
async fn filter_then_bind_records_the_pod_and_its_node_at_the_clocks_times() {
    let r = recording();
    let p = pod("a", "vgpu-scheduler", true);
    r.clock.advance(Duration::from_secs(5));
    filter_only(&r.scheduler, &p).await;
    // A second filter of the same pod (a retry) records nothing new.
    r.clock.advance(Duration::from_millis(1500));
    filter_only(&r.scheduler, &p).await;
    bind(&r.scheduler, "a").await;
    r.clock.advance(Duration::from_secs(60));
    r.scheduler.forget_pod("uid-a");
    r.scheduler.forget_pod("uid-a");
    let events = r.finish();
    assert_eq!(
        kinds(&events),
        vec!["5 pod a", "6.5 bound ns/a n1", "66.5 gone ns/a"]
    );
}

#[tokio::test]
async fn watch_events_record_first_sight_bind_and_end_of_our_vgpu_pods_only() {
    let r = recording();
    let mine = pod("mine", "vgpu-scheduler", true);
    r.scheduler
        .apply_pod(&pod("other", "default-scheduler", true));
    r.scheduler
        .apply_pod(&pod("cpu-only", "vgpu-scheduler", false));
    r.scheduler.apply_pod(&mine);
    r.clock.advance(Duration::from_secs(1));
    r.scheduler.apply_pod(&mine);
    // Bound by the planner's release and kube-scheduler, seen on the watch.
    let mut bound = mine.clone();
    bound.spec.as_mut().unwrap().node_name = Some("n1".into());
    r.scheduler.apply_pod(&bound);
    r.clock.advance(Duration::from_secs(1));
    r.scheduler.apply_pod(&bound);
    let mut done = bound.clone();
    done.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    r.scheduler.apply_pod(&done);
    r.scheduler.forget_pod("uid-mine");
    let events = r.finish();
    assert_eq!(
        kinds(&events),
        vec!["0 pod mine", "1 bound ns/mine n1", "2 gone ns/mine"]
    );
}

#[tokio::test]
async fn a_podgroup_is_recorded_once_and_again_when_created_anew() {
    let r = recording();
    let group = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml", "uid": "pg-1"},
        "spec": {"minMember": 2, "queue": "default"}
    });
    r.scheduler.apply_podgroup(&group);
    r.scheduler.apply_podgroup(&group);
    r.scheduler.forget_podgroup("ml", "train");
    r.clock.advance(Duration::from_secs(3));
    r.scheduler.apply_podgroup(&group);
    let events = r.finish();
    assert_eq!(
        kinds(&events),
        vec!["0 podGroup \"train\"", "3 podGroup \"train\""]
    );
}

#[tokio::test]
async fn a_native_podgroup_is_recorded_completed_from_its_workload_and_its_members_name_it() {
    let r = recording();
    r.scheduler.apply_workload(&json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"podGroupTemplates": [{"name": "workers",
            "schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup"}]}
    }));
    r.scheduler.apply_native_podgroup(&json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ns", "uid": "pg-1"},
        "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "job", "podGroupTemplateName": "workers"}},
                 "schedulingPolicy": {"gang": {"minCount": 2}}}
    }));
    let mut member = pod("w0", "vgpu-scheduler", true);
    crate::gang::scheduling_group::keep(
        &json!({"spec": {"schedulingGroup": {"podGroupName": "train"}}}),
        &mut member,
    );
    r.scheduler.apply_pod(&member);
    let path = r.path.clone();
    r.writer.finish();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let group = &lines[0]["podGroup"];
    assert_eq!(group["apiVersion"], "scheduling.k8s.io/v1alpha2", "{text}");
    assert_eq!(group["spec"]["disruptionMode"], "PodGroup", "{text}");
    let recorded = &lines[1]["pod"];
    assert_eq!(
        recorded["spec"]["schedulingGroup"],
        json!({"podGroupName": "train"}),
        "{text}"
    );
    assert!(
        !text.contains(crate::gang::scheduling_group::SCHEDULING_GROUP),
        "{text}"
    );
}

#[tokio::test]
async fn pods_of_other_schedulers_are_not_recorded_even_when_filtered() {
    let r = recording();
    let filter = |p: Pod| {
        r.scheduler.filter(ExtenderArgs {
            pod: Some(p),
            nodes: None,
            node_names: Some(["n1"].into_iter().collect()),
        })
    };
    // kube-scheduler calls the extender for each of its profiles.
    filter(pod("theirs", "default-scheduler", true)).await;
    // A name this scheduler answered to before is still ours.
    filter(pod("renamed", "hami-scheduler", true)).await;
    r.scheduler
        .apply_pod(&pod("watched", "hami-scheduler", true));
    r.scheduler
        .apply_pod(&pod("other", "default-scheduler", true));
    let events = r.finish();
    assert_eq!(kinds(&events), vec!["0 pod renamed", "0 pod watched"]);
}

#[tokio::test]
async fn a_pod_without_a_scheduler_name_that_filter_places_is_recorded() {
    // Only a cluster file holds such a pod (the API server names
    // default-scheduler); kube-scheduler asked this extender, so it is ours.
    let r = recording();
    let mut bare = pod("bare", "", true);
    if let Some(spec) = bare.spec.as_mut() {
        spec.scheduler_name = None;
    }
    filter_only(&r.scheduler, &bare).await;
    bind(&r.scheduler, "bare").await;
    let events = r.finish();
    assert_eq!(kinds(&events), vec!["0 pod bare", "0 bound ns/bare n1"]);
}

/// `/filter` of `p` over `n1`; asserts it fits.
async fn filter_only(scheduler: &Scheduler, p: &Pod) {
    let answer = scheduler
        .filter(ExtenderArgs {
            pod: Some(p.clone()),
            nodes: None,
            node_names: Some(["n1"].into_iter().collect()),
        })
        .await;
    assert_eq!(answer.node_names.unwrap_or_default(), vec!["n1"]);
}

#[tokio::test]
async fn pods_filtered_that_never_bind_do_not_stop_the_recording() {
    let r = recording_following(3);
    for i in 0..5 {
        filter_only(
            &r.scheduler,
            &pod(&format!("never-{i}"), "vgpu-scheduler", true),
        )
        .await;
        r.clock.advance(Duration::from_secs(1));
    }
    let late = pod("late", "vgpu-scheduler", true);
    filter_only(&r.scheduler, &late).await;
    bind(&r.scheduler, "late").await;
    let dropped = r.scheduler.metrics().trace_dropped.get();
    let events = kinds(&r.finish());
    assert_eq!(
        &events[5..],
        ["5 pod late", "5 bound ns/late n1"],
        "{events:?}"
    );
    assert_eq!(dropped, 0);
}

#[tokio::test]
async fn pods_deleted_while_no_watch_told_are_recorded_gone_after_the_next_list() {
    let r = recording();
    r.scheduler
        .apply_pod(&pod("deleted", "vgpu-scheduler", true));
    r.clock.advance(Duration::from_secs(10));
    let list_started = crate::clock::Clock::now(r.clock.as_ref());
    r.clock.advance(Duration::from_secs(1));
    // Created after the list was taken: not in it, yet not gone.
    r.scheduler.apply_pod(&pod("newer", "vgpu-scheduler", true));
    r.clock.advance(Duration::from_secs(1));
    r.scheduler
        .retain_pods(&std::collections::HashSet::new(), list_started);
    let events = r.finish();
    assert_eq!(
        kinds(&events),
        vec!["0 pod deleted", "11 pod newer", "12 gone ns/deleted"]
    );
}
