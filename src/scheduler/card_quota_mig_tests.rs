//! Card quotas with MIG instances: each instance is one card of its MIG card type
//! (`<card type>/mig-<profile>-mixed`), matched to quota keys by the longest key as
//! whole cards are, and never counted against a whole-card key; a pod's
//! `volcano.sh/card.name` decides which card type it runs on and is charged to.

use super::GangConfig;
use super::gang_tests::{Cluster, podgroup, queue};
use crate::gang::book::GANG_GATE;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

const CAPACITY_CARD: &str = "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: proportion\n  - name: capacity-card\n";

/// A node with one H100 in MIG mode and one shared H100.
fn mixed_node(name: &str) -> Node {
    let one_slice: Vec<Value> = (0..7).map(|s| json!({"start": s, "size": 1})).collect();
    let devices = json!([
        {"id": format!("GPU-{name}-mig"), "count": 7, "devmem": 81559, "devcore": 100,
         "type": "NVIDIA H100 80GB HBM3", "health": true, "index": 0, "mode": "mig",
         "migProfiles": [
            {"name": "1g.10gb", "memoryMB": 9856, "core": 14, "sliceCount": 1, "placements": one_slice},
            {"name": "2g.20gb", "memoryMB": 19968, "core": 28, "sliceCount": 2,
             "placements": [{"start": 0, "size": 2}, {"start": 2, "size": 2}, {"start": 4, "size": 2}]}]},
        {"id": format!("GPU-{name}-whole"), "count": 1, "devmem": 81559, "devcore": 100,
         "type": "NVIDIA H100 80GB HBM3", "health": true, "index": 1, "mode": "hami-core"}
    ]);
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            "hami.io/node-nvidia-register": devices.to_string()}},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi"}}
    }))
    .unwrap()
}

/// A gated member of `group` asking for one GPU of `mem` MiB, with extra
/// annotations.
fn member(name: &str, group: &str, mem: u64, annotations: &[(&str, &str)]) -> Pod {
    let mut a = json!({"scheduling.k8s.io/group-name": group});
    for (k, v) in annotations {
        a[*k] = json!(v);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": a},
        "spec": {"schedulerName": "vgpu-scheduler",
            "schedulingGates": [{"name": GANG_GATE}],
            "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem.to_string()}}}]}
    }))
    .unwrap()
}

fn cluster(quota: &str) -> Cluster {
    let c = Cluster::from_nodes(vec![mixed_node("n1")], GangConfig::default());
    c.s.set_gang_conf(crate::volcano::SchedulerConf::parse(CAPACITY_CARD).unwrap());
    let mut q = queue("cards", json!({"weight": 1}));
    q["metadata"]["annotations"] = json!({"volcano.sh/card.quota": quota});
    c.s.apply_queue(&q);
    c
}

fn gang(c: &Cluster, group: &str, members: &[Pod]) {
    c.s.apply_podgroup(&podgroup(group, members.len() as u32, "cards", json!({})));
    for m in members {
        c.add(m);
    }
}

fn card_used(c: &Cluster) -> std::collections::BTreeMap<String, i64> {
    let view = c.s.gang_view();
    view.queues
        .iter()
        .find(|q| q.name == "cards")
        .map(|q| q.card_used.clone())
        .unwrap_or_default()
}

/// The instances a pod holds on node n1, as `(gpu, profile)`.
fn held_by(c: &Cluster, uid: &str) -> Vec<(String, Option<String>)> {
    c.s.with_ledger(|l| {
        l.pod(uid)
            .map(|p| {
                p.devices
                    .iter()
                    .flatten()
                    .map(|d| {
                        let profile = match d.mig.as_deref() {
                            Some(crate::device::mig::MigHold::Instance { profile, .. }) => {
                                Some(profile.clone())
                            }
                            _ => None,
                        };
                        (d.uuid.to_string(), profile)
                    })
                    .collect()
            })
            .unwrap_or_default()
    })
}

