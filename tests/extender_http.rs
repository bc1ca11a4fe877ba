//! Black-box tests of `/filter`, `/prioritize`, `/metrics` and the client-certificate
//! gate, against the real binary over HTTPS.

mod support;

use rcgen::ExtendedKeyUsagePurpose;
use serde_json::{Value, json};
use support::*;

const WORKED_EXAMPLE: &str = include_str!("fixtures/hami-worked-example.yaml");
const DEVICE1: &str = "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc";
const DEVICE2: &str = "GPU-4f3c1a52-9d0e-4b7f-8a61-2c5e9b1d7f03";
const DEVICE3: &str = "GPU-7b2e8c14-05a9-4e6d-b3f2-91c4d8a6e520";
const DEVICE4: &str = "GPU-c91d4e7a-6f28-4b05-9e13-5a8b2c7d0f64";

async fn worked_example_server(args: &[&str]) -> Server {
    Server::start_with(ServerOptions {
        cluster_text: Some(WORKED_EXAMPLE.to_string()),
        args: args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
    .await
}

/// The §16 pod: 1 GPU, 1000 MiB, 20 cores.
fn worked_example_pod(name: &str, annotations: &[(&str, &str)]) -> Value {
    let mut b = pod("default", name).gpus(1, 1000, 20);
    for (k, v) in annotations {
        b = b.annotation(k, v);
    }
    b.build()
}

/// Filters the §16 pod and checks node, device, annotation encoding and usage.
async fn check_worked_example(
    server: &Server,
    pod: &Value,
    want_node: &str,
    want_device: &str,
    case: &str,
) {
    let answer = server.filter(pod, &["node1", "node2"]).await;
    assert_eq!(
        answer,
        json!({"NodeNames": [want_node]}),
        "{case}: /filter answer"
    );
    let state = server.state().await;
    let placed = state.expect_pod(pod_uid(pod));
    assert_eq!(placed["node"], want_node, "{case}: node in /debug/state");
    assert_eq!(placed["phase"], "Reserved", "{case}: phase");
    assert_eq!(
        encode_devices(placed),
        format!("{want_device},NVIDIA,1000,20:;"),
        "{case}: hami.io/vgpu-devices-allocated"
    );
    // The device's usage grew by exactly this pod.
    let before = match want_device {
        DEVICE1 => Usage {
            used: 1,
            usedmem: 2000,
            usedcores: 25,
        },
        DEVICE4 => Usage {
            used: 1,
            usedmem: 6000,
            usedcores: 75,
        },
        _ => Usage::default(),
    };
    assert_eq!(
        state.gpu_usage(want_device),
        Usage {
            used: before.used + 1,
            usedmem: before.usedmem + 1000,
            usedcores: before.usedcores + 20,
        },
        "{case}: usage of {want_device}"
    );
}

const WORKED_CASES: [(&str, &str, &str, &str); 4] = [
    ("binpack", "binpack", "node2", DEVICE4),
    ("spread", "spread", "node1", DEVICE2),
    ("binpack", "spread", "node2", DEVICE3),
    ("spread", "binpack", "node1", DEVICE1),
];

fn opposite(policy: &str) -> &'static str {
    if policy == "binpack" {
        "spread"
    } else {
        "binpack"
    }
}

#[tokio::test]
async fn worked_example_policies_from_flags() {
    for (node_policy, gpu_policy, want_node, want_device) in WORKED_CASES {
        let server = worked_example_server(&[
            "--node-scheduler-policy",
            node_policy,
            "--gpu-scheduler-policy",
            gpu_policy,
        ])
        .await;
        let pod = worked_example_pod(&format!("flags-{node_policy}-{gpu_policy}"), &[]);
        let case = format!("flags {node_policy}/{gpu_policy}");
        check_worked_example(&server, &pod, want_node, want_device, &case).await;
    }
}

#[tokio::test]
async fn worked_example_pod_annotations_override_flags() {
    for (node_policy, gpu_policy, want_node, want_device) in WORKED_CASES {
        // The flags say the opposite; the pod's annotations must win.
        let server = worked_example_server(&[
            "--node-scheduler-policy",
            opposite(node_policy),
            "--gpu-scheduler-policy",
            opposite(gpu_policy),
        ])
        .await;
        let pod = worked_example_pod(
            &format!("annotated-{node_policy}-{gpu_policy}"),
            &[
                ("hami.io/node-scheduler-policy", node_policy),
                ("hami.io/gpu-scheduler-policy", gpu_policy),
            ],
        );
        let case = format!("annotations {node_policy}/{gpu_policy}");
        check_worked_example(&server, &pod, want_node, want_device, &case).await;
    }
}

#[tokio::test]
async fn worked_example_default_policies_are_binpack_nodes_spread_gpus() {
    // HAMi's defaults: --node-scheduler-policy binpack, --gpu-scheduler-policy spread.
    let server = worked_example_server(&[]).await;
    let pod = worked_example_pod("defaults", &[]);
    check_worked_example(&server, &pod, "node2", DEVICE3, "defaults").await;
}

// ---------------------------------------------------------------------------
// Failure reasons
// ---------------------------------------------------------------------------

fn one_gpu_node(name: &str, extra: &[(&str, &str)]) -> Value {
    node(name, &[h100(&gpu_uuid(name, 0), 0)], extra)
}

fn holder(name: &str, node: &str, gpu: &str, mem: u64, cores: u32) -> Value {
    pod("default", name)
        .gpus(1, mem, cores)
        .holding(node, &format!("{gpu},NVIDIA,{mem},{cores}:;"))
        .build()
}

fn reasons_cluster() -> Vec<Value> {
    let g = |n: &str| gpu_uuid(n, 0);
    vec![
        one_gpu_node("plain", &[]),
        one_gpu_node("mem-full", &[]),
        one_gpu_node("core-full", &[]),
        holder("core-holder", "core-full", &g("core-full"), 1000, 80),
        node("slices-full", &[h100(&g("slices-full"), 0).count(1)], &[]),
        holder("slice-holder", "slices-full", &g("slices-full"), 1000, 10),
        one_gpu_node("shared", &[]),
        holder("shared-holder", "shared", &g("shared"), 1000, 0),
        one_gpu_node("compute-full", &[]),
        holder(
            "compute-holder",
            "compute-full",
            &g("compute-full"),
            1000,
            100,
        ),
        node("sick", &[h100(&g("sick"), 0).unhealthy()], &[]),
        one_gpu_node("cordoned", &[("hami.io/device-cordon", &g("cordoned"))]),
        node(
            "two-numa",
            &[
                h100(&gpu_uuid("two-numa", 0), 0).numa(0),
                h100(&gpu_uuid("two-numa", 1), 1).numa(1),
            ],
            &[],
        ),
        node(
            "mixed",
            &[
                h100(&g("mixed"), 0).unhealthy(),
                h100(&gpu_uuid("mixed", 1), 1),
                h100(&gpu_uuid("mixed", 2), 2)
                    .devmem(4000)
                    .model("NVIDIA T400 4GB"),
            ],
            &[("hami.io/device-cordon", &gpu_uuid("mixed", 1))],
        ),
        node(
            "half-sick",
            &[
                h100(&g("half-sick"), 0).unhealthy(),
                h100(&gpu_uuid("half-sick", 1), 1),
            ],
            &[],
        ),
        raw_node("cpu-only", json!({}), 0),
        raw_node(
            "garbage",
            json!({"hami.io/node-nvidia-register": "[{\"id\":\"GPU-0\",\"count\":"}),
            1,
        ),
        quota(
            "capped",
            "gpu-quota",
            &[
                ("limits.nvidia.com/gpumem", "4000"),
                ("limits.nvidia.com/gpucores", "300"),
            ],
        ),
    ]
}

#[tokio::test]
async fn every_failure_reason_reaches_failed_nodes() {
    let server = Server::start(reasons_cluster(), &[]).await;
    let plain_gpu = gpu_uuid("plain", 0);
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "CardInsufficientMemory",
            pod("default", "too-much-memory").gpus(1, 90000, 0).build(),
            "mem-full",
            "1/1 CardInsufficientMemory",
        ),
        (
            "CardInsufficientCore",
            pod("default", "too-many-cores").gpus(1, 1000, 30).build(),
            "core-full",
            "1/1 CardInsufficientCore",
        ),
        (
            "CardTimeSlicingExhausted",
            pod("default", "no-slice-left").gpus(1, 1000, 10).build(),
            "slices-full",
            "1/1 CardTimeSlicingExhausted",
        ),
        (
            "ExclusiveDeviceAllocateConflict",
            pod("default", "wants-whole-card")
                .gpus(1, 1000, 100)
                .build(),
            "shared",
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        (
            "CardComputeUnitsExhausted",
            pod("default", "no-compute-left").gpus(1, 1000, 0).build(),
            "compute-full",
            "1/1 CardComputeUnitsExhausted",
        ),
        (
            "CardTypeMismatch",
            pod("default", "wants-a100")
                .annotation("nvidia.com/use-gputype", "A100")
                .gpus(1, 1000, 10)
                .build(),
            "plain",
            "1/1 CardTypeMismatch",
        ),
        (
            "CardUuidMismatch",
            pod("default", "avoids-the-card")
                .annotation("nvidia.com/nouse-gpuuuid", &plain_gpu)
                .gpus(1, 1000, 10)
                .build(),
            "plain",
            "1/1 CardUuidMismatch",
        ),
        (
            "CardNotHealth",
            pod("default", "on-sick-card").gpus(1, 1000, 10).build(),
            "sick",
            "1/1 CardNotHealth",
        ),
        (
            "CardCordoned",
            pod("default", "on-cordoned-card").gpus(1, 1000, 10).build(),
            "cordoned",
            "1/1 CardCordoned",
        ),
        (
            "NumaNotFit",
            pod("default", "numa-bound")
                .annotation("nvidia.com/numa-bind", "true")
                .gpus(2, 1000, 10)
                .build(),
            "two-numa",
            "1/2 AllocatedCardsInsufficientRequest, 1/2 NumaNotFit",
        ),
        (
            "NodeInsufficientDevice",
            pod("default", "two-gpus").gpus(2, 1000, 10).build(),
            "plain",
            "NodeInsufficientDevice",
        ),
        (
            "ResourceQuotaNotFit",
            pod("capped", "over-quota").gpus(1, 5000, 10).build(),
            "plain",
            "1/1 ResourceQuotaNotFit",
        ),
        (
            "several reasons on one node",
            pod("default", "mixed-bag").gpus(1, 8000, 10).build(),
            "mixed",
            "1/3 CardCordoned, 1/3 CardInsufficientMemory, 1/3 CardNotHealth",
        ),
        (
            "AllocatedCardsInsufficientRequest",
            pod("default", "needs-both").gpus(2, 1000, 10).build(),
            "half-sick",
            "1/2 AllocatedCardsInsufficientRequest, 1/2 CardNotHealth",
        ),
        (
            "node unregistered (no annotation)",
            pod("default", "on-cpu-node").gpus(1, 1000, 10).build(),
            "cpu-only",
            "node unregistered",
        ),
        (
            "node unregistered (unknown node)",
            pod("default", "on-ghost-node").gpus(1, 1000, 10).build(),
            "ghost",
            "node unregistered",
        ),
    ];
    for (case, p, node_name, reason) in &cases {
        let answer = server.filter(p, &[node_name]).await;
        let failed = expect_rejected(&answer);
        assert_eq!(
            Value::Object(failed),
            json!({ *node_name: reason }),
            "{case}: FailedNodes"
        );
    }
    // Nothing was reserved by the rejections: only the four holders are tracked.
    let state = server.state().await;
    assert_eq!(state.pods().len(), 4, "only pre-existing pods: {}", state.0);
    for (_, p, _, _) in &cases {
        assert!(
            state.has_event(pod_name(p), "FilteringFailed"),
            "FilteringFailed event for {}",
            pod_name(p)
        );
    }

    // Several failing nodes in one call: all reported, HTTP 200, no NodeNames.
    let big = pod("default", "fits-nowhere").gpus(1, 90000, 0).build();
    let answer = server
        .filter(&big, &["mem-full", "cpu-only", "ghost", "sick"])
        .await;
    let failed = expect_rejected(&answer);
    assert_eq!(
        Value::Object(failed),
        json!({
            "mem-full": "1/1 CardInsufficientMemory",
            "cpu-only": "node unregistered",
            "ghost": "node unregistered",
            "sick": "1/1 CardNotHealth",
        })
    );
}

