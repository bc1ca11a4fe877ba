//! End-to-end tests of the webhook: request bodies in, `AdmissionReview` answers out.

use super::*;
use crate::device::device_config::NvidiaConfig;
use serde_json::{Value, json};

fn config() -> WebhookConfig {
    WebhookConfig {
        gang_gates: true,
        scheduler_name: "vgpu-scheduler".into(),
        force_overwrite_default_scheduler: true,
        nvidia: NvidiaConfig::default(),
        allow_privileged_vgpu: false,
        annotation_writers: Default::default(),
    }
}

fn container(name: &str, limits: Value) -> Value {
    json!({"name": name, "image": "cuda", "resources": {"limits": limits}})
}

fn pod(spec: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "train-", "namespace": "ml"},
        "spec": spec
    })
}

fn body_with(api_version: &str, operation: &str, object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ml",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": null,
            "dryRun": false
        }
    }))
    .unwrap()
}

fn body(object: Value) -> Vec<u8> {
    body_with(ADMISSION_V1, "CREATE", object)
}

/// Runs a review, checks the answer survives a JSON round trip, and returns it with
/// the decoded patch operations (empty when there is no patch).
fn run(body: &[u8], config: &WebhookConfig) -> (AdmissionReviewResponse, Vec<Value>) {
    let answer = review(body, config);
    let wire = serde_json::to_value(&answer).unwrap();
    assert_eq!(wire["kind"], "AdmissionReview");
    let back: AdmissionReviewResponse = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(back, answer);
    let ops = match &answer.response.patch {
        Some(bytes) => {
            assert_eq!(wire["response"]["patchType"], PATCH_TYPE_JSON);
            assert!(
                wire["response"]["patch"].is_string(),
                "patch must be base64"
            );
            serde_json::from_slice::<Vec<Value>>(&bytes.0).unwrap()
        }
        None => {
            assert!(wire["response"].get("patchType").is_none());
            Vec::new()
        }
    };
    (answer, ops)
}

fn op<'a>(ops: &'a [Value], path: &str) -> Option<&'a Value> {
    ops.iter().find(|o| o["path"] == path)
}

fn gpu_pod(limits: Value) -> Value {
    pod(json!({"containers": [container("trainer", limits)]}))
}

#[test]
fn v1_and_v1beta1_are_echoed() {
    for version in [ADMISSION_V1, ADMISSION_V1BETA1] {
        let (answer, _) = run(&body_with(version, "CREATE", gpu_pod(json!({}))), &config());
        assert_eq!(answer.api_version, version);
        assert_eq!(answer.kind, "AdmissionReview");
        assert_eq!(answer.response.uid, "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4");
        assert!(answer.response.allowed);
    }
}

#[test]
fn non_gpu_pod_is_allowed_without_patch() {
    let (answer, ops) = run(&body(gpu_pod(json!({"cpu": "1"}))), &config());
    assert!(answer.response.allowed);
    assert!(ops.is_empty());
    assert!(answer.response.patch.is_none());
}

#[test]
fn non_gpu_pod_gets_env_when_configured() {
    let mut config = config();
    config.nvidia.overwrite_env = true;
    let (answer, ops) = run(&body(gpu_pod(json!({"cpu": "1"}))), &config);
    assert!(answer.response.allowed);
    let env = op(&ops, "/spec/containers/0/env").expect("env added");
    assert_eq!(
        env["value"],
        json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}])
    );
    assert!(op(&ops, "/spec/schedulerName").is_none());
}

#[test]
fn whole_gpu_gets_scheduler_and_exclusive_cores() {
    let (answer, ops) = run(&body(gpu_pod(json!({"nvidia.com/gpu": "1"}))), &config());
    assert!(answer.response.allowed);
    let scheduler = op(&ops, "/spec/schedulerName").expect("scheduler set");
    assert_eq!(scheduler["op"], "add");
    assert_eq!(scheduler["value"], "vgpu-scheduler");
    let cores = op(
        &ops,
        "/spec/containers/0/resources/limits/nvidia.com~1gpucores",
    )
    .expect("gpucores added");
    assert_eq!(cores["op"], "add");
    assert_eq!(cores["value"], "100");
}

#[test]
fn sized_gpu_stays_shareable() {
    let limits = json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"});
    let (answer, ops) = run(&body(gpu_pod(limits)), &config());
    assert!(answer.response.allowed);
    assert!(op(&ops, "/spec/schedulerName").is_some());
    assert!(
        !ops.iter()
            .any(|o| o["path"].as_str().unwrap_or_default().contains("gpucores")),
        "{ops:?}"
    );
}

