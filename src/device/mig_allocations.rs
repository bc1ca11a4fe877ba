//! Codec for the pod annotation `hami.io/vgpu-mig-allocations`: which MIG instance
//! each container device of a pod is, written next to the device lists when a pod
//! gets MIG instances, e.g.
//! `[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-..","profile":"1g.10gb","placement":{"start":6,"size":1}}]`.
//!
//! The scheduler writes the first five keys; HAMi's device plugin creates the
//! instance at exactly that placement and adds `migUUID`, `gpuInstanceID` and
//! `computeInstanceID` (all three or none). After a restart the ledger reads the
//! placements back from here, so an instance's slices stay booked for as long as
//! its pod lives.

use crate::device::mig::{MIG_SLICES, MigHold, MigPlacement, MigRuntime};
use crate::device::model::{ContainerDevice, NVIDIA_VENDOR, PodDevices, vendor_word};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use thiserror::Error;

/// One record of the annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigAllocation {
    /// Position of the container (init containers first, as in the device lists).
    pub container_index: usize,
    /// Position of the device within the container's list.
    pub device_index: usize,
    /// The physical GPU.
    pub gpu_uuid: String,
    /// Profile name.
    pub profile: String,
    /// Slices the instance occupies.
    pub placement: MigPlacement,
    /// The device plugin's identity of the created instance.
    pub runtime: Option<MigRuntime>,
}

/// Why the annotation could not be read. HAMi's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MigAllocationError {
    /// Not a JSON array of records.
    #[error("invalid MIG allocations JSON: {0}")]
    Json(String),
    /// A record misses its GPU, profile or placement, or has a negative index.
    #[error("MIG allocation {0} is incomplete")]
    Incomplete(usize),
    /// One or two of the three runtime fields are set.
    #[error("MIG allocation {0} has partial runtime identity")]
    PartialRuntime(usize),
    /// Two records for one container device.
    #[error("duplicate MIG allocation for container {container} device {device}")]
    Duplicate {
        /// Container index.
        container: usize,
        /// Device index.
        device: usize,
    },
    /// A placement beyond the slices tracked (see `mig::MIG_SLICES`).
    #[error("MIG allocation {0} has a placement ending past slice {MIG_SLICES}")]
    Untrackable(usize),
}

#[derive(Debug, Serialize, Deserialize)]
struct WirePlacement {
    #[serde(default)]
    start: i64,
    #[serde(default)]
    size: i64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    #[serde(default)]
    container_index: i64,
    #[serde(default)]
    device_index: i64,
    #[serde(default, rename = "gpuUUID")]
    gpu_uuid: String,
    #[serde(default)]
    profile: String,
    #[serde(default)]
    placement: Option<WirePlacement>,
    #[serde(default, rename = "migUUID", skip_serializing_if = "Option::is_none")]
    mig_uuid: Option<String>,
    #[serde(
        default,
        rename = "gpuInstanceID",
        skip_serializing_if = "Option::is_none"
    )]
    gpu_instance_id: Option<u32>,
    #[serde(
        default,
        rename = "computeInstanceID",
        skip_serializing_if = "Option::is_none"
    )]
    compute_instance_id: Option<u32>,
}

/// Encodes the MIG instances of a pod's devices, in container and device order;
/// `None` when the pod has none (the annotation is then not written).
pub fn encode_mig_allocations(devices: &PodDevices) -> Option<String> {
    let mut out = Vec::new();
    for (ci, container) in devices.iter().enumerate() {
        for (di, d) in container.iter().enumerate() {
            let Some(MigHold::Instance {
                profile,
                placement,
                runtime,
            }) = d.mig.as_deref()
            else {
                continue;
            };
            out.push(Wire {
                container_index: ci as i64,
                device_index: di as i64,
                gpu_uuid: d.uuid.to_string(),
                profile: profile.clone(),
                placement: Some(WirePlacement {
                    start: i64::from(placement.start),
                    size: i64::from(placement.size),
                }),
                mig_uuid: runtime.as_ref().map(|r| r.mig_uuid.clone()),
                gpu_instance_id: runtime.as_ref().map(|r| r.gpu_instance_id),
                compute_instance_id: runtime.as_ref().map(|r| r.compute_instance_id),
            });
        }
    }
    if out.is_empty() {
        return None;
    }
    serde_json::to_string(&out).ok()
}