#[tokio::test]
async fn namespace_quota_counts_reservations_and_refilters() {
    let server = Server::start(
        vec![
            one_gpu_node("plain", &[]),
            quota(
                "capped",
                "gpu-quota",
                &[("limits.nvidia.com/gpumem", "4000")],
            ),
        ],
        &[],
    )
    .await;
    let a = pod("capped", "first").gpus(1, 3000, 10).build();
    let b = pod("capped", "second").gpus(1, 2000, 10).build();
    assert_eq!(
        server.filter(&a, &["plain"]).await,
        json!({"NodeNames": ["plain"]})
    );
    let failed = expect_rejected(&server.filter(&b, &["plain"]).await);
    assert_eq!(
        Value::Object(failed),
        json!({"plain": "1/1 ResourceQuotaNotFit"}),
        "3000 + 2000 MiB exceeds the 4000 MiB quota"
    );
    // The first pod is filtered again with a smaller request (same UID): its old
    // reservation is replaced, which makes room for the second pod.
    let smaller = pod("capped", "first").gpus(1, 1000, 10).build();
    assert_eq!(pod_uid(&smaller), pod_uid(&a));
    assert_eq!(
        server.filter(&smaller, &["plain"]).await,
        json!({"NodeNames": ["plain"]})
    );
    assert_eq!(
        server.filter(&b, &["plain"]).await,
        json!({"NodeNames": ["plain"]})
    );
    let state = server.state().await;
    assert_eq!(
        state.gpu_usage(&gpu_uuid("plain", 0)),
        Usage {
            used: 2,
            usedmem: 3000,
            usedcores: 20
        }
    );
    let quotas = &state.0["quotas"];
    assert_eq!(quotas[0]["namespace"], "capped", "{quotas}");
    assert_eq!(quotas[0]["usedMemory"], 3000, "{quotas}");
}

