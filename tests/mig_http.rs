//! MIG through the real binary in cluster-file mode: pods on MIG GPUs get
//! instances at placements that never overlap, and `/filter` says why when none is
//! left; pods of the cluster file keep the slices their reservations name; a MIG
//! registration that cannot be used disables its node only; a malformed
//! `migProfileAllowlist` stops the start.

mod support;

use serde_json::{Value, json};
use support::*;

const NS: &str = "ml";

fn mig_node(name: &str, gpus: u32) -> Value {
    let devices: Vec<Gpu> = (0..gpus).map(|i| h100_mig(&gpu_uuid(name, i), i)).collect();
    node(name, &devices, &[])
}

/// A MIG pod: `n` instances of at least `mem` MiB in one container.
fn mig_pod(name: &str, n: u32, mem: u64) -> Value {
    let mem = mem.to_string();
    let n = n.to_string();
    pod(NS, name)
        .annotation("nvidia.com/vgpu-mode", "mig")
        .container(container(
            "infer",
            &[("nvidia.com/gpu", &n), ("nvidia.com/gpumem", &mem)],
        ))
        .build()
}

/// The `mig` view of GPU `id` in `/debug/state`.
fn mig_of<'a>(state: &'a State, id: &str) -> &'a Value {
    state.0["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .flat_map(|n| n["gpus"].as_array().expect("gpus"))
        .find(|g| g["id"] == id)
        .map(|g| &g["mig"])
        .unwrap_or_else(|| panic!("GPU {id} not in /debug/state"))
}

/// `(pod, profile, start, size)` of every instance on GPU `id`.
fn instances(state: &State, id: &str) -> Vec<(String, String, u64, u64)> {
    mig_of(state, id)["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .map(|i| {
            (
                i["pod"].as_str().unwrap_or_default().to_string(),
                i["profile"].as_str().unwrap_or_default().to_string(),
                i["placement"]["start"].as_u64().unwrap_or(99),
                i["placement"]["size"].as_u64().unwrap_or(99),
            )
        })
        .collect()
}

fn slices_held(state: &State, id: &str) -> Vec<u64> {
    mig_of(state, id)["slicesHeld"]
        .as_array()
        .expect("slicesHeld")
        .iter()
        .map(|v| v.as_u64().unwrap_or(99))
        .collect()
}

#[tokio::test]
async fn mig_pods_get_instances_that_never_overlap_and_failures_say_why() {
    let gpu = gpu_uuid("gpu-mig", 0);
    let server = Server::start(vec![mig_node("gpu-mig", 1)], &[]).await;
    let placed = |answer: Value| assert_eq!(answer, json!({"NodeNames": ["gpu-mig"]}));

    // The smallest profile with enough memory: a 1g from the top slice down, a
    // 2g from the bottom up.
    placed(
        server
            .filter(&mig_pod("small", 1, 9000), &["gpu-mig"])
            .await,
    );
    placed(server.filter(&mig_pod("mid", 1, 15000), &["gpu-mig"]).await);
    // 40000 MiB needs a 3g: both of its placements overlap held slices, though
    // the GPU has more than 50000 MiB free.
    let large = mig_pod("large", 1, 40000);
    let answer = server.filter(&large, &["gpu-mig"]).await;
    assert_eq!(
        answer["FailedNodes"],
        json!({"gpu-mig": "1/1 CardMigTopologyInfeasible"}),
        "{answer}"
    );
    // Two instances for one container, from one GPU.
    let pair = mig_pod("pair", 2, 9000);
    placed(server.filter(&pair, &["gpu-mig"]).await);
    assert_eq!(server.bind(&pair, "gpu-mig").await, json!({}));

    let state = server.state().await;
    assert_eq!(
        instances(&state, &gpu),
        vec![
            ("ml/mid".into(), "2g.20gb".into(), 0, 2),
            ("ml/pair".into(), "1g.10gb".into(), 5, 1),
            ("ml/pair".into(), "1g.10gb".into(), 4, 1),
            ("ml/small".into(), "1g.10gb".into(), 6, 1),
        ]
    );
    assert_eq!(slices_held(&state, &gpu), vec![1, 1, 0, 0, 1, 1, 1, 0]);
    // Instances book their profiles' memory and compute.
    assert_eq!(
        state.gpu_usage(&gpu),
        Usage {
            used: 4,
            usedmem: 3 * 9856 + 19968,
            usedcores: 3 * 14 + 28
        }
    );
    let bound = state.expect_pod(pod_uid(&pair));
    assert_eq!(bound["phase"], "Bound");
    assert_eq!(
        encode_devices(bound),
        format!("{gpu},NVIDIA,9856,14:{gpu},NVIDIA,9856,14:;")
    );
}