#[test]
fn memory_only_gets_a_gpu_count() {
    let (answer, ops) = run(
        &body(gpu_pod(json!({"nvidia.com/gpumem": "4096"}))),
        &config(),
    );
    assert!(answer.response.allowed);
    let count = op(&ops, "/spec/containers/0/resources/limits/nvidia.com~1gpu").expect("count");
    assert_eq!(count["value"], "1");
    assert!(op(&ops, "/spec/schedulerName").is_some());
}

#[test]
fn binary_memory_is_accepted() {
    let limits = json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"});
    let (answer, _) = run(&body(gpu_pod(limits)), &config());
    assert!(answer.response.allowed, "{}", answer.response.message());
}

#[test]
fn node_pinned_vgpu_pod_is_denied() {
    let object = pod(json!({
        "nodeName": "gpu-node-3",
        "containers": [container("trainer", json!({"nvidia.com/gpu": "1"}))]
    }));
    let (answer, ops) = run(&body(object), &config());
    assert!(!answer.response.allowed);
    assert!(ops.is_empty());
    let status = answer.response.status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert!(status.message.contains("gpu-node-3"), "{}", status.message);
    assert!(
        status.message.contains("spec.nodeName"),
        "{}",
        status.message
    );
    assert!(
        status.message.contains("vgpu-scheduler"),
        "{}",
        status.message
    );
}

#[test]
fn privileged_vgpu_pod_is_refused_unless_allowed() {
    let object = pod(json!({"containers": [{
        "name": "tool",
        "securityContext": {"privileged": true},
        "resources": {"limits": {"nvidia.com/gpu": "1"}}
    }]}));
    let (answer, ops) = run(&body(object.clone()), &config());
    assert!(!answer.response.allowed);
    assert!(ops.is_empty());
    let status = answer.response.status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert!(
        status.message.starts_with("container tool is privileged")
            && status.message.contains("--allow-privileged-vgpu"),
        "{}",
        status.message
    );

    let mut allowing = config();
    allowing.allow_privileged_vgpu = true;
    let (answer, ops) = run(&body(object), &allowing);
    assert!(answer.response.allowed);
    assert!(op(&ops, "/spec/schedulerName").is_some(), "scheduled here");
    assert_eq!(answer.response.warnings.len(), 1);
    assert!(answer.response.warnings[0].contains("privileged container tool"));
}

#[test]
fn privileged_pod_without_vgpu_is_mutated_as_usual() {
    let mut config = config();
    config.nvidia.overwrite_env = true;
    let object =
        pod(json!({"containers": [{"name": "tool", "securityContext": {"privileged": true}}]}));
    let (answer, ops) = run(&body(object), &config);
    assert!(answer.response.allowed);
    assert!(answer.response.warnings.is_empty());
    assert!(op(&ops, "/spec/containers/0/env").is_some());
}

#[test]
fn percentage_out_of_range_is_denied() {
    let limits = json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "150"});
    let (answer, ops) = run(&body(gpu_pod(limits)), &config());
    assert!(!answer.response.allowed);
    assert!(ops.is_empty());
    let status = answer.response.status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "container trainer: nvidia.com/gpumem-percentage: 150 is not a percentage between 1 and 100"
    );
}

#[test]
fn invalid_quantities_are_denied() {
    for (limits, resource) in [
        (
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "lots"}),
            "nvidia.com/gpumem",
        ),
        (json!({"nvidia.com/gpu": "0.5"}), "nvidia.com/gpu"),
    ] {
        let (answer, _) = run(&body(gpu_pod(limits)), &config());
        assert!(!answer.response.allowed);
        let message = answer.response.message();
        assert!(
            message.starts_with(&format!("container trainer: {resource}:")),
            "{message}"
        );
    }
}

#[test]
fn garbage_is_a_bad_request() {
    for garbage in [
        &b"not json"[..],
        b"{}",
        b"[1,2]",
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    ] {
        let (answer, _) = run(garbage, &config());
        assert!(!answer.response.allowed);
        assert_eq!(answer.response.status.as_ref().unwrap().code, 400);
        assert_eq!(answer.response.uid, "");
        assert!(!answer.response.message().is_empty());
    }
}

#[test]
fn unreadable_request_keeps_uid_and_version() {
    let body = serde_json::to_vec(&json!({
        "apiVersion": ADMISSION_V1BETA1,
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": 7}
    }))
    .unwrap();
    let (answer, _) = run(&body, &config());
    assert_eq!(answer.api_version, ADMISSION_V1BETA1);
    assert_eq!(answer.response.uid, "u-1");
    assert_eq!(answer.response.status.as_ref().unwrap().code, 400);
}

