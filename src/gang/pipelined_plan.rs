//! The pipelined plan as it is written on the pod it is for: where its GPUs will
//! be and which evicted pods must be gone first. It lives on the pod so that a
//! restart neither loses the plan nor evicts anyone twice.

use crate::device::allocation_codec::{decode_pod_devices, encode_pod_devices};
use crate::device::mig_allocations::{
    attach_mig_allocations, decode_mig_allocations, encode_mig_allocations,
};
use crate::device::model::PodDevices;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Pod annotation carrying a pipelined plan (JSON).
pub const PIPELINED_PLAN: &str = "vgpu-scheduler.io/pipelined-plan";

/// Whether the pod carries a pipelined plan annotation.
pub fn carries_plan(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PIPELINED_PLAN))
}

/// A pipelined plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelinedPlan {
    /// The node.
    pub node: String,
    /// The GPUs per container, init containers first.
    pub devices: PodDevices,
    /// How many of `devices` are init containers.
    pub init_count: usize,
    /// UIDs of the pods that must be gone first.
    pub victims: BTreeSet<String>,
    /// When the plan lapses if they are not (Unix seconds).
    pub deadline: i64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    node: String,
    devices: String,
    /// The MIG instances among `devices`, as `hami.io/vgpu-mig-allocations` has
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mig: Option<String>,
    #[serde(default)]
    init_containers: usize,
    victims: BTreeSet<String>,
    deadline: i64,
}

impl PipelinedPlan {
    /// The annotation value.
    pub fn encode(&self) -> String {
        serde_json::to_string(&Wire {
            node: self.node.clone(),
            devices: encode_pod_devices(&self.devices),
            mig: encode_mig_allocations(&self.devices),
            init_containers: self.init_count,
            victims: self.victims.clone(),
            deadline: self.deadline,
        })
        .unwrap_or_default()
    }

    /// Reads an annotation value.
    pub fn decode(text: &str) -> Result<Self, String> {
        let wire: Wire =
            serde_json::from_str(text).map_err(|e| format!("{PIPELINED_PLAN}: {e}"))?;
        let mut devices = decode_pod_devices(&wire.devices)
            .map_err(|e| format!("{PIPELINED_PLAN}: devices: {e}"))?;
        if let Some(mig) = &wire.mig {
            let records =
                decode_mig_allocations(mig).map_err(|e| format!("{PIPELINED_PLAN}: mig: {e}"))?;
            attach_mig_allocations(&mut devices, records);
        }
        Ok(Self {
            devices,
            node: wire.node,
            init_count: wire.init_containers,
            victims: wire.victims,
            deadline: wire.deadline,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_back_as_written_and_garbage_is_refused() {
        let devices =
            decode_pod_devices("GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc,NVIDIA,81559,100:;")
                .unwrap();
        let plan = PipelinedPlan {
            node: "gpu-1".into(),
            devices,
            init_count: 0,
            victims: BTreeSet::from(["uid-a".into(), "uid-b".into()]),
            deadline: 1_800_000_000,
        };
        assert_eq!(PipelinedPlan::decode(&plan.encode()), Ok(plan));
        let mut mig = decode_pod_devices("GPU-m,NVIDIA,9856,14:;").unwrap();
        mig[0][0].mig = Some(Box::new(crate::device::mig::MigHold::Instance {
            profile: "1g.10gb".into(),
            placement: crate::device::mig::MigPlacement { start: 6, size: 1 },
            runtime: None,
        }));
        let plan = PipelinedPlan {
            node: "gpu-mig".into(),
            devices: mig,
            init_count: 0,
            victims: BTreeSet::from(["uid-a".into()]),
            deadline: 1_800_000_000,
        };
        assert_eq!(
            PipelinedPlan::decode(&plan.encode()),
            Ok(plan),
            "a plan keeps the MIG slices it promised"
        );
        assert!(PipelinedPlan::decode("{}").is_err());
        assert!(
            PipelinedPlan::decode("not json")
                .unwrap_err()
                .contains(PIPELINED_PLAN)
        );
    }
}
