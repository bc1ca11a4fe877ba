//! Black-box tests of the mutating admission webhook (`/webhook`, `/mutate`):
//! AdmissionReview v1 and v1beta1 in, the same apiVersion out, uid echoed, HAMi's
//! mutations as an RFC 6902 patch.

mod support;

use serde_json::{Value, json};
use support::*;

const SCHEDULER: &str = "hami-vgpu";

async fn webhook_server() -> Server {
    webhook_server_with(&[]).await
}

/// A server with one GPU node, this file's scheduler name and `flags`.
async fn webhook_server_with(flags: &[&str]) -> Server {
    let mut args = vec!["--scheduler-name", SCHEDULER];
    args.extend_from_slice(flags);
    Server::start(
        vec![node(
            "gpu-a",
            &[h100("GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc", 0)],
            &[],
        )],
        &args,
    )
    .await
}

/// A pod as the API server hands it to a mutating webhook on CREATE: defaulted
/// (`schedulerName: default-scheduler`), no uid, no nodeName.
fn admitted_pod(name: &str, containers: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {"app": name},
        },
        "spec": {
            "containers": containers,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
        },
        "status": {},
    })
}

fn review(api_version: &str, uid: &str, pod: &Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"],
            "namespace": "team-a",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "4b1e1c7e-8a2d-4f43-9d1c-6f0b2a3c4d5e",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }
    })
}

/// POSTs a review to `path`; asserts HTTP 200, AdmissionReview kind, same
/// apiVersion and the echoed uid. Returns `response`.
async fn admit_at(server: &Server, path: &str, api_version: &str, pod: &Value) -> Value {
    let uid = uid_for(&format!("review/{}", pod["metadata"]["name"]));
    let (status, answer) = server
        .post_json(path, &review(api_version, &uid, pod))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["apiVersion"], api_version,
        "same apiVersion: {answer}"
    );
    assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
    assert_eq!(
        answer["response"]["uid"],
        uid.as_str(),
        "uid echoed: {answer}"
    );
    answer["response"].clone()
}

async fn admit(server: &Server, pod: &Value) -> Value {
    admit_at(server, "/webhook", "admission.k8s.io/v1", pod).await
}

/// The JSON patch of a response (empty when there is none).
fn patch_ops(response: &Value) -> Vec<Value> {
    match response.get("patch") {
        None | Some(Value::Null) => Vec::new(),
        Some(p) => {
            assert_eq!(response["patchType"], "JSONPatch", "{response}");
            let bytes = base64_decode(p.as_str().expect("patch is a base64 string"));
            serde_json::from_slice(&bytes).expect("patch is a JSON array")
        }
    }
}

fn apply(pod: &Value, ops: &[Value]) -> Value {
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops.to_vec())).expect("RFC 6902 patch");
    let mut doc = pod.clone();
    json_patch::patch(&mut doc, &patch).expect("patch applies to the pod");
    doc
}

fn gpu_only(name: &str) -> Value {
    container(name, &[("nvidia.com/gpu", "1")])
}

#[tokio::test]
async fn vgpu_pod_gets_scheduler_name_and_exclusive_cores() {
    let server = webhook_server().await;
    for (path, api_version) in [
        ("/webhook", "admission.k8s.io/v1"),
        ("/webhook", "admission.k8s.io/v1beta1"),
        ("/mutate", "admission.k8s.io/v1"),
    ] {
        let pod = admitted_pod("whole-gpu", vec![gpu_only("cuda")]);
        let response = admit_at(&server, path, api_version, &pod).await;
        assert_eq!(
            response["allowed"], true,
            "{path} {api_version}: {response}"
        );
        let ops = patch_ops(&response);
        assert!(
            ops.iter()
                .any(|op| op["path"] == "/spec/schedulerName" && op["value"] == SCHEDULER),
            "patch sets /spec/schedulerName: {ops:?}"
        );
        assert!(
            ops.iter().any(|op| op["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("nvidia.com~1gpucores"))
                && op["value"] == "100"),
            "patch adds nvidia.com/gpucores 100: {ops:?}"
        );
        let mutated = apply(&pod, &ops);
        assert_eq!(mutated["spec"]["schedulerName"], SCHEDULER);
        assert_eq!(
            mutated["spec"]["containers"][0]["resources"]["limits"],
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"})
        );
    }
}

#[tokio::test]
async fn shareable_vgpu_pod_keeps_its_request() {
    let server = webhook_server().await;
    let pod = admitted_pod(
        "shared-gpu",
        vec![container(
            "cuda",
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "8192")],
        )],
    );
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let mutated = apply(&pod, &patch_ops(&response));
    assert_eq!(mutated["spec"]["schedulerName"], SCHEDULER);
    assert_eq!(
        mutated["spec"]["containers"][0]["resources"]["limits"],
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"}),
        "gpumem given: no exclusive default"
    );
}

#[tokio::test]
async fn node_pinned_vgpu_pod_is_denied() {
    let server = webhook_server().await;
    let mut pod = admitted_pod("pinned", vec![gpu_only("cuda")]);
    pod["spec"]["nodeName"] = json!("gpu-a");
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403, "{response}");
}

