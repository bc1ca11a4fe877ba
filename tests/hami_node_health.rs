//! HAMi's test tables for turning a Node into usable GPUs, case by case:
//! `pkg/device/devices_test.go` (Test_CheckHealth), `pkg/device/nvidia/device_test.go`
//! (TestCheckHealth, Test_GetNodeDevices) and `TestFit_DeviceCordon`'s annotation.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};
use vgpu_scheduler::scheduler::registration::{
    NODE_HANDSHAKE, NODE_UNREGISTERED, device_plugin_ready, node_entry,
};

const REGISTER: &str = "hami.io/node-nvidia-register";
const ONE_GPU: &str = r#"[{"id":"dev-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA A100","health":true},{"id":"dev-1","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA A100","health":true,"index":1}]"#;

fn annotations(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

fn k8s_node(annotations: Value, allocatable_gpus: Option<&str>) -> Node {
    let mut node = json!({"metadata": {"name": "test-node", "annotations": annotations}});
    if let Some(n) = allocatable_gpus {
        node["status"] = json!({"allocatable": {"nvidia.com/gpu": n}});
    }
    serde_json::from_value(node).unwrap()
}

fn now() -> chrono::NaiveDateTime {
    chrono::NaiveDateTime::parse_from_str("2026-11-22 10:00:00", "%Y-%m-%d %H:%M:%S").unwrap()
}

#[test]
fn handshake_decides_device_plugin_liveness_like_hami() {
    for (case, handshake, allocatable, healthy) in [
        (
            "requesting, in the future",
            "Requesting_2128-12-02 00:00:00",
            None,
            true,
        ),
        ("requesting without timestamp", "Requesting", None, true),
        (
            "requesting with unparsable timestamp",
            "Requesting_not-a-timestamp",
            None,
            true,
        ),
        ("unknown state", "Unknown", None, true),
        (
            "requesting expired, no allocatable",
            "Requesting_2024-01-02 00:00:00",
            None,
            false,
        ),
        (
            "requesting expired, allocatable present",
            "Requesting_2024-01-02 00:00:00",
            Some("8"),
            true,
        ),
        // NVIDIA's kernel 6.17 rows: nothing allocatable, handshake just asked or stale.
        (
            "allocatable 0, handshake pending",
            "Requesting_2026-11-22 10:00:00",
            Some("0"),
            true,
        ),
        (
            "allocatable 0, handshake expired",
            "Requesting_2026-11-22 08:00:00",
            Some("0"),
            false,
        ),
    ] {
        let node = k8s_node(annotations(&[(NODE_HANDSHAKE, handshake)]), allocatable);
        assert_eq!(
            device_plugin_ready(&node, "nvidia.com/gpu", now()),
            healthy,
            "{case}"
        );
    }
}

#[test]
fn device_cordon_lists_trimmed_uuids() {
    let node = k8s_node(
        annotations(&[(REGISTER, ONE_GPU), ("hami.io/device-cordon", "dev-1, ")]),
        None,
    );
    let entry = node_entry(&node, None);
    assert_eq!(
        entry
            .cordoned
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        vec!["dev-1"]
    );
    let none = node_entry(&k8s_node(annotations(&[(REGISTER, ONE_GPU)]), None), None);
    assert!(none.cordoned.is_empty());
}

#[test]
fn nodes_without_gpus_are_not_registered() {
    let missing = node_entry(&k8s_node(annotations(&[]), None), None);
    assert_eq!(missing.unusable(), Some(NODE_UNREGISTERED));
    assert!(
        missing
            .registration_error
            .as_deref()
            .is_some_and(|e| e.contains(REGISTER)),
        "{:?}",
        missing.registration_error
    );
    let empty = node_entry(&k8s_node(annotations(&[(REGISTER, "[]")]), None), None);
    assert!(empty.devices.is_empty());
    assert!(
        empty
            .registration_error
            .as_deref()
            .is_some_and(|e| e.contains("no gpu found on node")),
        "{:?}",
        empty.registration_error
    );
    let ok = node_entry(&k8s_node(annotations(&[(REGISTER, ONE_GPU)]), None), None);
    assert_eq!(ok.devices.len(), 2);
    assert_eq!(ok.registration_error, None);
}
