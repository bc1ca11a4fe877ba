//! The mutating admission webhook as a cluster runs it: the plain install's
//! MutatingWebhookConfiguration (or the chart's for a cluster without the
//! placement policy) is stored in the fake kube-apiserver (its `caBundle` filled
//! with the server's CA, as the certs job does), the fake calls `/mutate` of the
//! live server through the configuration's Service, and pods are created over
//! the API as a user writes them. What the user sees is the API's answer: the
//! pod as stored, or the refusal.

mod fake_apiserver;
// Only `template`, `available` and `chart_dir` are used here.
#[allow(dead_code)]
mod helm;
mod live_support;
mod support;

use base64::Engine;
use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::{Value, json};
use std::time::Duration;

const NS: &str = "ml";
/// The plain install's webhook configuration, as `kubectl apply` reads it.
const WEBHOOK_MANIFEST: &str =
    include_str!("../manifests/install/60-mutatingwebhookconfiguration.yaml");
const WEBHOOK: &str = "vgpu.scheduler.io";
const MUTATE_CALLS: &str = r#"vgpu_scheduler_request_duration_seconds_count{verb="mutate"}"#;

struct Cluster {
    api: FakeApiServer,
    server: LiveServer,
}

/// A fake cluster with the server running as the scheduler identity the fake
/// authenticates its token as, and the install's webhook configuration
/// (`failure_policy` replacing the install's `Fail` when given).
async fn cluster(failure_policy: Option<&str>) -> Cluster {
    cluster_where(failure_policy, &["--scheduler-users", FAKE_USER]).await
}

/// The user the fake's token authenticates as, for the server and the test alike.
const FAKE_USER: &str = "kubernetes-admin";

/// [`cluster`] with the server started with `args`.
async fn cluster_where(failure_policy: Option<&str>, args: &[&str]) -> Cluster {
    let install = serde_yaml_ng::from_str(WEBHOOK_MANIFEST).expect("webhook manifest is YAML");
    cluster_configured(install, failure_policy, args).await
}

/// The webhook configuration the chart renders where it cannot ship the
/// placement policy (Kubernetes before 1.30): the webhook guards placement
/// annotations itself. None when helm is not there (outside CI).
fn chart_webhook_without_policy() -> Option<Value> {
    if !helm::available("the chart's webhook without the placement policy") {
        return None;
    }
    let rendered = helm::template(
        &helm::chart_dir(),
        &helm::Release {
            name: "vgpu-scheduler",
            namespace: "vgpu-system",
            kube_version: "v1.29.4",
        },
        &json!({}),
    );
    let (_, text) = rendered
        .into_iter()
        .find(|(file, _)| file == "mutatingwebhookconfiguration.yaml")
        .expect("the chart renders its webhook configuration");
    Some(serde_yaml_ng::from_str(&text).expect("webhook configuration is YAML"))
}

/// A fake cluster with `config` stored as its webhook configuration and the
/// server started with `args`.
async fn cluster_configured(
    mut config: Value,
    failure_policy: Option<&str>,
    args: &[&str],
) -> Cluster {
    let api = FakeApiServer::start().await;
    let mut all = vec!["--self-signed-name", "vgpu-scheduler.vgpu-system.svc"];
    all.extend_from_slice(args);
    let server = LiveServer::start(&api, &all).await;
    let hook = &mut config["webhooks"][0];
    assert_eq!(hook["name"], WEBHOOK);
    hook["clientConfig"]["caBundle"] =
        json!(base64::engine::general_purpose::STANDARD.encode(server.certificate_pem()));
    if let Some(policy) = failure_policy {
        hook["failurePolicy"] = json!(policy);
    }
    let service = &hook["clientConfig"]["service"];
    api.route_service(
        service["namespace"].as_str().expect("service namespace"),
        service["name"].as_str().expect("service name"),
        service["port"].as_u64().map_or(443, |p| p as u16),
        server.address(),
    );
    let (status, answer) = post_to_api(
        &api,
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        &config,
    )
    .await;
    assert_eq!(status, 201, "webhook configuration refused: {answer}");
    api.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    Cluster { api, server }
}

/// A pod as a user writes it: one container, `limits` as given, nothing else.
fn user_pod(name: &str, limits: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{
            "name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "resources": {"limits": limits}
        }]}
    })
}

fn one_gpu() -> Value {
    json!({"nvidia.com/gpu": "1"})
}