#[tokio::test]
async fn non_gpu_pod_is_allowed_without_a_patch() {
    let server = webhook_server().await;
    let pod = admitted_pod(
        "web",
        vec![container("nginx", &[("cpu", "500m"), ("memory", "256Mi")])],
    );
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_ops(&response).is_empty(), "no patch: {response}");
}

/// As HAMi v2.10 does: a privileged container sees every GPU on its node, so its
/// vGPU limits cannot hold. `--allow-privileged-vgpu` admits it, with a warning.
#[tokio::test]
async fn privileged_vgpu_pod_is_refused_unless_the_operator_allows_it() {
    let server = webhook_server().await;
    let mut c = gpu_only("debugger");
    c["securityContext"] = json!({"privileged": true});
    let pod = admitted_pod("privileged", vec![c]);
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403, "{response}");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("debugger is privileged") && message.contains("--allow-privileged-vgpu"),
        "the reason and the way out: {response}"
    );

    let allowing = webhook_server_with(&["--allow-privileged-vgpu"]).await;
    let response = admit(&allowing, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(
        patch_ops(&response)
            .iter()
            .any(|op| op["path"] == "/spec/schedulerName" && op["value"] == SCHEDULER),
        "scheduled here like any vGPU pod: {response}"
    );
    assert!(
        response["warnings"]
            .as_array()
            .is_some_and(|w| !w.is_empty()),
        "a warning explains the risk: {response}"
    );
}

#[tokio::test]
async fn memory_percentage_over_100_is_denied_naming_container_and_field() {
    let server = webhook_server().await;
    let pod = admitted_pod(
        "bad-percentage",
        vec![container(
            "trainer",
            &[
                ("nvidia.com/gpu", "1"),
                ("nvidia.com/gpumem-percentage", "150"),
            ],
        )],
    );
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("trainer") && message.contains("nvidia.com/gpumem-percentage"),
        "message names container and field: {response}"
    );
}

#[tokio::test]
async fn garbage_body_is_answered_with_code_400() {
    let server = webhook_server().await;
    for body in ["this is not an admission review", "{\"request\":"] {
        let (status, text) = server.post_raw("/webhook", body).await;
        assert_eq!(status, 200, "{text}");
        let answer: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("answer is JSON ({e}): {text:?}"));
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        assert_eq!(answer["response"]["status"]["code"], 400, "{answer}");
    }
}

#[tokio::test]
async fn memory_only_request_gets_a_gpu_count() {
    let server = webhook_server().await;
    let pod = admitted_pod(
        "memory-only",
        vec![container("cuda", &[("nvidia.com/gpumem", "4096")])],
    );
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let mutated = apply(&pod, &patch_ops(&response));
    assert_eq!(mutated["spec"]["schedulerName"], SCHEDULER);
    assert_eq!(
        mutated["spec"]["containers"][0]["resources"]["limits"],
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"}),
        "HAMi's defaultGPUNum (1) is added"
    );
}

#[tokio::test]
async fn init_container_vgpu_request_is_mutated_too() {
    let server = webhook_server().await;
    let mut pod = admitted_pod("init-gpu", vec![container("app", &[("cpu", "1")])]);
    pod["spec"]["initContainers"] = json!([gpu_only("warmup")]);
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let mutated = apply(&pod, &patch_ops(&response));
    assert_eq!(mutated["spec"]["schedulerName"], SCHEDULER);
    assert_eq!(
        mutated["spec"]["initContainers"][0]["resources"]["limits"]["nvidia.com/gpucores"],
        "100"
    );
}

#[tokio::test]
async fn pod_of_another_scheduler_is_left_alone() {
    let server = webhook_server().await;
    let mut pod = admitted_pod("volcano-job", vec![gpu_only("cuda")]);
    pod["spec"]["schedulerName"] = json!("volcano");
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_ops(&response).is_empty(), "no patch: {response}");
}

#[tokio::test]
async fn pod_without_containers_is_denied() {
    let server = webhook_server().await;
    let pod = admitted_pod("empty", vec![]);
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403, "{response}");
}

#[tokio::test]
async fn invalid_vgpu_quantity_is_denied_at_admission() {
    let server = webhook_server().await;
    let pod = admitted_pod(
        "bad-memory",
        vec![container(
            "trainer",
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "lots")],
        )],
    );
    let response = admit(&server, &pod).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("trainer") && message.contains("nvidia.com/gpumem"),
        "{response}"
    );
}

#[tokio::test]
async fn a_pod_over_its_namespace_vgpu_quota_is_refused_with_the_numbers() {
    let server = Server::start(
        vec![
            node(
                "gpu-a",
                &[h100("GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc", 0)],
                &[],
            ),
            quota("team-a", "vgpu", &[("limits.nvidia.com/gpumem", "30000")]),
        ],
        &["--scheduler-name", SCHEDULER],
    )
    .await;
    let big = admitted_pod(
        "big",
        vec![container(
            "cuda",
            &[("nvidia.com/gpu", "2"), ("nvidia.com/gpumem", "20000")],
        )],
    );
    let response = admit(&server, &big).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403, "{response}");
    let message = response["status"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("nvidia.com/gpumem 40000 requested, 0 in use, limit 30000"),
        "{message}"
    );
    let small = admitted_pod(
        "small",
        vec![container(
            "cuda",
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "20000")],
        )],
    );
    assert_eq!(admit(&server, &small).await["allowed"], true);
}