/// Decodes the annotation; an empty value has no records. Every record must name
/// its GPU, profile and a non-empty placement within the tracked slices, carry all
/// three runtime fields or none (an empty `migUUID` counts as absent), and be the
/// only one for its container device.
pub fn decode_mig_allocations(raw: &str) -> Result<Vec<MigAllocation>, MigAllocationError> {
    if raw.trim().is_empty() {
        return Ok(Vec::new());
    }
    let wire: Vec<Wire> =
        serde_json::from_str(raw).map_err(|e| MigAllocationError::Json(e.to_string()))?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(wire.len());
    for (i, w) in wire.into_iter().enumerate() {
        let placement = w.placement.as_ref().and_then(|p| {
            Some(MigPlacement {
                start: u32::try_from(p.start).ok()?,
                size: u32::try_from(p.size).ok()?,
            })
        });
        let (Ok(container_index), Ok(device_index), Some(placement)) = (
            usize::try_from(w.container_index),
            usize::try_from(w.device_index),
            placement,
        ) else {
            return Err(MigAllocationError::Incomplete(i));
        };
        if w.gpu_uuid.is_empty() || w.profile.is_empty() || placement.size == 0 {
            return Err(MigAllocationError::Incomplete(i));
        }
        if !placement.is_trackable() {
            return Err(MigAllocationError::Untrackable(i));
        }
        let mig_uuid = w.mig_uuid.filter(|u| !u.is_empty());
        let runtime = match (mig_uuid, w.gpu_instance_id, w.compute_instance_id) {
            (None, None, None) => None,
            (Some(mig_uuid), Some(gpu_instance_id), Some(compute_instance_id)) => {
                Some(MigRuntime {
                    mig_uuid,
                    gpu_instance_id,
                    compute_instance_id,
                })
            }
            _ => return Err(MigAllocationError::PartialRuntime(i)),
        };
        if !seen.insert((container_index, device_index)) {
            return Err(MigAllocationError::Duplicate {
                container: container_index,
                device: device_index,
            });
        }
        out.push(MigAllocation {
            container_index,
            device_index,
            gpu_uuid: w.gpu_uuid,
            profile: w.profile,
            placement,
            runtime,
        });
    }
    Ok(out)
}

/// Gives each device of `devices` the instance its record names: by container
/// and device index when that device is on the record's GPU, else (as HAMi pairs
/// them) the first device of the pod on that GPU still without one. Records left
/// over still occupy their slices, so they are kept as extra devices of their
/// container holding no memory or compute; their number is returned for the
/// caller to log.
pub fn attach_mig_allocations(devices: &mut PodDevices, records: Vec<MigAllocation>) -> usize {
    let mut left = Vec::new();
    for r in records {
        let slot = devices
            .get_mut(r.container_index)
            .and_then(|c| c.get_mut(r.device_index))
            .filter(|d| *d.uuid == *r.gpu_uuid && d.mig.is_none());
        match slot {
            Some(d) => d.mig = Some(Box::new(hold_of(&r))),
            None => left.push(r),
        }
    }
    let mut extra = 0;
    for r in left {
        let free = devices
            .iter_mut()
            .flatten()
            .find(|d| *d.uuid == *r.gpu_uuid && d.mig.is_none());
        if let Some(d) = free {
            d.mig = Some(Box::new(hold_of(&r)));
            continue;
        }
        if devices.is_empty() {
            devices.push(Vec::new());
        }
        let last = devices.len() - 1;
        let container = &mut devices[r.container_index.min(last)];
        container.push(ContainerDevice {
            uuid: r.gpu_uuid.as_str().into(),
            vendor: vendor_word(NVIDIA_VENDOR),
            usedmem: 0,
            usedcores: 0,
            mig: Some(Box::new(hold_of(&r))),
        });
        extra += 1;
    }
    extra
}

