//! MIG gauges: HAMi's `hami_node_gpu_mig_instance_info` (one series per instance
//! the device plugin created, with its runtime identity and placement) and, since
//! that one shows nothing until an instance exists on the GPU, the instances the
//! ledger books per GPU and profile and the slices they hold.

use super::{GaugeSpec, Samples};
use crate::device::mig::MigHold;
use crate::ledger::Ledger;
use std::collections::BTreeMap;

const MIG_INSTANCE_INFO: GaugeSpec = GaugeSpec {
    name: "hami_node_gpu_mig_instance_info",
    help: "Realized MIG instance identity and scheduler placement",
    labels: &[
        "node",
        "device_uuid",
        "device_index",
        "mig_uuid",
        "profile",
        "gpu_instance_id",
        "compute_instance_id",
        "placement_start",
        "placement_size",
    ],
    // Its old name had other labels (below); rendered from its own samples.
    legacy_name: "",
    legacy_labels: &[],
};

/// HAMi's pre-v2.9 name: one series per realized instance, named
/// `<profile>-<gpu instance id>`.
const LEGACY_MIG_INSTANCE: GaugeSpec = GaugeSpec {
    name: "nodeGPUMigInstance",
    help: "GPU Sharing mode. 0 for hami-core, 1 for mig, 2 for mps",
    labels: &["nodeid", "deviceuuid", "deviceidx", "migname"],
    legacy_name: "",
    legacy_labels: &[],
};

const MIG_INSTANCES: GaugeSpec = GaugeSpec {
    name: "vgpu_scheduler_gpu_mig_instances",
    help: "MIG instances booked on the GPU (reserved or running), per profile",
    labels: &["node", "device_uuid", "device_index", "profile"],
    legacy_name: "",
    legacy_labels: &[],
};

const MIG_SLICES_HELD: GaugeSpec = GaugeSpec {
    name: "vgpu_scheduler_gpu_mig_slices_held",
    help: "Memory slices of the MIG GPU held by instances (all of them while a pod of unknown slices holds it)",
    labels: &["node", "device_uuid", "device_index"],
    legacy_name: "",
    legacy_labels: &[],
};

