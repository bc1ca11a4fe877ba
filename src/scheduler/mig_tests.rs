//! MIG through the scheduler: the reservation `/filter` writes, and the usage
//! rebuilt from pods' annotations after a restart. The reconstruction cases are
//! HAMi's `pkg/scheduler/mig_test.go` (`TestGetNodesUsage*`) as facts, with this
//! scheduler's answer where HAMi marks the GPU unhealthy: the pod is reported and
//! its GPU kept whole for it, so nothing is double-booked and the GPU comes back
//! when the pod leaves.

use super::{Scheduler, SchedulerConfig};
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::device::mig::{MigHold, MigPlacement, MigSlices};
use crate::extender::wire::{ExtenderArgs, ExtenderBindingArgs};
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use std::sync::Arc;

const GPU_A: &str = "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc";
const GPU_B: &str = "GPU-5c1bd0a6-1f1e-6c3b-9b1a-2f6d7e0c4a11";

/// An H100 in MIG mode as HAMi's device plugin registers it.
fn h100_mig(uuid: &str, index: u32) -> serde_json::Value {
    let one_slice: Vec<serde_json::Value> =
        (0..7).map(|s| json!({"start": s, "size": 1})).collect();
    json!({"id": uuid, "index": index, "count": 7, "devmem": 81559, "devcore": 100,
        "type": "NVIDIA H100 80GB HBM3", "health": true, "mode": "mig",
        "migProfiles": [
            {"name": "1g.10gb", "memoryMB": 9856, "core": 14, "sliceCount": 1, "placements": one_slice},
            {"name": "2g.20gb", "memoryMB": 19968, "core": 28, "sliceCount": 2,
             "placements": [{"start": 0, "size": 2}, {"start": 2, "size": 2}, {"start": 4, "size": 2}]},
            {"name": "3g.40gb", "memoryMB": 40192, "core": 42, "sliceCount": 3,
             "placements": [{"start": 0, "size": 4}, {"start": 4, "size": 4}]},
            {"name": "7g.80gb", "memoryMB": 80896, "core": 100, "sliceCount": 7,
             "placements": [{"start": 0, "size": 8}]}]})
}

fn node(name: &str, gpus: Vec<serde_json::Value>) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": {
        "hami.io/node-nvidia-register": serde_json::Value::Array(gpus).to_string()}}}))
    .expect("node")
}

fn mig_node() -> Node {
    node("gpu-mig", vec![h100_mig(GPU_A, 0)])
}

/// A pod asking for `gpus` GPUs of `mem` MiB each, placed by HAMi's scheduler
/// when `annotations` say so.
fn pod(name: &str, gpus: u32, mem: u64, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                     "annotations": annotations},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string()}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("pod")
}

/// A running pod holding what `devices` and `mig` say on `gpu-mig`.
fn holding(name: &str, devices: &str, mig: Option<&str>) -> Pod {
    let mut annotations = json!({"hami.io/vgpu-node": "gpu-mig",
        "hami.io/vgpu-devices-allocated": devices});
    if let Some(mig) = mig {
        annotations["hami.io/vgpu-mig-allocations"] = json!(mig);
    }
    let mut p = pod(name, 1, 9000, annotations);
    p.spec.as_mut().expect("spec").node_name = Some("gpu-mig".into());
    p
}

fn build(nodes: Vec<Node>, pods: Vec<Pod>) -> (Scheduler, Arc<MemoryCluster>) {
    let memory = Arc::new(MemoryCluster::new(nodes.clone(), pods.clone(), true));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let s = Scheduler::new(SchedulerConfig::default(), api, Arc::new(Metrics::new()));
    s.load(&ClusterObjects {
        nodes,
        pods,
        ..Default::default()
    });
    (s, memory)
}

