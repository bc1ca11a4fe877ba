//! The device configuration (`--device-config-file`): resource names and request
//! defaults, in the YAML format of HAMi's `device-config.yaml`.

use serde::Deserialize;
use std::path::Path;

/// Settings for NVIDIA GPUs, the `nvidia:` section of HAMi's device config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NvidiaConfig {
    /// Extended resource that counts GPUs (`nvidia.com/gpu`).
    pub resource_count_name: String,
    /// Extended resource for GPU memory in MiB (`nvidia.com/gpumem`).
    pub resource_memory_name: String,
    /// Extended resource for memory as a percentage of the card.
    pub resource_memory_percentage_name: String,
    /// Extended resource for compute in percent of the card (`nvidia.com/gpucores`).
    pub resource_core_name: String,
    /// Extended resource for the task priority (passed to the container as an env var).
    pub resource_priority_name: String,
    /// Whether the webhook hides all GPUs from containers that request none.
    pub overwrite_env: bool,
    /// MiB booked when a container asks for GPUs but neither memory nor percentage.
    pub default_memory: u64,
    /// Cores booked when a container gives none.
    pub default_cores: u32,
    /// GPUs the webhook adds when a container gives memory or cores but no count.
    #[serde(rename = "defaultGPUNum", alias = "defaultGpuNum")]
    pub default_gpu_num: u32,
    /// Multiplier applied to requested memory (the device plugin's memory scaling).
    pub memory_factor: u32,
    /// `default`, `force` or `disable`: passed to containers as
    /// `GPU_CORE_UTILIZATION_POLICY` when not `default`.
    pub gpu_core_policy: String,
    /// Runtime class the webhook sets on GPU pods that have none.
    pub runtime_class_name: String,
    /// MIG profiles the cluster allows per GPU model. The device plugin registers
    /// only these (with their sizes and placements from NVML); the scheduler checks
    /// at start that every entry is well formed, as HAMi's does.
    pub mig_profile_allowlist: Vec<AllowedMigProfiles>,
}

/// One `migProfileAllowlist` entry: the profiles allowed on some GPU models.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct AllowedMigProfiles {
    /// GPU models, e.g. `A100-SXM4-80GB`.
    pub models: Vec<String>,
    /// Profile names, e.g. `1g.10gb`.
    pub profiles: Vec<String>,
}

/// HAMi's check of the allowlist: every entry names models and profiles, and every
/// profile looks like `<N>g.<memory>` (a slice count ending in `g`, a dot, more).
pub fn validate_mig_profile_allowlist(allowlist: &[AllowedMigProfiles]) -> Result<(), String> {
    for entry in allowlist {
        if entry.models.is_empty() || entry.profiles.is_empty() {
            return Err("MIG profile allowlist must define models and profiles".into());
        }
        for profile in &entry.profiles {
            let well_formed = profile
                .split_once('.')
                .is_some_and(|(slices, _)| slices.len() >= 2 && slices.ends_with('g'));
            if !well_formed {
                return Err(format!("invalid MIG profile {profile:?}"));
            }
        }
    }
    Ok(())
}

impl Default for NvidiaConfig {
    fn default() -> Self {
        Self {
            resource_count_name: "nvidia.com/gpu".into(),
            resource_memory_name: "nvidia.com/gpumem".into(),
            resource_memory_percentage_name: "nvidia.com/gpumem-percentage".into(),
            resource_core_name: "nvidia.com/gpucores".into(),
            resource_priority_name: "nvidia.com/priority".into(),
            overwrite_env: false,
            default_memory: 0,
            default_cores: 0,
            default_gpu_num: 1,
            memory_factor: 1,
            gpu_core_policy: "default".into(),
            runtime_class_name: String::new(),
            mig_profile_allowlist: Vec::new(),
        }
    }
}

impl NvidiaConfig {
    /// Every resource name this vendor manages, for "is this a vGPU pod" tests.
    pub fn resource_names(&self) -> [&str; 4] {
        [
            &self.resource_count_name,
            &self.resource_memory_name,
            &self.resource_memory_percentage_name,
            &self.resource_core_name,
        ]
    }
}

/// The whole device configuration. Sections for other vendors are accepted and
/// ignored, so HAMi's full `device-config.yaml` loads unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct DeviceConfig {
    /// The `nvidia:` section.
    pub nvidia: NvidiaConfig,
}

/// Why a device configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DeviceConfigError {
    #[error("cannot read device config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("device config {path} is not valid YAML for a device config: {source}")]
    Parse {
        path: String,
        source: serde_yaml_ng::Error,
    },
    #[error("device config {path}: {problem}")]
    Invalid { path: String, problem: String },
}