#[tokio::test]
async fn garbage_register_annotation_is_reported_and_other_nodes_still_schedule() {
    let server = Server::start(reasons_cluster(), &[]).await;
    let state = server.state().await;
    let garbage = state.node("garbage");
    assert!(
        garbage["registrationError"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "registration error shown: {garbage}"
    );
    assert_eq!(garbage["gpus"], json!([]));

    let p = pod("default", "lands-on-plain").gpus(1, 1000, 10).build();
    let answer = server.filter(&p, &["garbage"]).await;
    let failed = expect_rejected(&answer);
    assert!(
        failed["garbage"].as_str().is_some_and(|r| !r.is_empty()),
        "garbage node has a reason: {answer}"
    );

    let answer = server.filter(&p, &["garbage", "plain"]).await;
    assert_eq!(answer, json!({"NodeNames": ["plain"]}));
    let state = server.state().await;
    assert_eq!(state.expect_pod(pod_uid(&p))["node"], "plain");
}

#[tokio::test]
async fn a_garbage_pair_score_annotation_disables_that_node_only() {
    let server = Server::start(
        vec![
            one_gpu_node("bad-scores", &[("hami.io/node-nvidia-score", "{not json")]),
            one_gpu_node("plain", &[]),
        ],
        &[],
    )
    .await;
    let state = server.state().await;
    let bad = state.node("bad-scores");
    assert!(
        bad["registrationError"]
            .as_str()
            .is_some_and(|e| e.contains("hami.io/node-nvidia-score")),
        "the reason names the annotation: {bad}"
    );
    let p = pod("default", "avoids-bad-scores")
        .gpus(1, 1000, 10)
        .build();
    let answer = server.filter(&p, &["bad-scores", "plain"]).await;
    assert_eq!(answer, json!({"NodeNames": ["plain"]}));
}

// ---------------------------------------------------------------------------
// Requests that are not ours, malformed requests, quantities
// ---------------------------------------------------------------------------

#[tokio::test]
async fn pods_without_vgpu_pass_through_untouched() {
    let server = Server::start(vec![one_gpu_node("plain", &[])], &[]).await;
    let cpu_pod = pod("default", "web")
        .container(container("nginx", &[("cpu", "2"), ("memory", "1Gi")]))
        .build();
    let names = ["plain", "ghost", "cpu-only"];
    let answer = server.filter(&cpu_pod, &names).await;
    assert_eq!(answer, json!({"NodeNames": names}));
    // A GPU count of 0 and a gpumem without a count ask for no GPU either.
    let zero = pod("default", "zero-gpus")
        .container(container(
            "c",
            &[("nvidia.com/gpu", "0"), ("nvidia.com/gpumem", "1000")],
        ))
        .build();
    assert_eq!(
        server.filter(&zero, &names).await,
        json!({"NodeNames": names})
    );
    let state = server.state().await;
    assert!(state.pods().is_empty(), "nothing tracked: {}", state.0);
    assert_eq!(state.gpu_usage(&gpu_uuid("plain", 0)), Usage::default());
}

/// Every extender verb answers its errors the same way: HTTP 200, JSON, a
/// non-empty `Error`.
#[tokio::test]
async fn malformed_and_incomplete_requests_answer_200_with_an_error() {
    let server = Server::start(vec![one_gpu_node("plain", &[])], &[]).await;

    for (verb, body) in [
        (
            "/filter",
            json!({"Pod": null, "Nodes": null, "NodeNames": ["plain"]}),
        ),
        ("/filter", json!({"NodeNames": ["plain"]})),
        ("/prioritize", json!({"NodeNames": ["plain"]})),
    ] {
        let (status, answer) = server.post_json(verb, &body).await;
        assert_eq!(status, 200, "{verb}");
        assert_eq!(
            answer,
            json!({"Error": "extender args missing pod"}),
            "{verb}"
        );
    }

    for verb in ["/filter", "/prioritize", "/bind"] {
        for body in ["{\"Pod\":", "not json at all", "[1,2,3]", ""] {
            let (status, text) = server.post_raw(verb, body).await;
            assert_eq!(status, 200, "{verb} {body:?}: {text}");
            let answer: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{verb} {body:?} answers JSON ({e}): {text}"));
            assert!(
                answer["Error"].as_str().is_some_and(|e| !e.is_empty()),
                "{verb} {body:?}: non-empty Error in {answer}"
            );
            assert!(answer.get("NodeNames").is_none(), "{answer}");
        }
    }

    // An invalid quantity names the container and the resource.
    let bad = pod("default", "bad-quantity")
        .container(container(
            "trainer",
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "lots")],
        ))
        .build();
    let answer = server.filter(&bad, &["plain"]).await;
    let error = answer["Error"].as_str().unwrap_or_default();
    assert!(
        error.contains("trainer") && error.contains("nvidia.com/gpumem"),
        "error names container and resource: {answer}"
    );
    assert!(answer.get("NodeNames").is_none(), "{answer}");

    // Neither NodeNames nor Nodes: no crash, nothing fits, no failed nodes.
    let ok = pod("default", "no-candidates").gpus(1, 1000, 10).build();
    for body in [
        json!({"Pod": ok}),
        json!({"Pod": ok, "Nodes": null, "NodeNames": null}),
    ] {
        let (status, answer) = server.post_json("/filter", &body).await;
        assert_eq!(status, 200, "{answer}");
        assert!(
            answer
                .get("FailedNodes")
                .is_none_or(|f| f.as_object().is_some_and(|m| m.is_empty())),
            "FailedNodes empty: {answer}"
        );
        assert!(
            answer.get("NodeNames").is_none_or(|n| n == &json!([])),
            "no node chosen: {answer}"
        );
    }
    let state = server.state().await;
    assert!(state.pods().is_empty(), "nothing tracked: {}", state.0);
}

