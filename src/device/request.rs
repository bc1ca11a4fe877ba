//! What a pod asks of GPUs: per-container vGPU requests parsed from its resources.

use crate::device::device_config::NvidiaConfig;
use crate::quantity::{quantity_to_count, quantity_to_mib, quantity_to_percent};
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// Largest memory request HAMi's device plugin can carry (it stores MiB in an int32).
const MAX_MEMORY_MIB: u64 = i32::MAX as u64;

/// How much of each GPU one container wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerRequest {
    /// Number of GPUs.
    pub nums: u32,
    /// Memory per GPU, in MiB after the memory factor; 0 when given as a percentage.
    pub memreq: u64,
    /// Memory per GPU as a percentage of the card, used when `memreq` is 0.
    pub mem_percentage: Option<u32>,
    /// Compute per GPU in percent (not yet clamped; fit clamps to 100).
    pub coresreq: u32,
}

impl ContainerRequest {
    /// Memory in MiB this request takes on a card with `totalmem` MiB.
    pub fn memory_on(&self, totalmem: u64) -> u64 {
        if self.memreq > 0 {
            return self.memreq;
        }
        match self.mem_percentage {
            Some(pct) => totalmem * u64::from(pct) / 100,
            None => 0,
        }
    }

    /// Compute this request takes on one card, clamped as HAMi does.
    pub fn cores(&self) -> u32 {
        self.coresreq.min(100)
    }
}

/// A pod's vGPU requests, one slot per container: init containers first, then regular
/// containers, in spec order (the order of `hami.io/vgpu-devices-allocated`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodRequest {
    /// `None` for containers that ask for no GPU.
    pub containers: Vec<Option<ContainerRequest>>,
    /// How many of `containers` are init containers.
    pub init_count: usize,
}

impl PodRequest {
    /// True when no container asks for a GPU: the pod is not ours to place.
    pub fn is_empty(&self) -> bool {
        self.containers.iter().all(Option::is_none)
    }

    /// Requests of the init containers (run one at a time).
    pub fn init(&self) -> &[Option<ContainerRequest>] {
        &self.containers[..self.init_count]
    }

    /// Requests of the regular containers (run together).
    pub fn app(&self) -> &[Option<ContainerRequest>] {
        &self.containers[self.init_count..]
    }
}

/// A resource value that cannot be turned into a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container {container}: {resource}: {problem}")]
pub struct RequestError {
    /// Container name.
    pub container: String,
    /// Resource name.
    pub resource: String,
    /// What is wrong with the value.
    pub problem: String,
}

/// Parses every container of `pod` into vGPU requests.
pub fn parse_pod_request(pod: &Pod, config: &NvidiaConfig) -> Result<PodRequest, RequestError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(PodRequest::default());
    };
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let mut containers = Vec::with_capacity(init.len() + spec.containers.len());
    for container in init.iter().chain(spec.containers.iter()) {
        containers.push(parse_container_request(container, config)?);
    }
    Ok(PodRequest {
        containers,
        init_count: init.len(),
    })
}

/// Looks a resource up in limits first, then requests (limits win, as in HAMi).
pub fn resource_value<'a>(container: &'a Container, name: &str) -> Option<&'a str> {
    let resources = container.resources.as_ref()?;
    let from = |m: &'a Option<BTreeMap<String, Quantity>>| m.as_ref()?.get(name);
    from(&resources.limits)
        .or_else(|| from(&resources.requests))
        .map(|q| q.0.as_str())
}

/// Reads a `gpumem-percentage` value: a whole percentage from 1 to 100, checked
/// the same way by the webhook and by `/filter`.
///
/// HAMi's `/filter` reads 0 or less as "not given", which books the whole card,
/// and clamps values above 100, while its webhook refuses values outside 0..100:
/// a pod that bypassed the webhook got a different answer from one that did not.
/// Here both refuse anything but 1..=100 (a pod that wants the whole card says 100,
/// or gives no percentage).
pub fn memory_percentage(value: &str) -> Result<u32, String> {
    let pct = quantity_to_percent(value).map_err(|e| e.to_string())?;
    u32::try_from(pct)
        .ok()
        .filter(|p| (1..=100).contains(p))
        .ok_or_else(|| format!("{value} is not a percentage between 1 and 100"))
}