#[test]
fn non_pod_object_is_a_bad_request() {
    let mut review_body: Value = serde_json::from_slice(&body(gpu_pod(json!({})))).unwrap();
    review_body["request"]["kind"] =
        json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let (answer, _) = run(&serde_json::to_vec(&review_body).unwrap(), &config());
    assert!(!answer.response.allowed);
    assert_eq!(answer.response.status.as_ref().unwrap().code, 400);
    assert!(answer.response.message().contains("not a Pod"));

    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
    let mut review_body: Value = serde_json::from_slice(&body(node)).unwrap();
    review_body["request"]["kind"] = Value::Null;
    let (answer, _) = run(&serde_json::to_vec(&review_body).unwrap(), &config());
    assert_eq!(answer.response.status.as_ref().unwrap().code, 400);
    assert_eq!(answer.response.uid, "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4");
}

#[test]
fn pod_without_containers_is_denied() {
    let (answer, _) = run(&body(pod(json!({"containers": []}))), &config());
    assert!(!answer.response.allowed);
    assert_eq!(answer.response.status.as_ref().unwrap().code, 403);
    assert_eq!(answer.response.message(), "pod has no containers");
}

#[test]
fn other_operations_are_allowed_untouched() {
    for operation in ["UPDATE", "DELETE", "CONNECT"] {
        let (answer, ops) = run(
            &body_with(
                ADMISSION_V1,
                operation,
                gpu_pod(json!({"nvidia.com/gpu": "1"})),
            ),
            &config(),
        );
        assert!(answer.response.allowed);
        assert!(ops.is_empty());
    }
}

#[test]
fn pod_of_another_scheduler_is_left_alone() {
    let object = pod(json!({
        "schedulerName": "volcano",
        "containers": [container("trainer", json!({"nvidia.com/gpu": "1"}))]
    }));
    let (answer, ops) = run(&body(object), &config());
    assert!(answer.response.allowed);
    assert!(ops.is_empty());
}

#[test]
fn default_scheduler_is_taken_over_only_when_forced() {
    let object = pod(json!({
        "schedulerName": "default-scheduler",
        "containers": [container("trainer", json!({"nvidia.com/gpu": "1"}))]
    }));
    let (answer, ops) = run(&body(object.clone()), &config());
    assert!(answer.response.allowed);
    let scheduler = op(&ops, "/spec/schedulerName").expect("rewritten");
    assert_eq!(scheduler["op"], "replace");
    assert_eq!(scheduler["value"], "vgpu-scheduler");

    let mut keep = config();
    keep.force_overwrite_default_scheduler = false;
    let (answer, ops) = run(&body(object), &keep);
    assert!(answer.response.allowed);
    assert!(ops.is_empty());
}

#[test]
fn own_scheduler_name_is_accepted_and_mutated() {
    let object = pod(json!({
        "schedulerName": "vgpu-scheduler",
        "containers": [container("trainer", json!({"nvidia.com/gpu": "1"}))]
    }));
    let (answer, ops) = run(&body(object), &config());
    assert!(answer.response.allowed);
    assert!(op(&ops, "/spec/schedulerName").is_none());
    assert!(
        op(
            &ops,
            "/spec/containers/0/resources/limits/nvidia.com~1gpucores"
        )
        .is_some()
    );
}

#[test]
fn empty_scheduler_name_never_rewrites() {
    let mut config = config();
    config.scheduler_name.clear();
    let fresh = gpu_pod(json!({"nvidia.com/gpu": "1"}));
    let (answer, ops) = run(&body(fresh), &config);
    assert!(answer.response.allowed);
    assert!(op(&ops, "/spec/schedulerName").is_none());
    // The container is still completed, so whichever scheduler places it sees it whole.
    assert!(
        op(
            &ops,
            "/spec/containers/0/resources/limits/nvidia.com~1gpucores"
        )
        .is_some()
    );

    // Without a name of our own, a pinned pod is not ours to refuse, and a pod of
    // another scheduler is left alone.
    let pinned = pod(json!({
        "schedulerName": "default-scheduler",
        "nodeName": "n1",
        "containers": [container("trainer", json!({"nvidia.com/gpu": "1"}))]
    }));
    let (answer, ops) = run(&body(pinned), &config);
    assert!(answer.response.allowed);
    assert!(op(&ops, "/spec/schedulerName").is_none());
    let other = pod(json!({
        "schedulerName": "volcano",
        "containers": [container("trainer", json!({"nvidia.com/gpu": "1"}))]
    }));
    let (answer, ops) = run(&body(other), &config);
    assert!(answer.response.allowed);
    assert!(ops.is_empty());
}