/// `/filter` and the webhook check vGPU quantities the same way: a memory
/// percentage of 0 or less is refused by both instead of booking a whole card
/// at `/filter`.
#[tokio::test]
async fn a_memory_percentage_below_1_is_refused_by_filter_and_webhook_alike() {
    let server = Server::start(vec![one_gpu_node("plain", &[])], &[]).await;
    for pct in ["0", "-1", "101"] {
        let p = pod("default", &format!("pct-{}", pct.replace('-', "minus")))
            .container(container(
                "trainer",
                &[
                    ("nvidia.com/gpu", "1"),
                    ("nvidia.com/gpumem-percentage", pct),
                ],
            ))
            .build();
        let answer = server.filter(&p, &["plain"]).await;
        let error = answer["Error"].as_str().unwrap_or_default();
        assert!(
            error.contains("trainer") && error.contains("between 1 and 100"),
            "{pct}: /filter answers an error: {answer}"
        );
        let (status, review) = server.post_json("/mutate", &admission_review_for(&p)).await;
        assert_eq!(status, 200);
        assert_eq!(review["response"]["allowed"], false, "{pct}: {review}");
        assert_eq!(
            review["response"]["status"]["message"].as_str(),
            Some(error),
            "{pct}: the same message at admission"
        );
    }
    let state = server.state().await;
    assert!(state.pods().is_empty(), "nothing booked: {}", state.0);
    assert_eq!(state.gpu_usage(&gpu_uuid("plain", 0)), Usage::default());
}

#[tokio::test]
async fn binary_quantities_are_converted_to_mib() {
    let server = Server::start(vec![one_gpu_node("plain", &[])], &[]).await;
    let p = pod("default", "sixteen-gib")
        .container(container(
            "c",
            &[
                ("nvidia.com/gpu", "1"),
                ("nvidia.com/gpumem", "16Gi"),
                ("nvidia.com/gpucores", "30"),
            ],
        ))
        .build();
    assert_eq!(
        server.filter(&p, &["plain"]).await,
        json!({"NodeNames": ["plain"]})
    );
    let state = server.state().await;
    let gpu = gpu_uuid("plain", 0);
    assert_eq!(
        encode_devices(state.expect_pod(pod_uid(&p))),
        format!("{gpu},NVIDIA,16384,30:;")
    );
    assert_eq!(
        state.gpu_usage(&gpu),
        Usage {
            used: 1,
            usedmem: 16384,
            usedcores: 30
        }
    );
}

#[tokio::test]
async fn lowercase_keys_as_hami_tests_send_them_are_accepted() {
    let server = Server::start(
        vec![one_gpu_node("plain", &[]), one_gpu_node("other", &[])],
        &[],
    )
    .await;
    let p = pod("default", "lowercase").gpus(1, 1000, 10).build();
    let (status, answer) = server
        .post_json("/filter", &json!({"pod": p, "nodenames": ["plain"]}))
        .await;
    assert_eq!(status, 200);
    // Answers are always PascalCase.
    assert_eq!(answer, json!({"NodeNames": ["plain"]}));
    let answer = server
        .bind_args(&json!({
            "podName": "lowercase", "podNamespace": "default",
            "podUID": pod_uid(&p), "node": "plain",
        }))
        .await;
    assert_eq!(answer, json!({}));

    let q = pod("default", "all-lowercase").gpus(1, 1000, 10).build();
    let (status, answer) = server
        .post_json(
            "/filter",
            &json!({"pod": q, "nodes": null, "nodenames": ["other"]}),
        )
        .await;
    assert_eq!((status, answer), (200, json!({"NodeNames": ["other"]})));
    let answer = server
        .bind_args(&json!({
            "podname": "all-lowercase", "podnamespace": "default",
            "poduid": pod_uid(&q), "node": "other",
        }))
        .await;
    assert_eq!(answer, json!({}));

    let state = server.state().await;
    assert_eq!(state.expect_pod(pod_uid(&p))["phase"], "Bound");
    assert_eq!(state.expect_pod(pod_uid(&q))["phase"], "Bound");
    assert_eq!(state.expect_pod(pod_uid(&q))["node"], "other");
}

// ---------------------------------------------------------------------------
// Multi-container and init-container pods
// ---------------------------------------------------------------------------

