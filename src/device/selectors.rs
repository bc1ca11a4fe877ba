//! Per-pod GPU selection annotations: card type and UUID allow/deny lists, NUMA
//! binding and sharing mode, and the capacity-card card types
//! (`volcano.sh/card.name`, see `card_name`).

use crate::device::card_name::CardNames;
use std::collections::BTreeMap;

/// Annotation listing card-model substrings the pod may use.
pub const USE_GPU_TYPE: &str = "nvidia.com/use-gputype";
/// Annotation listing card-model substrings the pod must not use.
pub const NOUSE_GPU_TYPE: &str = "nvidia.com/nouse-gputype";
/// Annotation listing GPU UUIDs the pod may use.
pub const USE_GPU_UUID: &str = "nvidia.com/use-gpuuuid";
/// Annotation listing GPU UUIDs the pod must not use.
pub const NOUSE_GPU_UUID: &str = "nvidia.com/nouse-gpuuuid";
/// Annotation asking that all GPUs of a container share one NUMA node.
pub const NUMA_BIND: &str = "nvidia.com/numa-bind";
/// Annotation restricting the device sharing mode (`hami-core`, `mig`, `mps`).
pub const VGPU_MODE: &str = "nvidia.com/vgpu-mode";

/// Constraints a pod puts on which GPUs it may get.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceSelectors {
    use_types: Vec<String>,
    nouse_types: Vec<String>,
    use_uuids: Vec<String>,
    nouse_uuids: Vec<String>,
    vgpu_mode: Option<String>,
    /// All GPUs of one container must be on one NUMA node.
    pub numa_bind: bool,
    /// Card types the pod may run on and is charged to (`volcano.sh/card.name`).
    pub card_names: CardNames,
}

/// Splits a comma list, trimming and dropping empty members (an empty list must not
/// exclude everything).
fn list(annotations: &BTreeMap<String, String>, key: &str, lowercase: bool) -> Vec<String> {
    annotations
        .get(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    if lowercase {
                        s.to_lowercase()
                    } else {
                        s.to_string()
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

impl DeviceSelectors {
    /// Reads the selectors from a pod's annotations.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Self {
        let numa_bind = annotations
            .get(NUMA_BIND)
            .map(|v| parse_go_bool(v.trim()))
            .unwrap_or(false);
        Self {
            use_types: list(annotations, USE_GPU_TYPE, true),
            nouse_types: list(annotations, NOUSE_GPU_TYPE, true),
            use_uuids: list(annotations, USE_GPU_UUID, false),
            nouse_uuids: list(annotations, NOUSE_GPU_UUID, false),
            vgpu_mode: annotations.get(VGPU_MODE).cloned(),
            numa_bind,
            card_names: CardNames::from_annotations(annotations),
        }
    }

    /// Whether the card model and mode are acceptable (`CardTypeMismatch` otherwise).
    pub fn type_allowed(&self, model: &str, mode: &str) -> bool {
        self.type_allowed_lower(&model.to_lowercase(), mode)
    }

    /// [`Self::type_allowed`] for a model already in lower case (the hot path).
    pub fn type_allowed_lower(&self, model: &str, mode: &str) -> bool {
        if self.use_types.is_empty() && self.nouse_types.is_empty() && self.vgpu_mode.is_none() {
            return true;
        }
        if !self.use_types.is_empty() && !self.use_types.iter().any(|t| model.contains(t)) {
            return false;
        }
        if self.nouse_types.iter().any(|t| model.contains(t)) {
            return false;
        }
        if let Some(wanted) = &self.vgpu_mode
            && !wanted.contains(mode)
        {
            return false;
        }
        true
    }

    /// Whether `nvidia.com/vgpu-mode`, if given, admits GPUs in `mode` (it names
    /// the modes it admits, and HAMi tests it by substring).
    pub fn mode_allowed(&self, mode: &str) -> bool {
        self.vgpu_mode
            .as_ref()
            .is_none_or(|wanted| wanted.contains(mode))
    }

    /// Whether the GPU UUID is acceptable (`CardUuidMismatch` otherwise).
    pub fn uuid_allowed(&self, uuid: &str) -> bool {
        if !self.use_uuids.is_empty() && !self.use_uuids.iter().any(|u| u == uuid) {
            return false;
        }
        !self.nouse_uuids.iter().any(|u| u == uuid)
    }
}

/// Go's `strconv.ParseBool` truth values, which HAMi uses for `numa-bind`.
fn parse_go_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

#[cfg(test)]
impl DeviceSelectors {
    /// Selectors from `(annotation, value)` pairs.
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::from_annotations(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_lists_match_case_insensitive_substrings() {
        let s = DeviceSelectors::from_pairs(&[(USE_GPU_TYPE, "a100, H100")]);
        assert!(s.type_allowed("NVIDIA H100 80GB HBM3", "hami-core"));
        assert!(s.type_allowed("NVIDIA A100-SXM4-80GB", "hami-core"));
        assert!(!s.type_allowed("NVIDIA GeForce RTX 4090", "hami-core"));
        let s = DeviceSelectors::from_pairs(&[(NOUSE_GPU_TYPE, "4090")]);
        assert!(!s.type_allowed("NVIDIA GeForce RTX 4090", "hami-core"));
        assert!(s.type_allowed("NVIDIA H100 80GB HBM3", "hami-core"));
    }

    #[test]
    fn empty_lists_exclude_nothing() {
        let s = DeviceSelectors::from_pairs(&[
            (USE_GPU_TYPE, " , "),
            (USE_GPU_UUID, ""),
            (NOUSE_GPU_UUID, ","),
        ]);
        assert!(s.type_allowed("NVIDIA A10", "hami-core"));
        assert!(s.uuid_allowed("GPU-1"));
    }

    #[test]
    fn uuid_lists_are_exact_and_nouse_applies_with_use() {
        let s = DeviceSelectors::from_pairs(&[
            (USE_GPU_UUID, "GPU-1, GPU-2"),
            (NOUSE_GPU_UUID, "GPU-2"),
        ]);
        assert!(s.uuid_allowed("GPU-1"));
        assert!(!s.uuid_allowed("GPU-2"));
        assert!(!s.uuid_allowed("GPU-10"));
    }

    #[test]
    fn vgpu_mode_and_numa_bind() {
        let s = DeviceSelectors::from_pairs(&[(VGPU_MODE, "mig"), (NUMA_BIND, "true")]);
        assert!(!s.type_allowed("NVIDIA A100", "hami-core"));
        assert!(s.type_allowed("NVIDIA A100", "mig"));
        assert!(s.numa_bind);
        assert!(!DeviceSelectors::from_pairs(&[(NUMA_BIND, "yes")]).numa_bind);
    }
}