#[test]
fn init_containers_are_mutated_too() {
    let object = pod(json!({
        "initContainers": [container("warmup", json!({"nvidia.com/gpu": "1"}))],
        "containers": [container("main", json!({"cpu": "1"}))]
    }));
    let (answer, ops) = run(&body(object), &config());
    assert!(answer.response.allowed);
    assert!(
        op(
            &ops,
            "/spec/initContainers/0/resources/limits/nvidia.com~1gpucores"
        )
        .is_some()
    );
    assert!(op(&ops, "/spec/schedulerName").is_some());

    let bad = pod(json!({
        "initContainers": [container("warmup", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "101"}))],
        "containers": [container("main", json!({"cpu": "1"}))]
    }));
    let (answer, _) = run(&body(bad), &config());
    assert!(!answer.response.allowed);
    assert!(answer.response.message().starts_with("container warmup:"));
}

#[test]
fn runtime_class_and_priority_are_set() {
    let mut config = config();
    config.nvidia.runtime_class_name = "nvidia".into();
    config.nvidia.gpu_core_policy = "force".into();
    let limits =
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024", "nvidia.com/priority": "1"});
    let (answer, ops) = run(&body(gpu_pod(limits)), &config);
    assert!(answer.response.allowed);
    assert_eq!(
        op(&ops, "/spec/runtimeClassName").expect("runtime class")["value"],
        "nvidia"
    );
    assert_eq!(
        op(&ops, "/spec/containers/0/env").expect("env")["value"],
        json!([
            {"name": "CUDA_TASK_PRIORITY", "value": "1"},
            {"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"}
        ])
    );
}

#[test]
fn patch_applies_to_the_received_pod() {
    let object = pod(json!({
        "containers": [
            {"name": "a", "image": "x", "env": [{"name": "KEEP", "value": "1"}], "resources": {"limits": {"nvidia.com/gpu": "2"}}},
            container("b", json!({"cpu": "1"}))
        ],
        "someFutureField": {"kept": true}
    }));
    let mut config = config();
    config.nvidia.gpu_core_policy = "disable".into();
    let (answer, ops) = run(&body(object.clone()), &config);
    assert!(answer.response.allowed);
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).unwrap();
    let mut applied = object;
    json_patch::patch(&mut applied, &patch).unwrap();
    assert_eq!(applied["spec"]["someFutureField"]["kept"], true);
    assert_eq!(applied["spec"]["containers"][0]["env"][0]["name"], "KEEP");
    assert_eq!(
        applied["spec"]["containers"][0]["env"][1]["value"],
        "disable"
    );
    assert_eq!(
        applied["spec"]["containers"][1]["env"][0]["value"],
        "disable"
    );
    assert_eq!(
        applied["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"],
        "100"
    );
}

fn gang_pod(annotations: Value, scheduler: Option<&str>, limits: Value) -> Value {
    let mut spec = json!({"containers": [container("worker", limits)]});
    if let Some(s) = scheduler {
        spec["schedulerName"] = json!(s);
    }
    let mut p = pod(spec);
    p["metadata"]["annotations"] = annotations;
    p
}

#[test]
fn gang_pods_we_schedule_are_gated_at_creation() {
    let (answer, ops) = run(
        &body(gang_pod(
            json!({"scheduling.k8s.io/group-name": "train"}),
            None,
            json!({"nvidia.com/gpu": "1"}),
        )),
        &config(),
    );
    assert!(answer.response.allowed);
    let gates = op(&ops, "/spec/schedulingGates").expect("gate added");
    assert_eq!(gates["value"], json!([{"name": "vgpu-scheduler.io/gang"}]));
    assert_eq!(
        op(&ops, "/spec/schedulerName").unwrap()["value"],
        "vgpu-scheduler"
    );
}