#[tokio::test]
async fn one_annotation_entry_per_container_and_collapsed_usage() {
    let server = Server::start(
        vec![
            one_gpu_node("solo-a", &[]),
            one_gpu_node("solo-b", &[]),
            one_gpu_node("solo-c", &[]),
        ],
        &[],
    )
    .await;
    let (a, b, c) = (
        gpu_uuid("solo-a", 0),
        gpu_uuid("solo-b", 0),
        gpu_uuid("solo-c", 0),
    );

    // [init GPU, no GPU, GPU]: init runs alone, so usage is max(init, app sum).
    let p1 = pod("default", "init-then-app")
        .init_container(gpu_container("warmup", 1, 3000, 30))
        .container(container("sidecar", &[("cpu", "100m")]))
        .container(gpu_container("main", 1, 1000, 10))
        .build();
    assert_eq!(
        server.filter(&p1, &["solo-a"]).await,
        json!({"NodeNames": ["solo-a"]})
    );

    // [init GPU, GPU, GPU]: two app containers share the card and add up.
    let p2 = pod("default", "init-and-two-apps")
        .init_container(gpu_container("prepare", 1, 1000, 10))
        .container(gpu_container("trainer", 1, 2000, 20))
        .container(gpu_container("evaluator", 1, 2500, 5))
        .build();
    assert_eq!(
        server.filter(&p2, &["solo-b"]).await,
        json!({"NodeNames": ["solo-b"]})
    );

    // [no GPU, GPU, no GPU]: empty containers keep their place.
    let p3 = pod("default", "gpu-in-the-middle")
        .container(container("proxy", &[("cpu", "100m")]))
        .container(gpu_container("model", 1, 1000, 30))
        .container(container("logger", &[("cpu", "100m")]))
        .build();
    assert_eq!(
        server.filter(&p3, &["solo-c"]).await,
        json!({"NodeNames": ["solo-c"]})
    );

    let state = server.state().await;
    let s1 = state.expect_pod(pod_uid(&p1));
    assert_eq!(
        encode_devices(s1),
        format!("{a},NVIDIA,3000,30:;;{a},NVIDIA,1000,10:;")
    );
    assert_eq!(
        state.gpu_usage(&a),
        Usage {
            used: 1,
            usedmem: 3000,
            usedcores: 30
        }
    );
    assert_eq!(collapse(&s1["devices"], 1)[&a], state.gpu_usage(&a));

    let s2 = state.expect_pod(pod_uid(&p2));
    assert_eq!(
        encode_devices(s2),
        format!("{b},NVIDIA,1000,10:;{b},NVIDIA,2000,20:;{b},NVIDIA,2500,5:;")
    );
    assert_eq!(
        state.gpu_usage(&b),
        Usage {
            used: 2,
            usedmem: 4500,
            usedcores: 25
        }
    );
    assert_eq!(collapse(&s2["devices"], 1)[&b], state.gpu_usage(&b));

    let s3 = state.expect_pod(pod_uid(&p3));
    assert_eq!(encode_devices(s3), format!(";{c},NVIDIA,1000,30:;;"));
    assert_eq!(
        state.gpu_usage(&c),
        Usage {
            used: 1,
            usedmem: 1000,
            usedcores: 30
        }
    );
}

#[tokio::test]
async fn init_container_larger_than_the_node_rejects_the_node() {
    let server = Server::start(vec![one_gpu_node("solo", &[])], &[]).await;
    let p = pod("default", "huge-init")
        .init_container(gpu_container("download", 1, 90000, 0))
        .container(gpu_container("main", 1, 1000, 10))
        .build();
    let answer = server.filter(&p, &["solo"]).await;
    let failed = expect_rejected(&answer);
    assert_eq!(
        Value::Object(failed),
        json!({"solo": "1/1 CardInsufficientMemory"})
    );
}

// ---------------------------------------------------------------------------
// Full-Nodes mode
// ---------------------------------------------------------------------------

#[tokio::test]
async fn full_nodes_mode_answers_with_the_chosen_node_object() {
    let mut big = one_gpu_node("full-big", &[]);
    let small = node(
        "full-small",
        &[h100(&gpu_uuid("full-small", 0), 0)
            .devmem(4000)
            .model("NVIDIA T400 4GB")],
        &[],
    );
    let server = Server::start(vec![big.clone(), small.clone()], &[]).await;
    // What kube-scheduler's cache holds beyond what scheduling reads comes back too.
    big["status"]["images"] = json!([{"names": ["registry.local/trainer:1"], "sizeBytes": 1}]);
    big["status"]["nodeInfo"] = json!({"kubeletVersion": "v1.33.1"});
    big["spec"]["podCIDR"] = json!("10.1.0.0/24");
    let p = pod("default", "full-nodes").gpus(1, 8000, 10).build();
    let body = json!({
        "Pod": p,
        "Nodes": {"metadata": {}, "items": [small, big]},
        "NodeNames": null,
    });
    let (status, answer) = server.post_json("/filter", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("NodeNames").is_none(), "no NodeNames: {answer}");
    let items = answer["Nodes"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("Nodes.items in {answer}"));
    assert_eq!(items.len(), 1, "{answer}");
    assert_eq!(items[0]["metadata"]["name"], "full-big");
    assert_eq!(items[0], big, "the node object is returned whole");
    assert!(answer.get("Error").is_none(), "{answer}");
}

