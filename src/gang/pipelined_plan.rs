//! The pipelined plan as it is written on the pod it is for: where its GPUs will
//! be, which evicted pods must be gone first and which action evicted them. It
//! lives on the pod so that a restart neither loses the plan nor evicts anyone
//! twice, and asks a victim again under the name of the action that chose it.

use crate::device::allocation_codec::{decode_pod_devices, encode_pod_devices};
use crate::device::mig_allocations::{
    attach_mig_allocations, decode_mig_allocations, encode_mig_allocations,
};
use crate::device::model::PodDevices;
use crate::volcano::framework::EvictAction;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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
    /// The action that evicted each victim it knows (written with the plan, so
    /// recording it costs no write of its own). Plans written before it was
    /// recorded have none.
    pub evicted_by: BTreeMap<String, EvictAction>,
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
    /// The victims by the action that evicted them. A name this version does not
    /// know is left out: the victim is then asked again under the name the
    /// queues suggest, and the plan still holds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    evicted_by: BTreeMap<String, BTreeSet<String>>,
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
            evicted_by: self.evicted_by.iter().fold(
                BTreeMap::new(),
                |mut by_action, (uid, action)| {
                    by_action
                        .entry(action.as_str().to_owned())
                        .or_insert_with(BTreeSet::new)
                        .insert(uid.clone());
                    by_action
                },
            ),
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
            evicted_by: wire
                .evicted_by
                .into_iter()
                .filter_map(|(name, uids)| EvictAction::named(&name).map(|a| (a, uids)))
                .flat_map(|(action, uids)| uids.into_iter().map(move |uid| (uid, action)))
                .collect(),
        })
    }

    /// The action that evicted `victim`, as recorded in the plan on `pod`.
    pub fn evicted_by_on(
        pod: &k8s_openapi::api::core::v1::Pod,
        victim: &str,
    ) -> Option<EvictAction> {
        let text = pod.metadata.annotations.as_ref()?.get(PIPELINED_PLAN)?;
        Self::decode(text).ok()?.evicted_by.get(victim).copied()
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
            evicted_by: BTreeMap::from([
                ("uid-a".into(), EvictAction::GangPreempt),
                ("uid-b".into(), EvictAction::Reclaim),
            ]),
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
            evicted_by: BTreeMap::new(),
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

    #[test]
    fn a_plan_without_the_evicting_action_or_with_an_unknown_one_still_holds() {
        let written = |evicted_by: &str| {
            format!(
                r#"{{"node":"gpu-1","devices":"GPU-a,NVIDIA,81559,100:;","victims":["uid-a","uid-b"],"deadline":1800000000{evicted_by}}}"#
            )
        };
        let before = PipelinedPlan::decode(&written("")).expect("a plan of an earlier version");
        assert!(before.evicted_by.is_empty());
        let unknown = PipelinedPlan::decode(&written(
            r#","evictedBy":{"shuffle":["uid-a"],"gangreclaim":["uid-b"]}"#,
        ))
        .expect("a plan naming an action this version does not know");
        assert_eq!(unknown.victims, before.victims);
        assert_eq!(
            unknown.evicted_by,
            BTreeMap::from([("uid-b".into(), EvictAction::GangReclaim)])
        );
    }
}
