//! Vendor-neutral device model shared by the codecs, the fit and the ledger.

use crate::device::mig::{MIG_MODE, MigHold, MigProfile};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

/// The vendor word HAMi writes into pod device annotations for NVIDIA GPUs.
pub const NVIDIA_VENDOR: &str = "NVIDIA";

/// A vendor word as a shared string: every device of every pod names one, and
/// nearly all name [`NVIDIA_VENDOR`], which is allocated once.
pub fn vendor_word(vendor: &str) -> Arc<str> {
    static NVIDIA: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(NVIDIA_VENDOR));
    if vendor == NVIDIA_VENDOR {
        NVIDIA.clone()
    } else {
        Arc::from(vendor)
    }
}

/// One physical GPU as the device plugin registered it on its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDevice {
    /// GPU UUID (`GPU-...`), the key every allocation refers to; shared with the
    /// ledger's records of the pods on the GPU.
    pub id: Arc<str>,
    /// NVML index on the node.
    pub index: u32,
    /// Split count: how many vGPU tasks may share this GPU at once.
    pub count: u32,
    /// Registered memory in MiB (already scaled by the device plugin).
    pub devmem: u64,
    /// Registered compute in percent of the card (100 x core scaling).
    pub devcore: u32,
    /// Card model as registered, e.g. `NVIDIA A100-SXM4-80GB`.
    pub model: String,
    /// NUMA node (0 when unknown).
    pub numa: i32,
    /// Whether the device plugin reports the GPU healthy.
    pub health: bool,
    /// Sharing mode: `hami-core`, `mig` or `mps`.
    pub mode: String,
    /// Interconnect scores to other GPUs of the node (from `hami.io/node-nvidia-score`),
    /// keyed by the other GPU's UUID; higher is better connected.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pair_scores: BTreeMap<String, i64>,
    /// MIG profiles the GPU offers (mode `mig` only), as the device plugin
    /// registered them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_profiles: Vec<MigProfile>,
}

impl GpuDevice {
    /// Whether the GPU is partitioned into MIG instances.
    pub fn is_mig(&self) -> bool {
        self.mode == MIG_MODE
    }
}

/// What one container holds on one GPU, as written in `hami.io/vgpu-devices-allocated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDevice {
    /// GPU UUID (shared: the ledger points it at the registered device's UUID, so
    /// thousands of pods on one GPU hold one copy).
    pub uuid: Arc<str>,
    /// Vendor word (`NVIDIA`), not the card model (see [`vendor_word`]).
    pub vendor: Arc<str>,
    /// Memory in MiB.
    pub usedmem: u64,
    /// Compute in percent.
    pub usedcores: u32,
    /// On a MIG GPU, the instance this device is (boxed: almost no device has one,
    /// and the ledger keeps every device of every pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<Box<MigHold>>,
}

/// Devices per container of a pod, init containers first, then regular containers,
/// exactly one entry per container (an empty entry for a container without GPUs).
pub type PodDevices = Vec<Vec<ContainerDevice>>;