/// The Node objects of a full-Nodes request are candidates: a newer version may
/// take capacity away, but never adds any, and an older one changes nothing.
#[tokio::test]
async fn full_nodes_mode_never_raises_capacity_or_rolls_back_a_newer_node() {
    let with_gpu = |mem: u64, count: u32, version: &str, healthy: bool| {
        let mut gpu = h100(&gpu_uuid("grow", 0), 0).devmem(mem).count(count);
        if !healthy {
            gpu = gpu.unhealthy();
        }
        let mut n = node("grow", &[gpu], &[]);
        n["metadata"]["resourceVersion"] = json!(version);
        n
    };
    let server = Server::start(vec![with_gpu(24000, 10, "10", true)], &[]).await;
    let filter = |p: &Value, n: &Value| {
        let body = json!({"Pod": p, "Nodes": {"items": [n]}, "NodeNames": null});
        let server = &server;
        async move { server.post_json("/filter", &body).await.1 }
    };
    // A request claiming a bigger card (and more slots) than the cluster registered
    // books nothing beyond the registered 24000 MiB.
    let p = pod("default", "needs-30g").gpus(1, 30000, 10).build();
    let answer = filter(&p, &with_gpu(120_000, 60, "11", true)).await;
    assert!(answer["FailedNodes"]["grow"].is_string(), "{answer}");
    let gpu = server.state().await.node("grow")["gpus"][0].clone();
    assert_eq!(
        (gpu["devmem"].as_u64(), gpu["count"].as_u64()),
        (Some(24000), Some(10))
    );

    // A newer version that shrinks the card is taken.
    let answer = filter(&p, &with_gpu(6000, 10, "12", false)).await;
    assert!(answer["FailedNodes"]["grow"].is_string(), "{answer}");
    let gpu = server.state().await.node("grow")["gpus"][0].clone();
    assert_eq!(
        (gpu["devmem"].as_u64(), gpu["health"].as_bool()),
        (Some(6000), Some(false))
    );

    // An older copy (a stale kube-scheduler cache) does not roll it back.
    let small = pod("default", "needs-1g").gpus(1, 1000, 10).build();
    let answer = filter(&small, &with_gpu(24000, 10, "11", true)).await;
    assert!(answer["FailedNodes"]["grow"].is_string(), "{answer}");
    let gpu = server.state().await.node("grow")["gpus"][0].clone();
    assert_eq!(
        (gpu["devmem"].as_u64(), gpu["health"].as_bool()),
        (Some(6000), Some(false))
    );
}

/// A node the cluster does not have (a Cluster Autoscaler template node) is fitted
/// on its own registration and answered without side effects: nothing reserved,
/// no annotation, and the node is not remembered.
#[tokio::test]
async fn full_nodes_mode_answers_unknown_nodes_without_side_effects() {
    let server = Server::start(vec![one_gpu_node("real", &[])], &[]).await;
    let mut template = one_gpu_node("template-1", &[]);
    template["metadata"]["resourceVersion"] = json!("1");
    let p = pod("default", "scale-up").gpus(1, 8000, 10).build();
    let body = json!({"Pod": p, "Nodes": {"items": [template]}, "NodeNames": null});
    let (status, answer) = server.post_json("/filter", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["Nodes"]["items"][0]["metadata"]["name"], "template-1",
        "the pod would fit the template: {answer}"
    );
    let too_big = pod("default", "too-big").gpus(1, 900_000, 10).build();
    let body = json!({"Pod": too_big, "Nodes": {"items": [template]}, "NodeNames": null});
    let answer = server.post_json("/filter", &body).await.1;
    assert!(answer["FailedNodes"]["template-1"].is_string(), "{answer}");

    let state = server.state().await;
    assert!(state.pods().is_empty(), "nothing reserved: {}", state.0);
    assert_eq!(
        state.node_names(),
        vec!["real"],
        "the template is not remembered"
    );
    assert!(state.events().is_empty(), "no events: {:?}", state.events());
}

// ---------------------------------------------------------------------------
// --filter-mode all and /prioritize
// ---------------------------------------------------------------------------

