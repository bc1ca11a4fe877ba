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
