//! Tidal reclaim and preemption end to end against the fake kube-apiserver: the
//! victims go through `pods/eviction` (PodDisruptionBudgets can refuse with
//! 429), an evicted pod keeps its node and GPUs until its kubelet confirms, and
//! the pod they made room for waits gated on a pipelined plan until then. A
//! restart in between loses nothing and evicts nobody twice.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::time::Duration;

const NS: &str = "ml";
const PIPELINED_PLAN: &str = "vgpu-scheduler.io/pipelined-plan";

/// Reclaim by service type and queue (capacity-card), preemption by priority
/// inside a queue.
const TIDAL: &str = "actions: enqueue, allocate, backfill, reclaim, preempt
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
  - name: conformance
    enableReclaimable: false
- plugins:
  - name: capacity-card
    arguments:
      cardUnlimitedCpuMemory: true
";

fn conf() -> SchedulerConfFile {
    SchedulerConfFile::new(TIDAL)
}

fn queue(name: &str, priority: i64, reclaimable: bool) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "priority": priority, "reclaimable": reclaimable},
        "status": {"state": "Open"}
    })
}

fn priority_class(name: &str, value: i64) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value
    })
}

/// The tidal cluster: one node of two whole GPUs, the two queues, two classes.
fn tidal(api: &FakeApiServer) {
    api.set_graceful_pod_deletion(true);
    add_node(api, "n1", 2, 1);
    api.create(queue("inference", 80000, false));
    api.create(queue("training", 20000, true));
    api.create(priority_class("pc-high", 100000));
    api.create(priority_class("pc-low", 1000));
}

/// A gated pod of one whole GPU as the webhook leaves it.
fn gated_pod(name: &str, annotations: Value, class: &str) -> Value {
    let mut p = gpu_pod(NS, name, 1, 80000, 0);
    p["metadata"]["annotations"] = annotations;
    p["metadata"]["labels"] = json!({"app": name.trim_end_matches(char::is_numeric)});
    p["spec"]["schedulerName"] = json!(SCHEDULER);
    p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
    p["spec"]["priorityClassName"] = json!(class);
    p
}

/// A training gang of `n` in queue `queue`, created gated.
fn training_gang(api: &FakeApiServer, group: &str, n: u32, queue: &str, class: &str) {
    api.create(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group, "namespace": NS,
            "annotations": {"volcano.sh/service.type": "training"}},
        "spec": {"minMember": n, "queue": queue, "priorityClassName": class}
    }));
    for i in 0..n {
        create_pod(
            api,
            gated_pod(
                &format!("{group}{i}"),
                json!({"scheduling.k8s.io/group-name": group}),
                class,
            ),
        );
    }
}

/// Waits until three more planning cycles have run: long enough for the
/// scheduler to have acted on what it saw.
async fn three_more_cycles(server: &LiveServer) {
    const RUN: &str = r#"vgpu_scheduler_planning_cycles_total{outcome="run"}"#;
    let cycles = server.metric(RUN).await;
    server
        .wait_metric(RUN, cycles + 3, Duration::from_secs(10))
        .await;
}

async fn debug_queues(server: &LiveServer) -> Value {
    let (status, body) = server.get("/debug/queues").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("/debug/queues is JSON")
}