async fn filter(s: &Scheduler, p: &Pod) -> Result<String, String> {
    let r = s
        .filter(ExtenderArgs {
            pod: Some(p.clone()),
            nodes: None,
            node_names: Some(["gpu-mig".to_string()].as_slice().into()),
        })
        .await;
    if !r.error.is_empty() {
        return Err(r.error);
    }
    match r.node_names.and_then(|n| n.first().cloned()) {
        Some(node) => Ok(node),
        None => Err(r
            .failed_nodes
            .values()
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")),
    }
}

fn slices(s: &Scheduler, gpu: usize) -> MigSlices {
    s.with_ledger(|l| l.node("gpu-mig").expect("registered").usage[gpu].mig)
}

fn p(start: u32, size: u32) -> MigPlacement {
    MigPlacement { start, size }
}

fn slices_of(placements: &[MigPlacement]) -> MigSlices {
    let mut s = MigSlices::default();
    for at in placements {
        s.add(&MigSlices::of(at));
    }
    s
}

/// `/bind` of a pod `/filter` placed on `node`; the bind writes the placement.
async fn bind(s: &Scheduler, p: &Pod, node: &str) {
    let answer = s
        .bind(ExtenderBindingArgs {
            pod_name: p.metadata.name.clone(),
            pod_namespace: p.metadata.namespace.clone(),
            pod_uid: p.metadata.uid.clone(),
            node: Some(node.into()),
        })
        .await;
    assert!(answer.error.is_empty(), "{}", answer.error);
}

#[tokio::test]
async fn bind_writes_the_mig_reservation_next_to_the_device_lists() {
    let first = pod("infer", 1, 9000, json!({}));
    let (s, memory) = build(vec![mig_node()], vec![first.clone()]);
    assert_eq!(filter(&s, &first).await, Ok("gpu-mig".into()));
    bind(&s, &first, "gpu-mig").await;
    let stored = memory.get_pod("ml", "infer").await.unwrap().unwrap();
    let a = stored.metadata.annotations.unwrap();
    assert_eq!(
        a["hami.io/vgpu-devices-allocated"],
        format!("{GPU_A},NVIDIA,9856,14:;")
    );
    assert_eq!(
        a["hami.io/vgpu-mig-allocations"],
        format!(
            r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{GPU_A}","profile":"1g.10gb","placement":{{"start":6,"size":1}}}}]"#
        )
    );
    // A pod asking for more than a 1g gets the next profile up, elsewhere on the GPU.
    let second = pod("train", 1, 15000, json!({}));
    memory.insert_pod(&second);
    assert_eq!(filter(&s, &second).await, Ok("gpu-mig".into()));
    bind(&s, &second, "gpu-mig").await;
    let stored = memory.get_pod("ml", "train").await.unwrap().unwrap();
    assert!(
        stored.metadata.annotations.unwrap()["hami.io/vgpu-mig-allocations"]
            .contains(r#""profile":"2g.20gb","placement":{"start":0,"size":2}"#)
    );
    assert_eq!(slices(&s, 0), slices_of(&[p(6, 1), p(0, 2)]));
}

#[tokio::test]
async fn a_restart_restores_occupied_placements_and_runtime_ids() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| pod(&format!("p{i}"), 1, 9000, json!({})))
        .collect();
    let (before, memory) = build(vec![mig_node()], pods.clone());
    for p in &pods {
        assert_eq!(filter(&before, p).await, Ok("gpu-mig".into()));
        bind(&before, p, "gpu-mig").await;
    }
    let mut stored = Vec::new();
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap();
        stored.push(memory.get_pod("ml", name).await.unwrap().unwrap());
    }
    // The device plugin created the first instance and wrote its identity.
    let a = stored[0].metadata.annotations.as_mut().unwrap();
    let with_runtime = a["hami.io/vgpu-mig-allocations"].replace(
        "}}]",
        r#"},"migUUID":"MIG-1b7c3a8e-5f2d-5a8b-9c1e-3d4f5a6b7c8d","gpuInstanceID":13,"computeInstanceID":0}]"#,
    );
    a.insert("hami.io/vgpu-mig-allocations".into(), with_runtime);

    let (after, _) = build(vec![mig_node()], stored);
    assert_eq!(slices(&after, 0), slices(&before, 0));
    assert_eq!(slices(&after, 0), slices_of(&[p(6, 1), p(5, 1), p(4, 1)]));
    let usage = |s: &Scheduler| s.with_ledger(|l| l.node("gpu-mig").unwrap().usage.clone());
    assert_eq!(usage(&after), usage(&before));
    let runtime =
        after.with_ledger(
            |l| match l.pod("uid-p0").unwrap().devices[0][0].mig.as_deref() {
                Some(MigHold::Instance { runtime, .. }) => runtime.clone(),
                other => panic!("{other:?}"),
            },
        );
    assert_eq!(runtime.map(|r| r.gpu_instance_id), Some(13));
    // The next pod gets the next free slice, not one of the restored ones.
    let next = pod("p3", 1, 9000, json!({}));
    assert_eq!(filter(&after, &next).await, Ok("gpu-mig".into()));
    assert_eq!(
        slices(&after, 0),
        slices_of(&[p(6, 1), p(5, 1), p(4, 1), p(3, 1)])
    );
}

/// `TestGetNodesUsageRestoresMigAllocationByProfileAndPlacement`.
#[test]
fn a_reservation_is_booked_with_its_profile_and_placement() {
    let held = holding(
        "held",
        &format!("{GPU_A},NVIDIA,9856,14:;"),
        Some(&format!(
            r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{GPU_A}","profile":"1g.10gb","placement":{{"start":6,"size":1}},"migUUID":"MIG-a","gpuInstanceID":7,"computeInstanceID":0}}]"#
        )),
    );
    let (s, _) = build(vec![mig_node()], vec![held]);
    assert_eq!(slices(&s, 0), slices_of(&[p(6, 1)]));
    let u = s.with_ledger(|l| l.node("gpu-mig").unwrap().usage[0]);
    assert_eq!((u.used, u.usedmem, u.usedcores), (1, 9856, 14));
    assert!(s.claims.list().is_empty());
}