// ---------------------------------------------------------------------------
// Placement annotations
// ---------------------------------------------------------------------------

const SCHEDULER_USER: &str = "system:serviceaccount:vgpu-system:vgpu-scheduler";
const DEVICE_PLUGIN_USER: &str = "system:serviceaccount:kube-system:hami-device-plugin";

async fn guarded_webhook_server() -> Server {
    webhook_server_with(&[
        "--scheduler-users",
        SCHEDULER_USER,
        "--device-plugin-users",
        DEVICE_PLUGIN_USER,
    ])
    .await
}

/// An AdmissionReview of `operation` on `pod` (and `old` for UPDATE) by `user`.
fn review_by(operation: &str, user: &str, pod: &Value, old: Option<&Value>) -> Value {
    let mut r = review(
        "admission.k8s.io/v1",
        &uid_for(&format!("{operation}/{user}")),
        pod,
    );
    r["request"]["operation"] = json!(operation);
    r["request"]["userInfo"]["username"] = json!(user);
    if let Some(old) = old {
        r["request"]["oldObject"] = old.clone();
    }
    r
}

async fn verdict(server: &Server, review: &Value) -> Value {
    let (status, answer) = server.post_json("/mutate", review).await;
    assert_eq!(status, 200, "{answer}");
    answer["response"].clone()
}

fn with_annotations(pod: &Value, annotations: Value) -> Value {
    let mut p = pod.clone();
    p["metadata"]["annotations"] = annotations;
    p
}

/// A tenant cannot create a pod that already claims GPUs, even a CPU-only pod.
#[tokio::test]
async fn pods_created_with_placement_annotations_are_refused() {
    let server = guarded_webhook_server().await;
    for containers in [
        vec![gpu_only("trainer")],
        vec![container("web", &[("cpu", "1")])],
    ] {
        let pod = with_annotations(
            &admitted_pod("forged", containers),
            json!({
                "hami.io/vgpu-node": "gpu-a",
                "hami.io/vgpu-devices-allocated": "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc,NVIDIA,80000,100:;",
                "hami.io/vgpu-devices-to-allocate": "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc,NVIDIA,80000,100:;",
            }),
        );
        let response = verdict(&server, &review_by("CREATE", "alice", &pod, None)).await;
        assert_eq!(response["allowed"], false, "{response}");
        assert_eq!(response["status"]["code"], 403, "{response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        for key in [
            "hami.io/vgpu-node",
            "hami.io/vgpu-devices-allocated",
            "hami.io/vgpu-devices-to-allocate",
        ] {
            assert!(message.contains(key), "names {key}: {message}");
        }
    }
}

/// Updates that change placement annotations pass only for their writers: the
/// scheduler, and HAMi's device plugin for the bind phase.
#[tokio::test]
async fn placement_annotations_change_only_by_the_scheduler_and_the_device_plugin() {
    let server = guarded_webhook_server().await;
    let plain = admitted_pod("placed", vec![gpu_only("trainer")]);
    let placed = with_annotations(
        &plain,
        json!({"hami.io/vgpu-node": "gpu-a", "hami.io/bind-phase": "allocating"}),
    );
    let allocated = with_annotations(
        &plain,
        json!({"hami.io/vgpu-node": "gpu-a", "hami.io/bind-phase": "success"}),
    );
    let moved = with_annotations(
        &plain,
        json!({"hami.io/vgpu-node": "gpu-b", "hami.io/bind-phase": "allocating"}),
    );
    let allowed = |r: &Value| r["allowed"] == true;
    let by = |user: &str, new: &Value, old: &Value| review_by("UPDATE", user, new, Some(old));
    assert!(allowed(
        &verdict(&server, &by(SCHEDULER_USER, &placed, &plain)).await
    ));
    assert!(allowed(
        &verdict(&server, &by(DEVICE_PLUGIN_USER, &allocated, &placed)).await
    ));
    let tenant = verdict(&server, &by("alice", &moved, &placed)).await;
    assert_eq!(tenant["allowed"], false, "{tenant}");
    assert!(
        tenant["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("hami.io/vgpu-node")),
        "{tenant}"
    );
    let plugin = verdict(&server, &by(DEVICE_PLUGIN_USER, &moved, &placed)).await;
    assert_eq!(
        plugin["allowed"], false,
        "the device plugin does not move pods: {plugin}"
    );
    // Any other update passes untouched.
    let mut relabelled = placed.clone();
    relabelled["metadata"]["labels"]["team"] = json!("b");
    let other = verdict(&server, &by("alice", &relabelled, &placed)).await;
    assert_eq!(other["allowed"], true, "{other}");
    assert!(other.get("patch").is_none(), "{other}");
}