/// The evictions `/debug/queues` lists, as (pod, action, outcome).
fn listed_evictions(view: &Value) -> Vec<(&str, &str, &str)> {
    view["evictions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["pod"].as_str().unwrap_or(""),
                e["action"].as_str().unwrap_or(""),
                e["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect()
}

/// Polls `/debug/queues` until `f` holds.
async fn wait_for_view(server: &LiveServer, what: &str, f: impl Fn(&Value) -> bool) {
    wait_for_page(server, "/debug/queues", what, |body| {
        serde_json::from_str::<Value>(body).is_ok_and(|view| f(&view))
    })
    .await;
}

/// An inference pod in queue `inference`, created gated.
fn inference_pod(api: &FakeApiServer, name: &str) {
    create_pod(
        api,
        gated_pod(
            name,
            json!({"scheduling.volcano.sh/queue-name": "inference",
                "volcano.sh/service.type": "inference"}),
            "pc-high",
        ),
    );
}

fn terminating(api: &FakeApiServer, name: &str) -> bool {
    api.get("Pod", Some(NS), name)
        .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_string())
}

/// Waits for the planner to release `names`, then filters, binds and starts each.
async fn run_gang(api: &FakeApiServer, server: &LiveServer, names: &[String]) {
    wait_for(server, "the gang released", || {
        names.iter().all(|n| !gang_gated(api, NS, n))
    })
    .await;
    for name in names {
        server.schedule(api, NS, name, &["n1"]).await;
        device_plugin_allocated(api, NS, name);
        api.set_pod_phase(NS, name, "Running");
    }
}

fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Waits until both training pods were evicted and are terminating, with the
/// inference pod still gated on its pipelined plan.
async fn wait_for_reclaim(api: &FakeApiServer, server: &LiveServer, victims: &[String]) {
    wait_for(server, "the training gang evicted", || {
        victims.iter().all(|v| terminating(api, v))
    })
    .await;
    let evicted = api.evicted_pods();
    for v in victims {
        assert!(evicted.contains(&format!("{NS}/{v}")), "{evicted:?}");
    }
    wait_for(server, "the pipelined plan written", || {
        api.get("Pod", Some(NS), "svc")
            .is_some_and(|p| annotation(&p, PIPELINED_PLAN).is_some())
    })
    .await;
    assert!(
        gang_gated(api, NS, "svc"),
        "waits while its victims still hold the GPUs"
    );
}

/// The tidal cluster with a low-priority training gang of `n`, `group0..`,
/// running on it.
struct Running {
    api: FakeApiServer,
    conf: SchedulerConfFile,
    server: LiveServer,
    gang: Vec<String>,
}

async fn training_running(group: &str, n: u32) -> Running {
    training_running_under(conf(), group, n).await
}

/// [`training_running`] under another configuration.
async fn training_running_under(conf: SchedulerConfFile, group: &str, n: u32) -> Running {
    let api = FakeApiServer::start().await;
    tidal(&api);
    training_gang(&api, group, n, "training", "pc-low");
    let server = LiveServer::start_planning(&api, &conf).await;
    let gang = names(group, n);
    run_gang(&api, &server, &gang).await;
    Running {
        api,
        conf,
        server,
        gang,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inference_reclaims_a_training_gang_and_starts_once_the_kubelet_lets_go() {
    let Running {
        api,
        conf: _conf,
        server,
        gang: train,
    } = training_running("train", 2).await;

    inference_pod(&api, "svc");
    wait_for_reclaim(&api, &server, &train).await;
    // The GPUs are still held by the leaving pods and promised to svc: an
    // ordinary pod finds no room.
    create_pod(&api, gpu_pod(NS, "solo", 1, 80000, 0));
    let answer = server.filter(&api_pod(&api, NS, "solo"), &["n1"]).await;
    assert!(
        answer["NodeNames"].as_array().is_none_or(|n| n.is_empty()),
        "{answer}"
    );
    let events = api.events_for(NS, "train0");
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "Evict" && e["type"] == "Warning"),
        "{events:?}"
    );
    // /debug/queues says who waits for whom, and what was evicted.
    server
        .wait_metric(
            r#"vgpu_scheduler_queue_pipelined_pods{queue="inference"}"#,
            1,
            Duration::from_secs(10),
        )
        .await;
    wait_for_view(&server, "the plan and both evictions listed", |view| {
        view["pipelined"][0]["pod"] == "ml/svc" && listed_evictions(view).len() == 2
    })
    .await;
    let view = debug_queues(&server).await;
    let plan = &view["pipelined"][0];
    assert_eq!(plan["pod"], "ml/svc", "{view}");
    assert_eq!(plan["queue"], "inference");
    assert_eq!(plan["node"], "n1");
    assert_eq!(
        plan["waitsFor"],
        json!([{"pod": "ml/train0", "leaving": true}, {"pod": "ml/train1", "leaving": true}])
    );
    assert_eq!(
        listed_evictions(&view),
        [
            ("ml/train0", "reclaim", "evicted"),
            ("ml/train1", "reclaim", "evicted")
        ],
        "{view}"
    );
    assert!(
        view["evictions"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("ml/svc")),
        "the reason names the pod the room is for: {view}"
    );

    // The kubelet confirms: svc gets the GPUs, its gate goes, kube-scheduler
    // binds it where the plan said.
    for v in &train {
        api.finish_deletion(NS, v);
    }
    wait_for(&server, "svc released", || !gang_gated(&api, NS, "svc")).await;
    let svc = api_pod(&api, NS, "svc");
    assert!(annotation(&svc, PIPELINED_PLAN).is_none(), "{svc}");
    assert_eq!(annotation(&svc, "hami.io/vgpu-node"), Some("n1"));
    server.schedule(&api, NS, "svc", &["n1"]).await;
    let usage = cluster_usage(&api);
    assert!(usage.values().all(|u| u.used <= 1), "{usage:?}");
    assert_eq!(api.evicted_pods().len(), 2, "nobody else evicted");
    wait_for_view(&server, "the plan gone from /debug/queues", |v| {
        v["pipelined"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    let evicted = server
        .metric(r#"vgpu_scheduler_evictions_total{action="reclaim",queue="training",service_type="training",outcome="evicted"}"#)
        .await;
    assert_eq!(evicted, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_never_evicts_inference() {
    let api = FakeApiServer::start().await;
    tidal(&api);
    let conf = conf();
    inference_pod(&api, "svc0");
    inference_pod(&api, "svc1");
    let server = LiveServer::start_planning(&api, &conf).await;
    run_gang(&api, &server, &names("svc", 2)).await;
    training_gang(&api, "train", 1, "training", "pc-high");
    wait_for(&server, "the training gang judged", || {
        api.get("PodGroup", Some(NS), "train")
            .is_some_and(|g| g["status"]["phase"] == "Inqueue")
    })
    .await;
    // A few more cycles: still nobody evicted.
    three_more_cycles(&server).await;
    assert!(api.evictions().is_empty(), "{:?}", api.evictions());
    assert!(gang_gated(&api, NS, "train0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_that_allows_nothing_protects_the_gang_and_a_refused_eviction_evicts_no_one() {
    let Running {
        api,
        conf: _conf,
        server,
        gang: train,
    } = training_running("train", 2).await;
    api.create(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "train", "namespace": NS},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}}
    }));
    inference_pod(&api, "svc");
    three_more_cycles(&server).await;
    assert!(api.evictions().is_empty(), "{:?}", api.evictions());
    assert!(gang_gated(&api, NS, "svc"));

    // The budget now allows both, but the API server refuses the first eviction
    // (the budget changed again in between): nobody is evicted for that plan,
    // and the next plan goes through.
    api.delete("PodDisruptionBudget", Some(NS), "train");
    api.inject_errors("/eviction", 429, 1);
    wait_for_reclaim(&api, &server, &train).await;
    let refused = server
        .metric(r#"vgpu_scheduler_evictions_total{action="reclaim",queue="training",service_type="training",outcome="refused"}"#)
        .await;
    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(
        refused,
        1,
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("evictions"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(api.evicted_pods().len(), 2);
    wait_for_view(&server, "the refusal and both evictions listed", |view| {
        listed_evictions(view).len() == 3
    })
    .await;
    let view = debug_queues(&server).await;
    let outcomes: Vec<&str> = view["evictions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["refused", "evicted", "evicted"], "{view}");
    assert!(
        view["evictions"][0]["detail"].as_str().is_some(),
        "a refusal carries the API server's answer: {view}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_victims_leave_keeps_the_plan_and_evicts_nobody_twice() {
    let Running {
        api,
        conf,
        mut server,
        gang: train,
    } = training_running("train", 2).await;
    inference_pod(&api, "svc");
    wait_for_reclaim(&api, &server, &train).await;
    let plan = annotation(&api_pod(&api, NS, "svc"), PIPELINED_PLAN)
        .expect("plan")
        .to_string();
    server.kill();

    // While the scheduler is down one victim finishes; the other later.
    api.finish_deletion(NS, "train0");
    let server = LiveServer::start_planning(&api, &conf).await;
    // The room stays promised: an ordinary pod finds none.
    create_pod(&api, gpu_pod(NS, "solo", 1, 80000, 0));
    let answer = server.filter(&api_pod(&api, NS, "solo"), &["n1"]).await;
    assert!(
        answer["NodeNames"].as_array().is_none_or(|n| n.is_empty()),
        "{answer}"
    );
    assert!(
        gang_gated(&api, NS, "svc"),
        "released while a victim still runs"
    );
    api.finish_deletion(NS, "train1");
    wait_for(&server, "svc released", || !gang_gated(&api, NS, "svc")).await;
    let node = annotation(&api_pod(&api, NS, "svc"), "hami.io/vgpu-node")
        .expect("allocation")
        .to_string();
    let plan: Value = serde_json::from_str(&plan).expect("plan is JSON");
    assert_eq!(plan["node"], node.as_str());
    server.schedule(&api, NS, "svc", &["n1"]).await;
    assert_eq!(api.evictions().len(), 2, "{:?}", api.evictions());
}

/// A high-priority job of one joins the queue of the running gang `low`: the
/// gang is evicted, its kubelet lets go, and the job is released and bound.
async fn high_priority_job_takes_over(running: &Running) {
    let Running {
        api,
        server,
        gang: low,
        ..
    } = running;
    training_gang(api, "high", 1, "training", "pc-high");
    wait_for(server, "the low gang evicted", || {
        low.iter().all(|v| terminating(api, v))
    })
    .await;
    for v in low {
        api.finish_deletion(NS, v);
    }
    wait_for(server, "the high job released", || {
        !gang_gated(api, NS, "high0")
    })
    .await;
    server.schedule(api, NS, "high0", &["n1"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_job_preempts_a_lower_one_in_its_own_queue() {
    let running = training_running("low", 2).await;
    high_priority_job_takes_over(&running).await;
    let server = &running.server;
    let preempted = server
        .metric(r#"vgpu_scheduler_evictions_total{action="preempt",queue="training",service_type="training",outcome="evicted"}"#)
        .await;
    assert_eq!(
        preempted, 2,
        "the whole gang of two: one alone would break it"
    );
}

/// Volcano's gang eviction actions instead of reclaim and preempt, with the
/// plugins that let them take whole gangs.
const GANG_EVICTION: &str = "actions: enqueue, allocate, gangreclaim, gangpreempt, backfill
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangreclaim_evicts_the_training_gang_whole_through_the_eviction_api() {
    let Running {
        api,
        conf: _conf,
        server,
        gang: train,
    } = training_running_under(SchedulerConfFile::new(GANG_EVICTION), "train", 2).await;

    // One GPU is wanted; the gang of two goes whole or not at all.
    inference_pod(&api, "svc");
    wait_for_reclaim(&api, &server, &train).await;
    for v in &train {
        api.finish_deletion(NS, v);
    }
    wait_for(&server, "svc released", || !gang_gated(&api, NS, "svc")).await;
    assert_eq!(
        annotation(&api_pod(&api, NS, "svc"), "hami.io/vgpu-node"),
        Some("n1")
    );
    server.schedule(&api, NS, "svc", &["n1"]).await;
    assert_eq!(api.evicted_pods().len(), 2, "nobody else evicted");
    let evicted = server
        .metric(r#"vgpu_scheduler_evictions_total{action="gangreclaim",queue="training",service_type="training",outcome="evicted"}"#)
        .await;
    assert_eq!(evicted, 2, "counted under the action that chose them");
    assert_evictions_named(&api, &server, &train, "gangreclaim", "Reclaimed").await;
}

/// `/debug/queues` lists each of `victims` as evicted by `action`, and each
/// victim's `Evict` event names it after what happened to it (`title`).
async fn assert_evictions_named(
    api: &FakeApiServer,
    server: &LiveServer,
    victims: &[String],
    action: &str,
    title: &str,
) {
    let wanted: Vec<String> = victims.iter().map(|v| format!("{NS}/{v}")).collect();
    let wanted: Vec<(&str, &str, &str)> = wanted
        .iter()
        .map(|p| (p.as_str(), action, "evicted"))
        .collect();
    // The eviction is counted as it is made; the view is published when the
    // cycle that made it closes, a moment later.
    wait_for_view(server, "the evictions listed", |view| {
        let mut listed = listed_evictions(view);
        listed.sort();
        listed == wanted
    })
    .await;
    let opening = format!("{title} by {action}: ");
    for v in victims {
        let events = api.events_for(NS, v);
        assert!(
            events.iter().any(|e| e["reason"] == "Evict"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(&opening))),
            "{v}: {events:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangpreempt_takes_a_lower_priority_gang_of_its_queue_whole() {
    let running = training_running_under(SchedulerConfFile::new(GANG_EVICTION), "low", 2).await;
    high_priority_job_takes_over(&running).await;
    let evicted = running.api.evicted_pods();
    assert_eq!(evicted.len(), 2, "the whole gang of two: {evicted:?}");
    let counted = running
        .server
        .metric(r#"vgpu_scheduler_evictions_total{action="gangpreempt",queue="training",service_type="training",outcome="evicted"}"#)
        .await;
    assert_eq!(counted, 2, "counted under the action that chose them");
    assert_evictions_named(
        &running.api,
        &running.server,
        &running.gang,
        "gangpreempt",
        "Preempted",
    )
    .await;
}

/// `vgpu_scheduler_evictions_total` of gangpreempt in queue training, with
/// `outcome`.
fn gangpreempt_evictions(outcome: &str) -> String {
    format!(
        r#"vgpu_scheduler_evictions_total{{action="gangpreempt",queue="training",service_type="training",outcome="{outcome}"}}"#
    )
}

/// The low gang of two runs under the gang eviction actions; a high-priority
/// job of its queue arrives and gangpreempt evicts the gang, but the first
/// request to evict low1 fails (the plan stands: low1 is to be asked again).
async fn gangpreempt_of_low1_failed_once() -> Running {
    let running = training_running_under(SchedulerConfFile::new(GANG_EVICTION), "low", 2).await;
    running.api.inject_errors("pods/low1/eviction", 500, 1);
    training_gang(&running.api, "high", 1, "training", "pc-high");
    running
        .server
        .wait_metric(&gangpreempt_evictions("failed"), 1, Duration::from_secs(15))
        .await;
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gangpreempt_eviction_asked_again_is_still_named_gangpreempt() {
    let running = gangpreempt_of_low1_failed_once().await;
    let server = &running.server;
    // Asked again once the retry interval has passed.
    server
        .wait_metric(
            &gangpreempt_evictions("evicted"),
            2,
            Duration::from_secs(30),
        )
        .await;
    wait_for_view(server, "both evictions and the failed one listed", |view| {
        let mut listed = listed_evictions(view);
        listed.sort();
        listed
            == [
                ("ml/low0", "gangpreempt", "evicted"),
                ("ml/low1", "gangpreempt", "evicted"),
                ("ml/low1", "gangpreempt", "failed"),
            ]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gangpreempt_eviction_asked_again_after_a_restart_is_still_named_gangpreempt() {
    let Running {
        api,
        conf,
        mut server,
        ..
    } = gangpreempt_of_low1_failed_once().await;
    // The scheduler stops before it asks again: the restarted one asks, knowing
    // the action only from what it reads back.
    server.kill();
    assert!(!terminating(&api, "low1"), "low1 was not evicted yet");

    let server = LiveServer::start_planning(&api, &conf).await;
    server
        .wait_metric(
            &gangpreempt_evictions("evicted"),
            1,
            Duration::from_secs(15),
        )
        .await;
    assert!(terminating(&api, "low1"));
    assert_evictions_named(
        &api,
        &server,
        &["low1".to_string()],
        "gangpreempt",
        "Preempted",
    )
    .await;
    assert_eq!(
        api.evicted_pods().len(),
        2,
        "low0 once, low1 once: {:?}",
        api.evictions()
    );
}