#[tokio::test]
async fn mig_instances_count_against_their_mig_key_only() {
    let c = cluster(r#"{"NVIDIA-H100/mig-1g.10gb-mixed": 2, "NVIDIA-H100": 1}"#);
    let mig = [("nvidia.com/vgpu-mode", "mig")];
    // Three 1g instances are over the MIG quota of two: the gang waits whole.
    gang(
        &c,
        "trio",
        &[
            member("t0", "trio", 9000, &mig),
            member("t1", "trio", 9000, &mig),
            member("t2", "trio", 9000, &mig),
        ],
    );
    assert_eq!(c.s.run_gang_cycle().await, 0);
    let message = c.verdict("ml/trio").message.unwrap_or_default();
    assert!(
        message.contains("card NVIDIA-H100/mig-1g.10gb-mixed would be 3 > quota 2"),
        "{message}"
    );
    assert_eq!(c.held(), 0);
    // Two fit; their instances are on the MIG GPU, counted under the MIG key
    // (the queue reports use per quota key).
    gang(
        &c,
        "duo",
        &[
            member("d0", "duo", 9000, &mig),
            member("d1", "duo", 9000, &mig),
        ],
    );
    assert_eq!(c.s.run_gang_cycle().await, 1);
    assert_eq!(
        held_by(&c, "uid-d0"),
        vec![("GPU-n1-mig".to_string(), Some("1g.10gb".to_string()))]
    );
    assert_eq!(
        card_used(&c),
        [("NVIDIA-H100/mig-1g.10gb-mixed".to_string(), 2)].into()
    );
    // The whole-card quota is untouched by the instances: one whole card fits.
    let whole = [("nvidia.com/vgpu-mode", "hami-core")];
    gang(&c, "solo", &[member("s0", "solo", 80000, &whole)]);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    assert_eq!(
        held_by(&c, "uid-s0"),
        vec![("GPU-n1-whole".to_string(), None)]
    );
    assert_eq!(
        card_used(&c),
        [
            ("NVIDIA-H100".to_string(), 1),
            ("NVIDIA-H100/mig-1g.10gb-mixed".to_string(), 2),
        ]
        .into()
    );
}

#[tokio::test]
async fn card_name_picks_the_card_type_and_the_quota_key_charged() {
    // The instance's own card type would go to the longer key; the pod is
    // charged under the name it gives instead.
    let c = cluster(
        r#"{"NVIDIA-H100/mig-2g.20gb-mixed": 1, "NVIDIA-H100-80GB-HBM3/mig-2g.20gb-mixed": 5}"#,
    );
    // 9000 MiB alone would be a 1g; the card name asks for a 2g.
    let named = [("volcano.sh/card.name", "NVIDIA-H100/mig-2g.20gb-mixed")];
    gang(&c, "one", &[member("o0", "one", 9000, &named)]);
    assert_eq!(c.s.run_gang_cycle().await, 1);
    assert_eq!(
        held_by(&c, "uid-o0"),
        vec![("GPU-n1-mig".to_string(), Some("2g.20gb".to_string()))]
    );
    assert_eq!(
        card_used(&c),
        [("NVIDIA-H100/mig-2g.20gb-mixed".to_string(), 1)].into()
    );
    // A second one would be over the quota of the name it gives.
    gang(&c, "two", &[member("w0", "two", 9000, &named)]);
    assert_eq!(c.s.run_gang_cycle().await, 0);
    let message = c.verdict("ml/two").message.unwrap_or_default();
    assert!(
        message.contains("card NVIDIA-H100/mig-2g.20gb-mixed would be 2 > quota 1"),
        "{message}"
    );
    // A card type no GPU of the node is: nothing fits, by card type.
    let a100 = [("volcano.sh/card.name", "NVIDIA-A100")];
    let mut lone = member("a0", "none", 9000, &a100);
    lone.spec.as_mut().unwrap().scheduling_gates = None;
    lone.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove("scheduling.k8s.io/group-name");
    c.add(&lone);
    assert_eq!(c.filter("a0").await.unwrap_err(), "2/2 CardTypeMismatch");
}