/// Creates `pod` in `NS` over the API.
async fn create(c: &Cluster, pod: &Value) -> (u16, Value) {
    post_to_api(&c.api, &format!("/api/v1/namespaces/{NS}/pods"), pod).await
}

/// Creates `pod`, asserting 201; returns the stored pod as answered.
async fn created(c: &Cluster, pod: &Value) -> Value {
    let (status, answer) = create(c, pod).await;
    assert_eq!(status, 201, "create refused: {answer}");
    answer
}

fn scheduler_of(pod: &Value) -> &str {
    pod["spec"]["schedulerName"].as_str().unwrap_or("")
}

fn limit<'a>(pod: &'a Value, resource: &str) -> Option<&'a str> {
    pod["spec"]["containers"][0]["resources"]["limits"][resource].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vgpu_pod_comes_back_routed_to_the_scheduler_with_exclusive_cores() {
    let c = cluster(None).await;
    let pod = created(&c, &user_pod("train", one_gpu())).await;
    assert_eq!(scheduler_of(&pod), SCHEDULER, "{pod}");
    // A whole card asked for is made exclusive, in limits and (defaulted from
    // them after the webhook) in requests.
    assert_eq!(limit(&pod, "nvidia.com/gpucores"), Some("100"), "{pod}");
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpucores"],
        "100"
    );
    assert_eq!(api_pod(&c.api, NS, "train"), pod);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_pod_comes_back_with_its_scheduling_gate() {
    let c = cluster(None).await;
    let mut pod = user_pod("worker-0", one_gpu());
    pod["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "llm"});
    let pod = created(&c, &pod).await;
    assert_eq!(scheduler_of(&pod), SCHEDULER, "{pod}");
    assert_eq!(pod["spec"]["schedulingGates"], json!([{"name": GANG_GATE}]));
    assert!(gang_gated(&c.api, NS, "worker-0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vgpu_pod_pinned_with_node_name_is_refused_with_the_webhooks_message() {
    let c = cluster(None).await;
    let mut pod = user_pod("pinned", one_gpu());
    pod["spec"]["nodeName"] = json!("gpu-1");
    let (status, answer) = create(&c, &pod).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["kind"], "Status");
    assert_eq!(
        answer["message"],
        format!(
            "admission webhook \"{WEBHOOK}\" denied the request: pod is pinned to node gpu-1 with spec.nodeName; vGPU pods must be placed by {SCHEDULER}: remove spec.nodeName"
        )
    );
    assert!(c.api.get("Pod", Some(NS), "pinned").is_none());
}

/// Creates a vGPU pod the webhook routes (so the webhook is live), then
/// returns how many reviews the server has answered.
async fn webhook_calls_after_a_routed_pod(c: &Cluster) -> u64 {
    let routed = created(c, &user_pod("routed", one_gpu())).await;
    assert_eq!(scheduler_of(&routed), SCHEDULER);
    c.server.metric(MUTATE_CALLS).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opted_out_pod_is_not_sent_to_the_webhook() {
    let c = cluster(None).await;
    let calls = webhook_calls_after_a_routed_pod(&c).await;
    let mut pod = user_pod("opted-out", one_gpu());
    pod["metadata"]["labels"] = json!({"vgpu.io/webhook": "ignore"});
    let pod = created(&c, &pod).await;
    assert_eq!(scheduler_of(&pod), "default-scheduler", "{pod}");
    assert_eq!(limit(&pod, "nvidia.com/gpucores"), None);
    assert_eq!(c.server.metric(MUTATE_CALLS).await, calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_without_vgpu_is_stored_untouched() {
    let c = cluster(None).await;
    let calls = webhook_calls_after_a_routed_pod(&c).await;
    let pod = created(&c, &user_pod("web", json!({"cpu": "1", "memory": "1Gi"}))).await;
    assert_eq!(scheduler_of(&pod), "default-scheduler", "{pod}");
    assert!(pod["spec"].get("schedulingGates").is_none());
    assert_eq!(c.server.metric(MUTATE_CALLS).await, calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_server_down_fail_refuses_the_create() {
    let mut c = cluster(None).await;
    c.server.kill();
    let (status, answer) = create(&c, &user_pod("train", one_gpu())).await;
    assert_eq!(status, 500, "{answer}");
    assert_eq!(answer["reason"], "InternalError");
    let message = answer["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"{WEBHOOK}\": failed to call webhook: Post \"https://vgpu-scheduler.vgpu-system.svc:443/mutate?timeout=10s\""
        )),
        "{message}"
    );
    assert!(c.api.get("Pod", Some(NS), "train").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_server_down_ignore_lets_the_pod_in_unmutated() {
    let mut c = cluster(Some("Ignore")).await;
    let routed = created(&c, &user_pod("before", one_gpu())).await;
    assert_eq!(scheduler_of(&routed), SCHEDULER);
    c.server.kill();
    let pod = created(&c, &user_pod("during", one_gpu())).await;
    assert_eq!(scheduler_of(&pod), "default-scheduler", "{pod}");
    assert_eq!(limit(&pod, "nvidia.com/gpucores"), None);
}

/// Adds node `gpu-1` (one GPU) and waits until the server has seen it.
async fn with_gpu_node(c: &Cluster) {
    add_node(&c.api, "gpu-1", 1, 4);
    let (_, registered) = c
        .server
        .wait_state(Duration::from_secs(15), |s| {
            s.node_names().contains(&"gpu-1")
        })
        .await;
    assert!(registered, "the server never saw node gpu-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_vgpu_pod_is_mutated_scheduled_and_bound_with_its_placement() {
    let c = cluster(None).await;
    with_gpu_node(&c).await;
    let pod = created(
        &c,
        &user_pod(
            "infer",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}),
        ),
    )
    .await;
    assert_eq!(scheduler_of(&pod), SCHEDULER, "{pod}");
    let node = c.server.schedule(&c.api, NS, "infer", &["gpu-1"]).await;
    assert_eq!(node, "gpu-1");
    let bound = api_pod(&c.api, NS, "infer");
    assert_eq!(bound["spec"]["nodeName"], "gpu-1");
    assert_eq!(annotation(&bound, "hami.io/vgpu-node"), Some("gpu-1"));
    let devices = annotation(&bound, "hami.io/vgpu-devices-allocated").unwrap_or("");
    assert!(devices.contains(&gpu_id("gpu-1", 0)), "{bound}");
    assert!(devices.contains("20000"), "{bound}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_device_plugins_answer_is_stored_without_the_webhook_even_while_it_is_down() {
    // The install ships the placement policy, so the webhook is sent creates
    // only: a placed pod costs the API server one webhook call, and HAMi's
    // device plugin records its allocation while no replica answers.
    let mut c = cluster(None).await;
    with_gpu_node(&c).await;
    created(&c, &user_pod("infer", one_gpu())).await;
    c.server.schedule(&c.api, NS, "infer", &["gpu-1"]).await;
    let answer = json!({"metadata": {"annotations": {
        "hami.io/bind-phase": "success",
        "hami.io/vgpu-devices-to-allocate": ";"
    }}});
    let (status, stored) = patch_pod(&c, "infer", &answer).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(
        c.server.metric(MUTATE_CALLS).await,
        1,
        "the create's review alone"
    );

    c.server.kill();
    let erased = json!({"metadata": {"annotations": {"hami.io/vgpu-devices-to-allocate": null}}});
    let (status, stored) = patch_pod(&c, "infer", &erased).await;
    assert_eq!(status, 200, "{stored}");
    let stored = api_pod(&c.api, NS, "infer");
    assert_eq!(annotation(&stored, "hami.io/bind-phase"), Some("success"));
    assert_eq!(
        annotation(&stored, "hami.io/vgpu-devices-to-allocate"),
        None
    );
}

/// Merge-patches pod `name` over the API; the status and the answer.
async fn patch_pod(c: &Cluster, name: &str, patch: &Value) -> (u16, Value) {
    merge_patch_api(
        &c.api,
        &format!("/api/v1/namespaces/{NS}/pods/{name}"),
        patch,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_policy_a_placement_annotation_written_by_a_tenant_is_refused_on_update() {
    let Some(config) = chart_webhook_without_policy() else {
        return;
    };
    // Here the fake's one user is not the scheduler's identity: a tenant.
    let c = cluster_configured(config, None, &[]).await;
    created(&c, &user_pod("train", one_gpu())).await;
    let patch = json!({"metadata": {"annotations": {"hami.io/vgpu-node": "gpu-1"}, "labels": {"team": "a"}}});
    let (code, status) = patch_pod(&c, "train", &patch).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "admission webhook \"{WEBHOOK}\" denied the request: user \"{FAKE_USER}\" may not change hami.io/vgpu-node: only the scheduler and HAMi's device plugin write these annotations"
        )
    );
    let stored = api_pod(&c.api, NS, "train");
    assert_eq!(annotation(&stored, "hami.io/vgpu-node"), None);
    assert_eq!(label(&stored, "team"), None);
}