#[tokio::test]
async fn pods_of_the_cluster_file_keep_their_slices() {
    let (gpu0, gpu1) = (gpu_uuid("gpu-mig", 0), gpu_uuid("gpu-mig", 1));
    let reservation = format!(
        r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{gpu0}","profile":"3g.40gb","placement":{{"start":4,"size":4}},"migUUID":"MIG-0b3d5f7a-9c1e-5a2b-8d4f-6e8a0c2e4a6b","gpuInstanceID":2,"computeInstanceID":0}}]"#
    );
    let placed = pod(NS, "placed")
        .container(container("infer", &[("nvidia.com/gpu", "1")]))
        .holding("gpu-mig", &format!("{gpu0},NVIDIA,40192,42:;"))
        .annotation("hami.io/vgpu-mig-allocations", &reservation)
        .build();
    // Holds a MIG GPU but names no instance: its slices are unknown.
    let unknown = pod(NS, "unknown")
        .container(container("infer", &[("nvidia.com/gpu", "1")]))
        .holding("gpu-mig", &format!("{gpu1},NVIDIA,9856,14:;"))
        .build();
    let server = Server::start(vec![mig_node("gpu-mig", 2), placed, unknown], &[]).await;

    let state = server.state().await;
    assert_eq!(slices_held(&state, &gpu0), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    let restored = &mig_of(&state, &gpu0)["instances"][0];
    assert_eq!(
        restored["migUUID"],
        "MIG-0b3d5f7a-9c1e-5a2b-8d4f-6e8a0c2e4a6b"
    );
    assert_eq!(restored["gpuInstanceID"], 2);
    assert_eq!(mig_of(&state, &gpu1)["wholeGpuHolds"], 1);
    let conflicts = state.0["conflicts"].as_array().expect("conflicts");
    assert_eq!(conflicts.len(), 1, "{}", state.0);
    assert_eq!(conflicts[0]["name"], "unknown");
    assert_eq!(conflicts[0]["booked"], true);

    // Another 3g goes below the restored one; nothing goes to the GPU kept whole.
    let next = mig_pod("next", 1, 40000);
    assert_eq!(
        server.filter(&next, &["gpu-mig"]).await,
        json!({"NodeNames": ["gpu-mig"]})
    );
    let state = server.state().await;
    assert_eq!(
        instances(&state, &gpu0)
            .into_iter()
            .map(|(pod, _, start, size)| (pod, start, size))
            .collect::<Vec<_>>(),
        vec![("ml/next".into(), 0, 4), ("ml/placed".into(), 4, 4)]
    );
    let full = mig_pod("full", 1, 9000);
    let answer = server.filter(&full, &["gpu-mig"]).await;
    assert_eq!(
        answer["FailedNodes"],
        json!({"gpu-mig": "1/2 CardInsufficientMemory, 1/2 CardMigTopologyInfeasible"}),
        "{answer}"
    );
}

#[tokio::test]
async fn an_unusable_mig_registration_disables_its_node_only() {
    let mut bad = h100_mig(&gpu_uuid("gpu-bad", 0), 0);
    bad.mig_profiles = Some(json!([{"name": "1g.10gb", "memoryMB": 9856, "core": 14,
        "sliceCount": 1, "placements": [{"start": 7, "size": 4}]}]));
    let server = Server::start(
        vec![node("gpu-bad", &[bad], &[]), mig_node("gpu-mig", 1)],
        &[],
    )
    .await;
    let state = server.state().await;
    let error = state.node("gpu-bad")["registrationError"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("invalid MIG profile \"1g.10gb\""), "{error}");
    let p = mig_pod("infer", 1, 9000);
    let answer = server.filter(&p, &["gpu-bad"]).await;
    assert_eq!(
        answer["FailedNodes"],
        json!({"gpu-bad": "node GPU registration invalid"})
    );
    assert_eq!(
        server.filter(&p, &["gpu-bad", "gpu-mig"]).await,
        json!({"NodeNames": ["gpu-mig"]})
    );
}

#[tokio::test]
async fn filter_mode_all_places_mig_instances_at_bind() {
    let gpu = gpu_uuid("gpu-mig", 0);
    let server = Server::start(vec![mig_node("gpu-mig", 1)], &["--filter-mode", "all"]).await;
    let p = mig_pod("infer", 1, 18000);
    assert_eq!(
        server.filter(&p, &["gpu-mig"]).await["NodeNames"],
        json!(["gpu-mig"])
    );
    assert_eq!(server.bind(&p, "gpu-mig").await, json!({}));
    let state = server.state().await;
    assert_eq!(
        instances(&state, &gpu),
        vec![("ml/infer".into(), "2g.20gb".into(), 0, 2)]
    );
}

#[test]
fn a_malformed_mig_allowlist_stops_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("device-config.yaml");
    std::fs::write(
        &config,
        "nvidia:\n  migProfileAllowlist:\n    - models: [\"A100-SXM4-40GB\"]\n      profiles: [\"1g\"]\n",
    )
    .expect("write config");
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, cluster_text(&[mig_node("gpu-mig", 1)])).expect("write cluster");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .args(["serve", "--cluster-file"])
        .arg(&cluster)
        .arg("--device-config-file")
        .arg(&config)
        .arg("--http-bind")
        .arg("127.0.0.1:0")
        .arg("--self-signed-dir")
        .arg(dir.path().join("tls"))
        .output()
        .expect("run vgpu-scheduler");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nvidia.migProfileAllowlist: invalid MIG profile \"1g\""),
        "{stderr}"
    );
}