impl DeviceConfig {
    /// Loads and validates a device config file.
    pub fn load(path: &Path) -> Result<Self, DeviceConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| DeviceConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            DeviceConfigError::Parse { source, .. } => DeviceConfigError::Parse {
                path: shown.clone(),
                source,
            },
            DeviceConfigError::Invalid { problem, .. } => DeviceConfigError::Invalid {
                path: shown.clone(),
                problem,
            },
            other => other,
        })
    }

    /// Parses and validates a device config from YAML text.
    pub fn parse(text: &str) -> Result<Self, DeviceConfigError> {
        let config: DeviceConfig =
            serde_yaml_ng::from_str(text).map_err(|source| DeviceConfigError::Parse {
                path: String::new(),
                source,
            })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), DeviceConfigError> {
        let invalid = |problem: String| DeviceConfigError::Invalid {
            path: String::new(),
            problem,
        };
        let n = &self.nvidia;
        if n.resource_count_name.trim().is_empty() {
            return Err(invalid("nvidia.resourceCountName must not be empty".into()));
        }
        if n.memory_factor == 0 {
            return Err(invalid("nvidia.memoryFactor must be at least 1".into()));
        }
        if n.default_cores > 100 {
            return Err(invalid(format!(
                "nvidia.defaultCores must be between 0 and 100, got {}",
                n.default_cores
            )));
        }
        validate_mig_profile_allowlist(&n.mig_profile_allowlist)
            .map_err(|e| invalid(format!("nvidia.migProfileAllowlist: {e}")))?;
        if !matches!(
            n.gpu_core_policy.as_str(),
            "default" | "force" | "disable" | ""
        ) {
            return Err(invalid(format!(
                "nvidia.gpuCorePolicy must be default, force or disable, got {:?}",
                n.gpu_core_policy
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hami_chart_config_loads_with_other_vendors_ignored() {
        let text = r#"
nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  memoryFactor: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  gpuCorePolicy: default
cambricon:
  resourceCountName: cambricon.com/vmlu
"#;
        let config = DeviceConfig::parse(text).unwrap();
        assert_eq!(config.nvidia, NvidiaConfig::default());
    }

    /// HAMi's chart default allowlist loads as written.
    #[test]
    fn hami_chart_mig_allowlist_loads() {
        let text = r#"
nvidia:
  migProfileAllowlist:
    - models: ["A30"]
      profiles: ["1g.6gb", "2g.12gb", "4g.24gb"]
    - models: ["A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"]
      profiles: ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"]
    - models: ["A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"]
      profiles: ["1g.10gb", "2g.20gb", "3g.40gb", "7g.79gb"]
    - models: ["H100-PCIE-80GB", "H100-SXM5-80GB"]
      profiles: ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]
    - models: ["H200 NVL", "H200-SXM5"]
      profiles: ["1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb"]
"#;
        let config = DeviceConfig::parse(text).unwrap();
        assert_eq!(config.nvidia.mig_profile_allowlist.len(), 5);
        assert_eq!(
            config.nvidia.mig_profile_allowlist[4],
            AllowedMigProfiles {
                models: vec!["H200 NVL".into(), "H200-SXM5".into()],
                profiles: vec![
                    "1g.18gb".into(),
                    "2g.35gb".into(),
                    "3g.71gb".into(),
                    "7g.141gb".into()
                ],
            }
        );
    }

    /// HAMi's `TestValidateMigProfileAllowlist`, plus the shapes its rule refuses:
    /// the scheduler does not start with such a config.
    #[test]
    fn a_malformed_mig_allowlist_stops_the_start() {
        let valid = [AllowedMigProfiles {
            models: vec!["A100".into()],
            profiles: vec!["1g.5gb".into(), "2g.10gb".into()],
        }];
        assert_eq!(validate_mig_profile_allowlist(&valid), Ok(()));
        let no_profiles = [AllowedMigProfiles {
            models: vec!["A100".into()],
            profiles: vec![],
        }];
        assert_eq!(
            validate_mig_profile_allowlist(&no_profiles),
            Err("MIG profile allowlist must define models and profiles".into())
        );
        for bad in ["1g", "g.5gb", "1.5gb", "1x.5gb", ""] {
            let entry = [AllowedMigProfiles {
                models: vec!["A100".into()],
                profiles: vec![bad.into()],
            }];
            assert_eq!(
                validate_mig_profile_allowlist(&entry),
                Err(format!("invalid MIG profile {bad:?}")),
                "{bad}"
            );
        }
        let err = DeviceConfig::parse(
            "nvidia:\n  migProfileAllowlist:\n    - models: [A100]\n      profiles: [big]\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .ends_with("nvidia.migProfileAllowlist: invalid MIG profile \"big\""),
            "{err}"
        );
    }

    #[test]
    fn defaults_apply_to_missing_keys() {
        let config = DeviceConfig::parse("nvidia:\n  defaultMemory: 512\n").unwrap();
        assert_eq!(config.nvidia.default_memory, 512);
        assert_eq!(config.nvidia.resource_core_name, "nvidia.com/gpucores");
    }

    #[test]
    fn invalid_values_are_rejected_with_the_key() {
        let err = DeviceConfig::parse("nvidia:\n  memoryFactor: 0\n").unwrap_err();
        assert!(err.to_string().contains("memoryFactor"), "{err}");
        let err = DeviceConfig::parse("nvidia:\n  defaultMemory: lots\n").unwrap_err();
        assert!(err.to_string().contains("not valid YAML"), "{err}");
    }
}