/// The MIG gauges of `ledger`; with `legacy`, HAMi's old instance gauge too.
pub(super) fn collect(ledger: &Ledger, legacy: bool) -> Vec<Samples> {
    let mut info = Samples::new(&MIG_INSTANCE_INFO);
    let mut old_info = Samples::new(&LEGACY_MIG_INSTANCE);
    let mut booked: BTreeMap<(String, String, u32, String), u32> = BTreeMap::new();
    let mut slices = Samples::new(&MIG_SLICES_HELD);
    for (node, entry) in ledger.nodes() {
        for (d, u) in entry
            .devices
            .iter()
            .zip(&entry.usage)
            .filter(|(d, _)| d.is_mig())
        {
            let held = if u.mig.unplaced_holds() > 0 {
                crate::device::mig::MIG_SLICES
            } else {
                u.mig.held_count()
            };
            slices.push(
                vec![node.clone(), d.id.to_string(), d.index.to_string()],
                held as f64,
            );
        }
    }
    for p in ledger.pods() {
        let Some(entry) = ledger.node(&p.node) else {
            continue;
        };
        for d in p.devices.iter().flatten() {
            let Some(MigHold::Instance {
                profile,
                placement,
                runtime,
            }) = d.mig.as_deref()
            else {
                continue;
            };
            let Some(gpu) = entry.devices.iter().find(|g| g.id == d.uuid) else {
                continue;
            };
            *booked
                .entry((
                    p.node.clone(),
                    gpu.id.to_string(),
                    gpu.index,
                    profile.clone(),
                ))
                .or_default() += 1;
            let Some(r) = runtime else {
                continue;
            };
            info.push(
                vec![
                    p.node.clone(),
                    gpu.id.to_string(),
                    gpu.index.to_string(),
                    r.mig_uuid.clone(),
                    profile.clone(),
                    r.gpu_instance_id.to_string(),
                    r.compute_instance_id.to_string(),
                    placement.start.to_string(),
                    placement.size.to_string(),
                ],
                1.0,
            );
            if legacy {
                old_info.push(
                    vec![
                        p.node.clone(),
                        gpu.id.to_string(),
                        gpu.index.to_string(),
                        format!("{profile}-{}", r.gpu_instance_id),
                    ],
                    1.0,
                );
            }
        }
    }
    let mut instances = Samples::new(&MIG_INSTANCES);
    for ((node, uuid, index, profile), n) in booked {
        instances.push(vec![node, uuid, index.to_string(), profile], f64::from(n));
    }
    let mut out = vec![info, instances, slices];
    if legacy {
        out.push(old_info);
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::device::mig::{MigHold, MigPlacement, MigRuntime};
    use crate::device::model::{ContainerDevice, NVIDIA_VENDOR, vendor_word};
    use crate::device::register_codec::decode_register_annotation;
    use crate::ledger::{Ledger, NodeEntry, PodEntry, PodPhase};
    use crate::metrics::{Metrics, MetricsOptions};

    const GPU: &str = "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc";

    fn ledger() -> Ledger {
        let register = format!(
            r#"[{{"id":"{GPU}","count":7,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true,"mode":"mig","index":3,
                "migProfiles":[{{"name":"1g.10gb","memoryMB":9856,"core":14,"sliceCount":1,"placements":[{{"start":5,"size":1}},{{"start":6,"size":1}}]}}]}}]"#
        );
        let mut ledger = Ledger::default();
        ledger.upsert_node(
            "gpu-mig",
            NodeEntry {
                devices: decode_register_annotation(&register).unwrap(),
                ..NodeEntry::default()
            },
        );
        let device = |start: u32, runtime: Option<MigRuntime>| ContainerDevice {
            uuid: GPU.into(),
            vendor: vendor_word(NVIDIA_VENDOR),
            usedmem: 9856,
            usedcores: 14,
            mig: Some(Box::new(MigHold::Instance {
                profile: "1g.10gb".into(),
                placement: MigPlacement { start, size: 1 },
                runtime,
            })),
        };
        let running = MigRuntime {
            mig_uuid: "MIG-1b7c3a8e-5f2d-5a8b-9c1e-3d4f5a6b7c8d".into(),
            gpu_instance_id: 13,
            compute_instance_id: 0,
        };
        for (uid, devices) in [
            ("uid-a", vec![vec![device(6, Some(running))]]),
            ("uid-b", vec![vec![device(5, None)]]),
        ] {
            ledger.add_pod(PodEntry::new(
                uid.into(),
                "ml".into(),
                uid.into(),
                "gpu-mig".into(),
                devices,
                0,
                PodPhase::Bound,
            ));
        }
        ledger
    }

    fn render(legacy: bool) -> String {
        let options = MetricsOptions {
            legacy_names: legacy,
            ..MetricsOptions::default()
        };
        Metrics::with_options(options).render(&ledger(), &crate::gang::GangView::default())
    }

    #[test]
    fn realized_instances_carry_their_identity_and_booked_ones_are_counted() {
        let text = render(false);
        let lines = |name: &str| -> Vec<&str> {
            text.lines()
                .filter(|l| l.starts_with(&format!("{name}{{")))
                .collect()
        };
        assert_eq!(
            lines("hami_node_gpu_mig_instance_info"),
            [format!(
                r#"hami_node_gpu_mig_instance_info{{zone="vGPU",node="gpu-mig",device_uuid="{GPU}",device_index="3",mig_uuid="MIG-1b7c3a8e-5f2d-5a8b-9c1e-3d4f5a6b7c8d",profile="1g.10gb",gpu_instance_id="13",compute_instance_id="0",placement_start="6",placement_size="1"}} 1.0"#
            )],
            "only the instance the device plugin created: {text}"
        );
        assert_eq!(
            lines("vgpu_scheduler_gpu_mig_instances"),
            [format!(
                r#"vgpu_scheduler_gpu_mig_instances{{zone="vGPU",node="gpu-mig",device_uuid="{GPU}",device_index="3",profile="1g.10gb"}} 2.0"#
            )]
        );
        assert_eq!(
            lines("vgpu_scheduler_gpu_mig_slices_held"),
            [format!(
                r#"vgpu_scheduler_gpu_mig_slices_held{{zone="vGPU",node="gpu-mig",device_uuid="{GPU}",device_index="3"}} 2.0"#
            )]
        );
        assert!(!text.contains("nodeGPUMigInstance"), "{text}");
        let legacy = render(true);
        assert!(
            legacy.contains(&format!(
                r#"nodeGPUMigInstance{{zone="vGPU",nodeid="gpu-mig",deviceuuid="{GPU}",deviceidx="3",migname="1g.10gb-13"}} 1.0"#
            )),
            "{legacy}"
        );
    }
}