fn hold_of(r: &MigAllocation) -> MigHold {
    MigHold::Instance {
        profile: r.profile.clone(),
        placement: r.placement,
        runtime: r.runtime.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn device(uuid: &str, mig: Option<MigHold>) -> ContainerDevice {
        ContainerDevice {
            uuid: uuid.into(),
            vendor: vendor_word(NVIDIA_VENDOR),
            usedmem: 9856,
            usedcores: 14,
            mig: mig.map(Box::new),
        }
    }

    fn instance(profile: &str, start: u32, size: u32) -> MigHold {
        MigHold::Instance {
            profile: profile.into(),
            placement: MigPlacement { start, size },
            runtime: None,
        }
    }

    #[test]
    fn writes_only_devices_with_instances_in_hami_key_order() {
        let devices = vec![
            vec![],
            vec![
                device("GPU-a", Some(instance("1g.10gb", 6, 1))),
                device("GPU-b", None),
                device("GPU-a", Some(instance("2g.20gb", 0, 2))),
            ],
        ];
        assert_eq!(
            encode_mig_allocations(&devices).unwrap(),
            r#"[{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":6,"size":1}},{"containerIndex":1,"deviceIndex":2,"gpuUUID":"GPU-a","profile":"2g.20gb","placement":{"start":0,"size":2}}]"#
        );
        assert_eq!(
            encode_mig_allocations(&vec![vec![device("GPU-b", None)]]),
            None
        );
    }

    #[test]
    fn unknown_keys_and_an_empty_mig_uuid_are_tolerated() {
        let got = decode_mig_allocations(
            r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":6,"size":1},"migUUID":"","note":"x"}]"#,
        )
        .unwrap();
        assert_eq!(got[0].runtime, None);
        assert_eq!(decode_mig_allocations("  ").unwrap(), vec![]);
        assert!(matches!(
            decode_mig_allocations("{}"),
            Err(MigAllocationError::Json(_))
        ));
        assert_eq!(
            decode_mig_allocations(
                r#"[{"containerIndex":-1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":6,"size":1}}]"#
            ),
            Err(MigAllocationError::Incomplete(0))
        );
        assert_eq!(
            decode_mig_allocations(
                r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb"}]"#
            ),
            Err(MigAllocationError::Incomplete(0))
        );
        assert_eq!(
            decode_mig_allocations(
                r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":7,"size":4}}]"#
            )
            .unwrap_err()
            .to_string(),
            "MIG allocation 0 has a placement ending past slice 8"
        );
    }

    #[test]
    fn records_find_their_devices_by_index_then_by_gpu() {
        let mut devices = vec![vec![device("GPU-a", None)], vec![device("GPU-a", None)]];
        let records = decode_mig_allocations(
            r#"[{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":6,"size":1}},
                {"containerIndex":0,"deviceIndex":3,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":5,"size":1}},
                {"containerIndex":0,"deviceIndex":4,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":4,"size":1}}]"#,
        )
        .unwrap();
        assert_eq!(attach_mig_allocations(&mut devices, records), 1);
        assert_eq!(
            devices[1][0].mig.as_deref(),
            Some(&instance("1g.10gb", 6, 1))
        );
        assert_eq!(
            devices[0][0].mig.as_deref(),
            Some(&instance("1g.10gb", 5, 1))
        );
        // The third has no device left: it is kept, holding its slice and nothing else.
        assert_eq!(devices[0].len(), 2);
        assert_eq!(devices[0][1].usedmem, 0);
        assert_eq!(
            devices[0][1].mig.as_deref(),
            Some(&instance("1g.10gb", 4, 1))
        );
    }

    proptest! {
        #[test]
        fn garbage_never_panics(s in any::<String>()) {
            let _ = decode_mig_allocations(&s);
        }

        #[test]
        fn what_is_written_reads_back(
            placements in prop::collection::vec((0u32..8, 1u32..=8, any::<bool>()), 1..6)
        ) {
            let devices: PodDevices = placements
                .iter()
                .map(|&(start, size, ready)| {
                    let size = size.min(8 - start);
                    vec![ContainerDevice {
                        mig: Some(Box::new(MigHold::Instance {
                            profile: format!("{size}g.x"),
                            placement: MigPlacement { start, size },
                            runtime: ready.then(|| MigRuntime {
                                mig_uuid: format!("MIG-{start}"),
                                gpu_instance_id: start,
                                compute_instance_id: 0,
                            }),
                        })),
                        ..device("GPU-a", None)
                    }]
                })
                .collect();
            let text = encode_mig_allocations(&devices).unwrap();
            let mut bare: PodDevices = devices
                .iter()
                .map(|c| c.iter().map(|d| ContainerDevice { mig: None, ..d.clone() }).collect())
                .collect();
            let records = decode_mig_allocations(&text).unwrap();
            prop_assert_eq!(attach_mig_allocations(&mut bare, records), 0);
            prop_assert_eq!(bare, devices);
        }
    }
}