#[test]
fn members_of_a_native_pod_group_are_gated_and_nothing_else_is_written() {
    let mut object = gpu_pod(json!({"nvidia.com/gpu": "1"}));
    object["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
    let (answer, ops) = run(&body(object), &config());
    assert!(answer.response.allowed);
    let gates = op(&ops, "/spec/schedulingGates").expect("gate added");
    assert_eq!(gates["value"], json!([{"name": "vgpu-scheduler.io/gang"}]));
    assert!(
        ops.iter()
            .all(|o| !o["path"].as_str().unwrap_or("").contains("annotations")),
        "the group is read from the spec, not written as an annotation: {ops:?}"
    );
}

#[test]
fn queue_pods_without_gpus_that_name_us_are_gated_too() {
    let (_, ops) = run(
        &body(gang_pod(
            json!({"scheduling.volcano.sh/queue-name": "team-a"}),
            Some("vgpu-scheduler"),
            json!({"cpu": "1"}),
        )),
        &config(),
    );
    assert!(op(&ops, "/spec/schedulingGates").is_some(), "{ops:?}");
}

#[test]
fn gang_pods_of_other_schedulers_and_plain_pods_are_not_gated() {
    for object in [
        gang_pod(
            json!({"scheduling.k8s.io/group-name": "train"}),
            Some("volcano"),
            json!({"nvidia.com/gpu": "1"}),
        ),
        gang_pod(json!({}), None, json!({"nvidia.com/gpu": "1"})),
        gang_pod(
            json!({"scheduling.k8s.io/group-name": "train"}),
            None,
            json!({"cpu": "1"}),
        ),
    ] {
        let (_, ops) = run(&body(object.clone()), &config());
        assert!(
            op(&ops, "/spec/schedulingGates").is_none(),
            "{object}: {ops:?}"
        );
    }
    let mut off = config();
    off.gang_gates = false;
    let (_, ops) = run(
        &body(gang_pod(
            json!({"scheduling.k8s.io/group-name": "train"}),
            None,
            json!({"nvidia.com/gpu": "1"}),
        )),
        &off,
    );
    assert!(op(&ops, "/spec/schedulingGates").is_none());
}

struct Quota(crate::fit::QuotaHeadroom);

impl QuotaLookup for Quota {
    fn headroom(&self, namespace: &str) -> crate::fit::QuotaHeadroom {
        assert_eq!(namespace, "ml");
        self.0
    }
}

#[test]
fn pods_over_their_namespace_vgpu_quota_are_refused_at_creation() {
    let quota = Quota(crate::fit::QuotaHeadroom {
        memory: Some((40000, 30000)),
        cores: None,
    });
    let object = gpu_pod(json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "6000"}));
    let answer = review_with_quota(&body(object), &config(), &quota);
    assert!(!answer.response.allowed);
    let status = answer.response.status.expect("status");
    assert_eq!(status.code, 403);
    let message = status.message;
    assert!(
        message.contains("nvidia.com/gpumem 12000 requested, 30000 in use, limit 40000"),
        "{message}"
    );
    // Within the quota, and percentage requests (no MiB yet), are allowed.
    for limits in [
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000"}),
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "90"}),
    ] {
        let answer = review_with_quota(&body(gpu_pod(limits.clone())), &config(), &quota);
        assert!(answer.response.allowed, "{limits}");
    }
}

#[test]
fn privileged_sidecar_of_a_vgpu_pod_is_named_as_the_sidecar_it_is() {
    let object = pod(json!({"containers": [
        {"name": "train", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        {"name": "proxy", "securityContext": {"privileged": true}}
    ]}));
    let (answer, ops) = run(&body(object.clone()), &config());
    assert!(!answer.response.allowed);
    assert!(ops.is_empty());
    let status = answer.response.status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "container proxy is privileged and shares the pod with vGPU container train: it asks for no vGPU itself, but a privileged container sees every GPU on its node, so the pod's vGPU limits cannot hold; drop privileged, or ask the operator to start the scheduler with --allow-privileged-vgpu"
    );

    let mut allowing = config();
    allowing.allow_privileged_vgpu = true;
    let (answer, _) = run(&body(object), &allowing);
    assert!(answer.response.allowed);
    assert_eq!(
        answer.response.warnings,
        vec!["vGPU limits of container train do not hold: privileged container proxy of the same pod can use every GPU on its node".to_string()]
    );
}

#[test]
fn an_update_without_its_old_object_cannot_slip_a_placement_through() {
    let mut forged = gpu_pod(json!({"nvidia.com/gpu": "1"}));
    forged["metadata"]["annotations"] = json!({
        "hami.io/vgpu-node": "gpu-a",
        "hami.io/vgpu-devices-allocated": "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc,NVIDIA,81559,100:;"
    });
    let (answer, ops) = run(&body_with(ADMISSION_V1, "UPDATE", forged), &config());
    assert!(!answer.response.allowed);
    assert!(ops.is_empty());
    let status = answer.response.status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "user \"alice\" may not change hami.io/vgpu-node, hami.io/vgpu-devices-allocated: only the scheduler and HAMi's device plugin write these annotations"
    );

    let (answer, _) = run(&body_with(ADMISSION_V1, "UPDATE", Value::Null), &config());
    assert!(!answer.response.allowed);
    assert_eq!(answer.response.status.as_ref().unwrap().code, 400);
    assert_eq!(answer.response.message(), "update request has no object");
}