/// `docs/mig.md` opens with this run over `examples/mig/cluster.yaml`.
#[tokio::test]
async fn the_documented_example_answers_as_documented() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mig/cluster.yaml"),
    )
    .expect("read the example");
    let server = Server::start_with(ServerOptions {
        cluster_text: Some(text.clone()),
        ..Default::default()
    })
    .await;
    let request = json!({
        "Pod": {"metadata": {"name": "chat-1", "namespace": "inference", "uid": "u-2",
                             "annotations": {"nvidia.com/vgpu-mode": "mig"}},
                "spec": {"containers": [{"name": "server", "resources": {"limits":
                   {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}}}]}},
        "NodeNames": ["gpu-h200-mig"]});
    let (status, answer) = server.post_json("/filter", &request).await;
    assert_eq!(status, 200);
    assert_eq!(answer, json!({"NodeNames": ["gpu-h200-mig"]}));
    let state = server.state().await;
    let first = "GPU-3a1f6c2e-8b4d-5e9f-a0c1-d2e3f4a5b6c7";
    let second = "GPU-9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
    assert_eq!(slices_held(&state, first), vec![0, 0, 0, 0, 0, 0, 1, 0]);
    assert_eq!(
        instances(&state, first),
        vec![("inference/chat-0".into(), "1g.18gb".into(), 6, 1)]
    );
    assert_eq!(slices_held(&state, second), vec![1, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        instances(&state, second),
        vec![("inference/chat-1".into(), "2g.35gb".into(), 0, 2)]
    );
    // "With binpack the pod would have gone next to chat-0."
    let fresh = Server::start_with(ServerOptions {
        cluster_text: Some(text),
        ..Default::default()
    })
    .await;
    let mut binpack = request.clone();
    binpack["Pod"]["metadata"]["annotations"]["hami.io/gpu-scheduler-policy"] = json!("binpack");
    let (_, answer) = fresh.post_json("/filter", &binpack).await;
    assert_eq!(answer, json!({"NodeNames": ["gpu-h200-mig"]}));
    assert_eq!(
        instances(&fresh.state().await, first),
        vec![
            ("inference/chat-0".into(), "1g.18gb".into(), 6, 1),
            ("inference/chat-1".into(), "2g.35gb".into(), 0, 2),
        ]
    );
}