/// Parses one container. `Ok(None)` means it asks for no GPU.
pub fn parse_container_request(
    container: &Container,
    config: &NvidiaConfig,
) -> Result<Option<ContainerRequest>, RequestError> {
    let fail = |resource: &str, problem: String| RequestError {
        container: container.name.clone(),
        resource: resource.to_string(),
        problem,
    };
    let Some(count) = resource_value(container, &config.resource_count_name) else {
        return Ok(None);
    };
    let nums =
        quantity_to_count(count).map_err(|e| fail(&config.resource_count_name, e.to_string()))?;
    if nums == 0 {
        return Ok(None);
    }
    let nums = u32::try_from(nums).map_err(|_| {
        fail(
            &config.resource_count_name,
            format!("{nums} GPUs is more than any node has"),
        )
    })?;

    let mut memreq = 0u64;
    if let Some(mem) = resource_value(container, &config.resource_memory_name) {
        let mib =
            quantity_to_mib(mem).map_err(|e| fail(&config.resource_memory_name, e.to_string()))?;
        memreq = mib
            .checked_mul(u64::from(config.memory_factor))
            .filter(|m| *m <= MAX_MEMORY_MIB)
            .ok_or_else(|| {
                fail(
                    &config.resource_memory_name,
                    format!("{mem} is larger than any GPU ({MAX_MEMORY_MIB} MiB at most)"),
                )
            })?;
    }

    let mut mem_percentage = None;
    if let Some(pct) = resource_value(container, &config.resource_memory_percentage_name) {
        mem_percentage = Some(
            memory_percentage(pct).map_err(|e| fail(&config.resource_memory_percentage_name, e))?,
        );
    }
    if memreq > 0 {
        mem_percentage = None;
    } else if mem_percentage.is_none() {
        if config.default_memory > 0 {
            memreq = config.default_memory;
        } else {
            mem_percentage = Some(100);
        }
    }

    let coresreq = match resource_value(container, &config.resource_core_name) {
        Some(cores) => {
            let cores = quantity_to_percent(cores)
                .map_err(|e| fail(&config.resource_core_name, e.to_string()))?;
            if cores < 0 {
                return Err(fail(
                    &config.resource_core_name,
                    format!("{cores} is negative; give a percentage between 0 and 100"),
                ));
            }
            u32::try_from(cores).unwrap_or(u32::MAX)
        }
        None => config.default_cores,
    };

    Ok(Some(ContainerRequest {
        nums,
        memreq,
        mem_percentage,
        coresreq,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

    fn container(name: &str, limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Container {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect()
            })
        };
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                limits: map(limits),
                requests: map(requests),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn req(limits: &[(&str, &str)]) -> Option<ContainerRequest> {
        parse_container_request(&container("c", limits, &[]), &NvidiaConfig::default()).unwrap()
    }

    fn expect(nums: u32, memreq: u64, pct: Option<u32>, cores: u32) -> Option<ContainerRequest> {
        Some(ContainerRequest {
            nums,
            memreq,
            mem_percentage: pct,
            coresreq: cores,
        })
    }

    #[test]
    fn hami_examples() {
        assert_eq!(req(&[("nvidia.com/gpu", "1")]), expect(1, 0, Some(100), 0));
        assert_eq!(
            req(&[("nvidia.com/gpu", "2"), ("nvidia.com/gpumem", "4096")]),
            expect(2, 4096, None, 0)
        );
        assert_eq!(
            req(&[
                ("nvidia.com/gpu", "1"),
                ("nvidia.com/gpumem-percentage", "50")
            ]),
            expect(1, 0, Some(50), 0)
        );
        assert_eq!(
            req(&[
                ("nvidia.com/gpu", "1"),
                ("nvidia.com/gpumem-percentage", "50"),
                ("nvidia.com/gpumem", "2000")
            ]),
            expect(1, 2000, None, 0)
        );
        let config = NvidiaConfig {
            default_memory: 512,
            ..Default::default()
        };
        let c = container("c", &[("nvidia.com/gpu", "1")], &[]);
        assert_eq!(
            parse_container_request(&c, &config).unwrap(),
            expect(1, 512, None, 0)
        );
    }

    #[test]
    fn limits_win_over_requests_and_requests_alone_count() {
        let c = container(
            "c",
            &[("nvidia.com/gpu", "2")],
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpucores", "30")],
        );
        assert_eq!(
            parse_container_request(&c, &NvidiaConfig::default()).unwrap(),
            expect(2, 0, Some(100), 30)
        );
    }

    #[test]
    fn percentage_outside_1_to_100_is_refused_and_binary_memory_is_converted() {
        for pct in ["150", "101", "0", "-1"] {
            let c = container(
                "c",
                &[
                    ("nvidia.com/gpu", "1"),
                    ("nvidia.com/gpumem-percentage", pct),
                ],
                &[],
            );
            let err = parse_container_request(&c, &NvidiaConfig::default()).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "container c: nvidia.com/gpumem-percentage: {pct} is not a percentage between 1 and 100"
                )
            );
        }
        assert_eq!(
            req(&[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "16Gi")]),
            expect(1, 16384, None, 0)
        );
    }

    #[test]
    fn memory_factor_multiplies_and_overflow_is_an_error() {
        let config = NvidiaConfig {
            memory_factor: 2,
            ..Default::default()
        };
        let c = container(
            "c",
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "1000")],
            &[],
        );
        assert_eq!(
            parse_container_request(&c, &config).unwrap(),
            expect(1, 2000, None, 0)
        );
        let c = container(
            "big",
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "2000000000")],
            &[],
        );
        let err = parse_container_request(&c, &config).unwrap_err();
        assert_eq!(err.container, "big");
        assert_eq!(err.resource, "nvidia.com/gpumem");
    }

    #[test]
    fn invalid_values_name_container_and_resource() {
        let c = container(
            "trainer",
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "lots")],
            &[],
        );
        let err = parse_container_request(&c, &NvidiaConfig::default()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("container trainer: nvidia.com/gpumem:"),
            "{text}"
        );
        let c = container("c", &[("nvidia.com/gpu", "0.5")], &[]);
        assert!(parse_container_request(&c, &NvidiaConfig::default()).is_err());
    }

    #[test]
    fn no_count_or_zero_count_means_no_request() {
        assert_eq!(req(&[("nvidia.com/gpumem", "1000")]), None);
        assert_eq!(req(&[("nvidia.com/gpu", "0")]), None);
        assert_eq!(req(&[("cpu", "1")]), None);
    }

    #[test]
    fn pod_order_is_init_then_regular() {
        let pod = Pod {
            spec: Some(PodSpec {
                init_containers: Some(vec![container("init", &[("nvidia.com/gpu", "1")], &[])]),
                containers: vec![
                    container("a", &[], &[]),
                    container("b", &[("nvidia.com/gpu", "2")], &[]),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = parse_pod_request(&pod, &NvidiaConfig::default()).unwrap();
        assert_eq!(r.init_count, 1);
        assert_eq!(r.containers.len(), 3);
        assert!(r.containers[0].is_some() && r.containers[1].is_none());
        assert_eq!(r.app().len(), 2);
        assert!(!r.is_empty());
    }
}
