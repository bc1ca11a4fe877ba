//! Which events the extender writes (`--placement-events`): by default a placed
//! pod costs no event of ours, a failure is recorded once however often
//! kube-scheduler retries the pod (whatever its message then says), and `none`
//! records no placement event at all.

mod support;

use serde_json::{Value, json};
use support::*;

fn cluster() -> Vec<Value> {
    vec![node("gpu-a", &[h100(&gpu_uuid("gpu-a", 0), 0)], &[])]
}

/// Events recorded about pod `name` with `reason`.
fn count(state: &State, name: &str, reason: &str) -> usize {
    state
        .events()
        .iter()
        .filter(|e| e["pod"] == name && e["reason"] == reason)
        .count()
}

/// A pod asking for more memory than any GPU has.
fn too_big() -> Value {
    pod("default", "too-big").gpus(1, 200_000, 10).build()
}

#[tokio::test]
async fn by_default_a_placed_pod_gets_no_event_and_a_failure_is_recorded_once() {
    let server = Server::start(cluster(), &[]).await;
    let placed = pod("default", "placed").gpus(1, 4000, 20).build();
    assert_eq!(
        server.filter(&placed, &["gpu-a"]).await,
        json!({"NodeNames": ["gpu-a"]})
    );
    assert_eq!(server.bind(&placed, "gpu-a").await, json!({}));

    // kube-scheduler retries an unschedulable pod again and again.
    for _ in 0..3 {
        let answer = server.filter(&too_big(), &["gpu-a"]).await;
        assert!(answer["FailedNodes"]["gpu-a"].is_string(), "{answer}");
    }
    let state = server.state().await;
    assert!(
        !state.events().iter().any(|e| e["pod"] == "placed"),
        "no event for a placed pod: {:?}",
        state.events()
    );
    assert_eq!(
        count(&state, "too-big", "FilteringFailed"),
        1,
        "{:?}",
        state.events()
    );
}

#[tokio::test]
async fn a_failure_is_one_event_per_pod_even_when_its_message_changes() {
    let mut nodes = cluster();
    nodes.push(node("gpu-b", &[h100(&gpu_uuid("gpu-b", 0), 0)], &[]));
    let server = Server::start(nodes, &[]).await;
    // The reasons name the nodes tried: another set of nodes, another message.
    for names in [&["gpu-a"][..], &["gpu-a", "gpu-b"], &["gpu-b"]] {
        let answer = server.filter(&too_big(), names).await;
        assert!(
            answer["FailedNodes"]["gpu-a"].is_string()
                || answer["FailedNodes"]["gpu-b"].is_string(),
            "{answer}"
        );
    }
    let state = server.state().await;
    assert_eq!(
        count(&state, "too-big", "FilteringFailed"),
        1,
        "{:?}",
        state.events()
    );
}

#[tokio::test]
async fn placement_events_none_records_no_failure_either() {
    let server = Server::start(cluster(), &["--placement-events", "none"]).await;
    let answer = server.filter(&too_big(), &["gpu-a"]).await;
    assert!(answer["FailedNodes"]["gpu-a"].is_string(), "{answer}");
    let state = server.state().await;
    assert_eq!(count(&state, "too-big", "FilteringFailed"), 0);
}

#[tokio::test]
async fn a_bad_placement_events_value_is_refused_with_the_choices() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .args(["serve", "--placement-events", "some"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("all") && err.contains("failures") && err.contains("none"),
        "{err}"
    );
}
