//! MIG in live mode, against the fake API server: `/filter` writes
//! `hami.io/vgpu-mig-allocations` next to the device lists, the device plugin's
//! runtime identity shows in `/debug/state` and `/metrics`, a re-filter onto a
//! shared GPU removes the reservation, and a restarted server rebuilds the same
//! slices from the pods alone and places the next instance beside them.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use serde_json::Value;
use std::time::Duration;

const NS: &str = "ml";
const RUNTIME: &str = r#""migUUID":"MIG-1b7c3a8e-5f2d-5a8b-9c1e-3d4f5a6b7c8d","gpuInstanceID":13,"computeInstanceID":0"#;

fn add_mig_node(api: &FakeApiServer, name: &str) {
    let mut n = support::node(name, &[support::h100_mig(&gpu_id(name, 0), 0)], &[]);
    n["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("uid");
    api.create(n);
}

/// A pending pod of one container asking for `n` GPUs of `mem` MiB, with extra
/// annotations.
fn mig_pod(name: &str, n: u32, mem: u64, annotations: &[(&str, &str)]) -> Value {
    let mut p = gpu_pod(NS, name, n, mem, 0);
    for (k, v) in annotations {
        p["metadata"]["annotations"][*k] = (*v).into();
    }
    p
}

/// `(pod, profile, start, migUUID)` of the instances on GPU `id`.
fn instances(state: &support::State, id: &str) -> Vec<(String, String, u64, Option<String>)> {
    state.0["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .flat_map(|n| n["gpus"].as_array().expect("gpus"))
        .filter(|g| g["id"] == id)
        .flat_map(|g| {
            g["mig"]["instances"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|i| {
            (
                i["pod"].as_str().unwrap_or_default().to_string(),
                i["profile"].as_str().unwrap_or_default().to_string(),
                i["placement"]["start"].as_u64().unwrap_or(99),
                i["migUUID"].as_str().map(str::to_string),
            )
        })
        .collect()
}

#[tokio::test]
async fn mig_reservations_are_written_realized_moved_and_rebuilt() {
    let api = FakeApiServer::start().await;
    add_mig_node(&api, "gpu-mig");
    add_node(&api, "gpu-plain", 1, 10);
    let gpu = gpu_id("gpu-mig", 0);
    let mut first = LiveServer::start(&api, &[]).await;

    create_pod(
        &api,
        mig_pod("infer", 1, 9000, &[("nvidia.com/vgpu-mode", "mig")]),
    );
    first
        .schedule(&api, NS, "infer", &["gpu-mig", "gpu-plain"])
        .await;
    let stored = api_pod(&api, NS, "infer");
    let reservation = format!(
        r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{gpu}","profile":"1g.10gb","placement":{{"start":6,"size":1}}}}]"#
    );
    assert_eq!(
        annotation(&stored, "hami.io/vgpu-mig-allocations"),
        Some(reservation.as_str())
    );
    let devices = format!("{gpu},NVIDIA,9856,14:;");
    assert_eq!(
        annotation(&stored, "hami.io/vgpu-devices-allocated"),
        Some(devices.as_str())
    );
    assert_eq!(
        annotation(&stored, "hami.io/vgpu-devices-to-allocate"),
        Some(devices.as_str())
    );

    // The device plugin creates the instance and writes its identity.
    let realized = reservation.replace("}}]", &format!("}},{RUNTIME}}}]"));
    set_annotations(
        &api,
        "Pod",
        Some(NS),
        "infer",
        &[("hami.io/vgpu-mig-allocations", Some(&realized))],
    );
    device_plugin_allocated(&api, NS, "infer");
    let (state, ok) = first
        .wait_state(Duration::from_secs(5), |s| {
            instances(s, &gpu).iter().any(|i| i.3.is_some())
        })
        .await;
    assert!(ok, "{}", state.0);
    let info = format!(
        r#"hami_node_gpu_mig_instance_info{{zone="vGPU",node="gpu-mig",device_uuid="{gpu}",device_index="0",mig_uuid="MIG-1b7c3a8e-5f2d-5a8b-9c1e-3d4f5a6b7c8d",profile="1g.10gb",gpu_instance_id="13",compute_instance_id="0",placement_start="6",placement_size="1"}}"#
    );
    assert_eq!(first.metric(&info).await, 1);

    // Filtered onto the MIG GPU, then again where only a shared GPU is offered:
    // the second placement removes the first one's reservation.
    create_pod(&api, mig_pod("moved", 1, 9000, &[]));
    assert_eq!(
        first.filter_one(&api, NS, "moved", &["gpu-mig"]).await,
        "gpu-mig"
    );
    let held_by_moved = |s: &support::State| instances(s, &gpu).iter().any(|i| i.0 == "ml/moved");
    assert!(
        held_by_moved(&first.state().await),
        "a MIG instance reserved"
    );
    assert_eq!(
        first.filter_one(&api, NS, "moved", &["gpu-plain"]).await,
        "gpu-plain"
    );
    let state = first.state().await;
    assert!(!held_by_moved(&state), "{}", state.0);
    let moved_uid = uid_of(&api_pod(&api, NS, "moved"));
    assert_eq!(first.bind(NS, "moved", &moved_uid, "gpu-plain").await, "");
    let moved = api_pod(&api, NS, "moved");
    assert_eq!(annotation(&moved, "hami.io/vgpu-mig-allocations"), None);
    assert_eq!(annotation(&moved, "hami.io/vgpu-node"), Some("gpu-plain"));

    // A restart rebuilds the same state from the pods alone.
    let (before, ok) = first
        .wait_state(Duration::from_secs(5), |s| {
            s.pods().len() == 2 && instances(s, &gpu).len() == 1
        })
        .await;
    assert!(ok, "{}", before.0);
    first.kill();
    let second = LiveServer::start(&api, &[]).await;
    let after = second.state().await;
    let (a, b) = (stable(&before), stable(&after));
    assert!(a == b, "after restart:\n{}", json_diff(&a, &b).join("\n"));
    assert_eq!(
        instances(&after, &gpu),
        vec![(
            "ml/infer".into(),
            "1g.10gb".into(),
            6,
            Some("MIG-1b7c3a8e-5f2d-5a8b-9c1e-3d4f5a6b7c8d".into())
        )]
    );
    create_pod(
        &api,
        mig_pod("next", 1, 9000, &[("nvidia.com/vgpu-mode", "mig")]),
    );
    second.schedule(&api, NS, "next", &["gpu-mig"]).await;
    assert!(
        annotation(&api_pod(&api, NS, "next"), "hami.io/vgpu-mig-allocations")
            .is_some_and(|v| v.contains(r#""placement":{"start":5,"size":1}"#))
    );
}