#[tokio::test]
async fn filter_mode_all_returns_every_fitting_node_and_prioritize_scores_them() {
    let busy_gpus = [h100(&gpu_uuid("busy", 0), 0), h100(&gpu_uuid("busy", 1), 1)];
    let idle_gpus = [h100(&gpu_uuid("idle", 0), 0), h100(&gpu_uuid("idle", 1), 1)];
    let cluster = vec![
        node("busy", &busy_gpus, &[]),
        node("idle", &idle_gpus, &[]),
        node(
            "tiny",
            &[h100(&gpu_uuid("tiny", 0), 0)
                .devmem(4000)
                .model("NVIDIA T400 4GB")],
            &[],
        ),
        holder("busy-holder", "busy", &gpu_uuid("busy", 0), 40000, 50),
    ];
    let server = Server::start(cluster, &["--filter-mode", "all"]).await;
    let p = pod("default", "all-mode").gpus(1, 8000, 10).build();
    let candidates = ["busy", "idle", "tiny", "ghost"];

    let answer = server.filter(&p, &candidates).await;
    let mut fitting: Vec<String> = answer["NodeNames"]
        .as_array()
        .unwrap_or_else(|| panic!("NodeNames in {answer}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect();
    fitting.sort();
    assert_eq!(fitting, vec!["busy", "idle"], "{answer}");
    assert_eq!(
        answer["FailedNodes"],
        json!({"tiny": "1/1 CardInsufficientMemory", "ghost": "node unregistered"})
    );
    let state = server.state().await;
    assert!(
        state.pod(pod_uid(&p)).is_none(),
        "filter-mode all reserves nothing: {}",
        state.0
    );

    let scores = |answer: &Value| -> std::collections::BTreeMap<String, i64> {
        answer
            .as_array()
            .unwrap_or_else(|| panic!("prioritize answers an array: {answer}"))
            .iter()
            .map(|h| {
                let host = h["Host"].as_str().expect("Host").to_string();
                let score = h["Score"].as_i64().expect("Score");
                assert!((0..=10).contains(&score), "score in 0..=10: {h}");
                (host, score)
            })
            .collect()
    };
    let fits = ["busy", "idle", "tiny"];
    let (status, answer) = server
        .post_json("/prioritize", &filter_args(&p, &fits))
        .await;
    assert_eq!(status, 200, "{answer}");
    let binpack = scores(&answer);
    assert_eq!(binpack.len(), 3, "{answer}");
    assert!(
        binpack["busy"] > binpack["idle"],
        "binpack prefers the fuller node: {answer}"
    );
    assert_eq!(binpack["tiny"], 0, "a node that does not fit scores 0");

    let spread_pod = pod("default", "all-mode-spread")
        .annotation("hami.io/node-scheduler-policy", "spread")
        .gpus(1, 8000, 10)
        .build();
    let (status, answer) = server
        .post_json("/prioritize", &filter_args(&spread_pod, &fits))
        .await;
    assert_eq!(status, 200, "{answer}");
    let spread = scores(&answer);
    assert!(
        spread["idle"] > spread["busy"],
        "spread prefers the emptier node: {answer}"
    );
    assert_eq!(spread["idle"], 10, "{answer}");

    // kube-scheduler picks a node; /bind places the GPUs there.
    assert_eq!(server.bind(&p, "idle").await, json!({}));
    let state = server.state().await;
    let bound = state.expect_pod(pod_uid(&p));
    assert_eq!(bound["node"], "idle");
    assert_eq!(bound["phase"], "Bound");
    let devices = encode_devices(bound);
    let on_idle = idle_gpus
        .iter()
        .find(|g| devices.starts_with(&g.id))
        .unwrap_or_else(|| panic!("devices on an idle GPU: {devices}"));
    assert_eq!(devices, format!("{},NVIDIA,8000,10:;", on_idle.id));
    assert_eq!(
        state.gpu_usage(&on_idle.id),
        Usage {
            used: 1,
            usedmem: 8000,
            usedcores: 10
        }
    );
}

// ---------------------------------------------------------------------------
// Client certificates
// ---------------------------------------------------------------------------

#[tokio::test]
async fn extender_verbs_require_a_client_certificate_when_a_client_ca_is_set() {
    let ca = new_ca("vgpu-test-ca");
    let serving = issue(&ca, "vgpu-scheduler", ExtendedKeyUsagePurpose::ServerAuth);
    let server = Server::start_with(ServerOptions {
        cluster: vec![one_gpu_node("plain", &[])],
        tls: Some(CustomTls {
            root_pem: ca.pem(),
            cert_pem: serving.cert_pem.clone(),
            key_pem: serving.key_pem.clone(),
            client_ca_pem: Some(ca.pem()),
        }),
        ..Default::default()
    })
    .await;
    let p = pod("default", "mtls").gpus(1, 1000, 10).build();

    // No client certificate: the extender verbs are refused, the rest stays open.
    let resp = server
        .client
        .post(server.url("/filter"))
        .json(&filter_args(&p, &["plain"]))
        .send()
        .await
        .expect("filter without client cert");
    assert_eq!(resp.status().as_u16(), 401);
    let resp = server
        .client
        .post(server.url("/bind"))
        .json(&bind_args("default", "mtls", pod_uid(&p), "plain"))
        .send()
        .await
        .expect("bind without client cert");
    assert_eq!(resp.status().as_u16(), 401);
    assert_eq!(server.get("/healthz").await.0, 200);
    let (status, _) = server
        .post_raw("/mutate", admission_review_for(&p).to_string())
        .await;
    assert_eq!(status, 200, "/mutate stays open without a client cert");
    assert_eq!(
        server.get("/debug/state").await.0,
        401,
        "the debug dump is guarded like the extender verbs"
    );

    // A client certificate from the configured CA is accepted.
    let kube_scheduler = issue(&ca, "kube-scheduler", ExtendedKeyUsagePurpose::ClientAuth);
    let identity = kube_scheduler.identity_pem();
    let trusted = https_client(&server.root_pem, Some(&identity));
    let state: Value = trusted
        .get(server.url("/debug/state"))
        .send()
        .await
        .expect("debug state with client cert")
        .json()
        .await
        .expect("debug state is JSON");
    assert!(
        State(state).pods().is_empty(),
        "the refused filter did nothing"
    );
    let resp = trusted
        .post(server.url("/filter"))
        .json(&filter_args(&p, &["plain"]))
        .send()
        .await
        .expect("filter with client cert");
    assert_eq!(resp.status().as_u16(), 200);
    let answer: Value = resp.json().await.expect("JSON answer");
    assert_eq!(answer, json!({"NodeNames": ["plain"]}));

    // A certificate from another CA is not good enough.
    let other_ca = new_ca("someone-else");
    let stranger = issue(&other_ca, "stranger", ExtendedKeyUsagePurpose::ClientAuth);
    let identity = stranger.identity_pem();
    let untrusted = https_client(&server.root_pem, Some(&identity));
    let outcome = untrusted
        .post(server.url("/filter"))
        .json(&filter_args(&p, &["plain"]))
        .send()
        .await;
    if let Ok(resp) = outcome {
        assert_ne!(
            resp.status().as_u16(),
            200,
            "a certificate from an unknown CA must not pass"
        );
    }
}

// ---------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------

fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn metrics_expose_gpu_gauges_and_request_latency() {
    let server = worked_example_server(&[]).await;
    let p = worked_example_pod("metered", &[]);
    assert_eq!(
        server.filter(&p, &["node1", "node2"]).await,
        json!({"NodeNames": ["node2"]})
    );
    let (status, text) = server.get("/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        metric_value(
            &text,
            "hami_gpu_memory_limit_bytes",
            &[("node", "node1"), ("device_uuid", DEVICE1)]
        ),
        Some(8000.0 * 1_048_576.0),
        "{text}"
    );
    assert_eq!(
        metric_value(
            &text,
            "hami_gpu_shared_count",
            &[("node", "node2"), ("device_uuid", DEVICE3)]
        ),
        Some(1.0),
        "the filtered pod holds a slot of device3: {text}"
    );
    assert_eq!(
        metric_value(
            &text,
            "hami_gpu_shared_count",
            &[("node", "node2"), ("device_uuid", DEVICE4)]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric_value(
            &text,
            "hami_gpu_shared_count",
            &[("node", "node1"), ("device_uuid", DEVICE2)]
        ),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        metric_value(
            &text,
            "hami_node_gpu_overview",
            &[
                ("node", "node2"),
                ("device_uuid", DEVICE4),
                ("device_memory_limit", "8000")
            ]
        ),
        Some(6000.0 * 1_048_576.0),
        "{text}"
    );
    assert!(text.contains("hami_build_info{"), "{text}");
    let count = metric_value(
        &text,
        "vgpu_scheduler_request_duration_seconds_count",
        &[("verb", "filter")],
    );
    assert_eq!(count, Some(1.0), "{text}");
}

#[tokio::test]
async fn unknown_policy_values_fall_back_like_hami_and_bad_weights_are_errors() {
    // Annotations that name no policy are ignored: the configured spread (node) and
    // binpack (GPU) apply, as in HAMi (policy_fallback_placement_test.go), not the
    // comparators' own fallbacks (binpack for nodes, spread for GPUs).
    let server = worked_example_server(&[
        "--node-scheduler-policy",
        "spread",
        "--gpu-scheduler-policy",
        "binpack",
    ])
    .await;
    let p = worked_example_pod(
        "odd-policies",
        &[
            ("hami.io/node-scheduler-policy", "bogus"),
            ("hami.io/gpu-scheduler-policy", "bogus"),
        ],
    );
    check_worked_example(&server, &p, "node1", DEVICE1, "unknown policies").await;

    for weights in ["slot=1,core=x,memory=1", "slot=0,core=0,memory=0", "slot=1"] {
        let p = worked_example_pod(
            "bad-weights",
            &[("hami.io/device-scoring-weights", weights)],
        );
        let answer = server.filter(&p, &["node1", "node2"]).await;
        let error = answer["Error"].as_str().unwrap_or_default();
        assert!(
            error.contains("hami.io/device-scoring-weights"),
            "{weights}: error names the annotation: {answer}"
        );
        assert!(answer.get("NodeNames").is_none(), "{answer}");
    }
    let state = server.state().await;
    assert!(state.pod(&uid_for("pod/default/bad-weights")).is_none());
}

// ---------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------

/// A pod name is the client's text: one with a newline must not start a log line
/// that reads like one of the server's own.
#[tokio::test]
async fn a_pod_name_with_a_newline_cannot_forge_a_log_line() {
    let server = Server::start(vec![one_gpu_node("plain", &[])], &[]).await;
    let forged = "ERROR vgpu_scheduler: node lock lost on every node";
    let mut p = pod("default", "trainer").gpus(1, 1000, 10).build();
    p["metadata"]["name"] = json!(format!("trainer\n{forged}"));
    assert_eq!(chosen_node(&server.filter(&p, &["plain"]).await), "plain");
    let log = wait_for_log(&server, "reserved GPUs").await;
    assert!(
        log.lines().all(|line| !line.starts_with(forged)),
        "a line of its own:\n{log}"
    );
    assert!(log.contains(r"trainer\nERROR"), "escaped in place:\n{log}");
}

/// The server's log once a line containing `text` was written (lines are written
/// out within 200 ms).
async fn wait_for_log(server: &Server, text: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = server.log();
        if log.contains(text) {
            return log;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {text:?} in the log:\n{log}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------
// Which claims the ledger books
// ---------------------------------------------------------------------------

/// A tenant's pod that names this scheduler, opted out of the webhook by its own
/// label and pinned to the node, but asks for no vGPU: its forged placement is
/// never booked (no device plugin hands it a GPU), so a real pod still fits.
#[tokio::test]
async fn a_forged_placement_on_a_pod_asking_for_no_vgpu_is_not_booked() {
    let gpu = gpu_uuid("gpu-a", 0);
    let mut forged = pod("team-a", "forger")
        .label("vgpu.io/webhook", "ignore")
        .container(container("web", &[("cpu", "1")]))
        .node_name("gpu-a")
        .holding("gpu-a", &format!("{gpu},NVIDIA,81559,100:;"))
        .build();
    forged["spec"]["schedulerName"] = json!("vgpu-scheduler");
    let server = Server::start(vec![one_gpu_node("gpu-a", &[]), forged], &[]).await;
    let state = server.state().await;
    assert!(state.pods().is_empty(), "{}", state.0);
    let conflicts = state.0["conflicts"].as_array().cloned().unwrap_or_default();
    assert_eq!(conflicts.len(), 1, "{}", state.0);
    assert_eq!(conflicts[0]["name"], "forger");
    assert_eq!(conflicts[0]["booked"], false);
    let real = pod("team-a", "real").gpus(1, 40000, 0).build();
    let answer = server.filter(&real, &["gpu-a"]).await;
    assert_eq!(answer["NodeNames"], json!(["gpu-a"]), "{answer}");
}

/// The ledger books device annotations only for pods this scheduler places (or
/// HAMi placed before a migration), and never beyond a GPU's capacity: a claim
/// beyond it is reported instead.
#[tokio::test]
async fn only_our_pods_claims_within_capacity_are_booked() {
    let gpu = gpu_uuid("gpu-a", 0);
    let claim = |mem: u64| format!("{gpu},NVIDIA,{mem},10:;");
    let mut forged = pod("default", "cpu-forger")
        .container(container("web", &[("cpu", "1")]))
        .holding("gpu-a", &claim(30000))
        .build();
    forged["spec"]["schedulerName"] = json!("default-scheduler");
    let mut migrated = pod("default", "from-hami")
        .gpus(1, 20000, 10)
        .holding("gpu-a", &claim(20000))
        .build();
    migrated["spec"]["schedulerName"] = json!("hami-scheduler");
    let ours = pod("default", "ours")
        .gpus(1, 30000, 10)
        .holding("gpu-a", &claim(30000))
        .build();
    let greedy = pod("default", "greedy")
        .gpus(1, 60000, 10)
        .holding("gpu-a", &claim(60000))
        .build();
    let server = Server::start(
        vec![one_gpu_node("gpu-a", &[]), forged, migrated, ours, greedy],
        &[],
    )
    .await;
    let state = server.state().await;
    let booked: Vec<&str> = state
        .pods()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(booked, vec!["from-hami", "ours"], "{}", state.0);
    let usage = state.gpu_usage(&gpu);
    assert_eq!((usage.used, usage.usedmem), (2, 50000), "{}", state.0);
    let conflicts = state.0["conflicts"].as_array().cloned().unwrap_or_default();
    assert_eq!(conflicts.len(), 1, "{}", state.0);
    assert_eq!(conflicts[0]["name"], "greedy");
    assert!(
        conflicts[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("MiB of memory")),
        "{conflicts:?}"
    );
    let (_, metrics) = server.get("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "vgpu_scheduler_claim_conflicts_total 1"),
        "{metrics}"
    );
    // The pod's owner hears of it: the event is sent apart from the load.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server
        .state()
        .await
        .has_event("greedy", "AllocationConflict")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no AllocationConflict event"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