/// `TestGetNodesUsageFailsClosedWithoutMigAllocation`: HAMi marks the GPU
/// unhealthy; here the pod is reported and holds the whole GPU until it leaves.
#[tokio::test]
async fn a_mig_device_without_a_reservation_is_reported_and_kept_whole() {
    let held = holding("unplaced", &format!("{GPU_A},NVIDIA,9856,14:;"), None);
    let (s, memory) = build(vec![mig_node()], vec![held]);
    let conflicts = s.claims.list();
    assert_eq!(conflicts.len(), 1);
    assert!(conflicts[0].booked);
    assert!(
        conflicts[0].reason.contains("no MIG instance is reserved"),
        "{}",
        conflicts[0].reason
    );
    let next = pod("next", 1, 9000, json!({}));
    memory.insert_pod(&next);
    assert_eq!(
        filter(&s, &next).await,
        Err("1/1 CardMigTopologyInfeasible".into())
    );
    s.forget_pod("uid-unplaced");
    assert_eq!(filter(&s, &next).await, Ok("gpu-mig".into()));
}

/// `TestGetNodesUsageRestoresUnconsumedMigReservations`: a reservation with no
/// device of its own still holds its slice.
#[test]
fn reservations_without_a_device_still_hold_their_slices() {
    let held = holding(
        "two",
        &format!("{GPU_A},NVIDIA,9856,14:;"),
        Some(&format!(
            r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{GPU_A}","profile":"1g.10gb","placement":{{"start":6,"size":1}}}},
                {{"containerIndex":0,"deviceIndex":1,"gpuUUID":"{GPU_A}","profile":"1g.10gb","placement":{{"start":5,"size":1}}}}]"#
        )),
    );
    let (s, _) = build(vec![mig_node()], vec![held]);
    assert!(s.claims.list().is_empty(), "every reservation was restored");
    assert_eq!(slices(&s, 0), slices_of(&[p(6, 1), p(5, 1)]));
}

/// HAMi marks a `hami-core` GPU with a MIG reservation unhealthy; here the
/// reservation has no slices to hold, so the device is booked as a shared one and
/// the pod reported.
#[test]
fn a_reservation_on_a_shared_gpu_is_booked_as_shared_and_reported() {
    let shared = json!({"id": GPU_B, "index": 0, "count": 10, "devmem": 81559, "devcore": 100,
        "type": "NVIDIA H100 80GB HBM3", "health": true, "mode": "hami-core"});
    let mut held = holding(
        "odd",
        &format!("{GPU_B},NVIDIA,9856,14:;"),
        Some(&format!(
            r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{GPU_B}","profile":"1g.10gb","placement":{{"start":6,"size":1}}}}]"#
        )),
    );
    held.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("hami.io/vgpu-node".into(), "gpu-mig".into());
    let (s, _) = build(vec![node("gpu-mig", vec![shared])], vec![held]);
    let u = s.with_ledger(|l| l.node("gpu-mig").unwrap().usage[0]);
    assert_eq!((u.used, u.usedmem, u.mig), (1, 9856, MigSlices::default()));
    let conflicts = s.claims.list();
    assert_eq!(conflicts.len(), 1);
    assert!(conflicts[0].booked && conflicts[0].reason.contains("not in MIG mode"));
}

/// Two pods claiming one slice: the second is a conflict and not booked.
#[test]
fn a_claim_on_a_held_slice_is_refused() {
    let reservation = |name: &str| {
        holding(
            name,
            &format!("{GPU_A},NVIDIA,19968,28:;"),
            Some(&format!(
                r#"[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{GPU_A}","profile":"2g.20gb","placement":{{"start":0,"size":2}}}}]"#
            )),
        )
    };
    let (s, _) = build(
        vec![mig_node()],
        vec![reservation("first"), reservation("second")],
    );
    let booked: Vec<String> = s.with_ledger(|l| {
        let mut names: Vec<String> = l.pods().map(|p| p.name.clone()).collect();
        names.sort();
        names
    });
    assert_eq!(booked.len(), 1, "{booked:?}");
    let conflicts = s.claims.list();
    assert_eq!(conflicts.len(), 1);
    assert!(!conflicts[0].booked);
    assert!(
        conflicts[0].reason.contains("MIG slice 0"),
        "{}",
        conflicts[0].reason
    );
    assert_eq!(slices(&s, 0), slices_of(&[p(0, 2)]));
}
