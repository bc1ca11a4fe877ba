//! NVIDIA vGPU mutation of one container: validating its vGPU quantities and filling
//! in the defaults HAMi's webhook adds (GPU count, exclusive compute, env vars).

use crate::device::device_config::NvidiaConfig;
use crate::device::request::{
    RequestError, memory_percentage, parse_container_request, resource_value,
};
use crate::quantity::{quantity_to_count, quantity_to_mib, quantity_to_percent};
use k8s_openapi::api::core::v1::{Container, EnvVar};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Env var carrying `nvidia.com/priority` to HAMi-core in the container.
pub(crate) const ENV_TASK_PRIORITY: &str = "CUDA_TASK_PRIORITY";
/// Env var carrying the configured `gpuCorePolicy` to HAMi-core.
pub(crate) const ENV_CORE_POLICY: &str = "GPU_CORE_UTILIZATION_POLICY";
/// Env var the NVIDIA container runtime reads to decide which GPUs to expose.
pub(crate) const ENV_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

/// Compute percentage that asks for a whole card to itself.
const EXCLUSIVE_CORES: &str = "100";

/// Which of our resources a quantity is, so it is checked with the right rules.
#[derive(Clone, Copy)]
enum Kind {
    Count,
    Memory,
    MemoryPercentage,
    Cores,
    Priority,
}

/// Validates and mutates `container` in place. Returns whether it asks for a vGPU,
/// i.e. names any of our four resources in its limits or requests.
///
/// HAMi only looked at limits for this, so a count given only in requests left the
/// container unmanaged; here requests count too.
pub(crate) fn mutate_container(
    container: &mut Container,
    nvidia: &NvidiaConfig,
) -> Result<bool, RequestError> {
    validate_quantities(container, nvidia)?;
    let has_resource = nvidia
        .resource_names()
        .iter()
        .any(|name| present(container, name));

    if let Some(priority) = limit(container, &nvidia.resource_priority_name) {
        // Validated above as a whole number; written in plain digits because
        // HAMi-core parses the env var as an integer (`1k` would not parse).
        let value = quantity_to_percent(priority)
            .map(|p| p.to_string())
            .unwrap_or_else(|_| priority.to_owned());
        push_env(container, ENV_TASK_PRIORITY, &value);
    }
    let policy = nvidia.gpu_core_policy.as_str();
    if !policy.is_empty() && policy != "default" {
        push_env(container, ENV_CORE_POLICY, policy);
    }

    add_default_count(container, nvidia);
    add_exclusive_cores(container, nvidia);

    if !has_resource && nvidia.overwrite_env {
        // Without this the NVIDIA runtime's default exposes every GPU to containers
        // that asked for none, outside any vGPU limit.
        push_env(container, ENV_VISIBLE_DEVICES, "none");
    }

    // Catches what the scheduler would reject later (counts or memory beyond what a
    // node or the device plugin can carry), now that the defaults are filled in.
    parse_container_request(container, nvidia)?;
    Ok(has_resource)
}

/// Whether the container runs privileged, which lets it see every GPU on its node.
pub(crate) fn is_privileged(container: &Container) -> bool {
    container
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false)
}

/// Checks every value of our resources in limits and in requests, so that a bad
/// value is refused at admission instead of making the scheduler skip the pod.
fn validate_quantities(container: &Container, nvidia: &NvidiaConfig) -> Result<(), RequestError> {
    let checks = [
        (&nvidia.resource_count_name, Kind::Count),
        (&nvidia.resource_memory_name, Kind::Memory),
        (
            &nvidia.resource_memory_percentage_name,
            Kind::MemoryPercentage,
        ),
        (&nvidia.resource_core_name, Kind::Cores),
        (&nvidia.resource_priority_name, Kind::Priority),
    ];
    let Some(resources) = container.resources.as_ref() else {
        return Ok(());
    };
    for map in [&resources.limits, &resources.requests]
        .into_iter()
        .flatten()
    {
        for (name, kind) in checks {
            if name.is_empty() {
                continue;
            }
            if let Some(Quantity(value)) = map.get(name.as_str()) {
                check_value(value, kind).map_err(|problem| RequestError {
                    container: container.name.clone(),
                    resource: name.clone(),
                    problem,
                })?;
            }
        }
    }
    Ok(())
}

fn check_value(value: &str, kind: Kind) -> Result<(), String> {
    let text = |e: crate::quantity::QuantityError| e.to_string();
    match kind {
        Kind::Count => quantity_to_count(value).map(drop).map_err(text),
        Kind::Memory => quantity_to_mib(value).map(drop).map_err(text),
        Kind::MemoryPercentage => memory_percentage(value).map(drop),
        Kind::Cores | Kind::Priority => quantity_to_percent(value).map(drop).map_err(text),
    }
}

/// Gives a container that set only memory or cores the configured GPU count, since
/// the scheduler ignores containers without a count.
fn add_default_count(container: &mut Container, nvidia: &NvidiaConfig) {
    if nvidia.default_gpu_num == 0 || present(container, &nvidia.resource_count_name) {
        return;
    }
    let sized = [
        &nvidia.resource_memory_name,
        &nvidia.resource_memory_percentage_name,
        &nvidia.resource_core_name,
    ]
    .into_iter()
    .any(|name| present(container, name));
    if sized {
        let count = nvidia.default_gpu_num.to_string();
        set_limit(container, &nvidia.resource_count_name, count);
    }
}

/// Makes a container that asks for whole cards (no memory size, or 100 % of the
/// memory, and no cores) exclusive, by asking for all of each card's compute. Without
/// this other pods could still share the card it expects to own.
fn add_exclusive_cores(container: &mut Container, nvidia: &NvidiaConfig) {
    let cores = &nvidia.resource_core_name;
    if cores.is_empty() || present(container, cores) {
        return;
    }
    // A count of 0 asks for no GPU, so there is nothing to make exclusive.
    let counted = resource_value(container, &nvidia.resource_count_name)
        .and_then(|c| quantity_to_count(c).ok())
        .is_some_and(|n| n > 0);
    if !counted {
        return;
    }
    let whole_card = match resource_value(container, &nvidia.resource_memory_percentage_name) {
        Some(pct) => quantity_to_percent(pct).is_ok_and(|p| p == 100),
        None => {
            nvidia.resource_memory_name.is_empty()
                || !present(container, &nvidia.resource_memory_name)
        }
    };
    if whole_card {
        set_limit(container, cores, EXCLUSIVE_CORES.to_owned());
    }
}

/// Whether `name` appears in the container's limits or requests.
fn present(container: &Container, name: &str) -> bool {
    !name.is_empty() && resource_value(container, name).is_some()
}

fn limit<'a>(container: &'a Container, name: &str) -> Option<&'a str> {
    if name.is_empty() {
        return None;
    }
    container
        .resources
        .as_ref()?
        .limits
        .as_ref()?
        .get(name)
        .map(|q| q.0.as_str())
}

fn set_limit(container: &mut Container, name: &str, value: String) {
    container
        .resources
        .get_or_insert_with(Default::default)
        .limits
        .get_or_insert_with(Default::default)
        .insert(name.to_owned(), Quantity(value));
}

/// Sets `name` to `value`. HAMi appends, so with a variable of that name already
/// there the later one (HAMi's) wins in the container; setting the existing one
/// gives the same environment without a duplicate, and admitting a pod twice (a
/// replayed or re-created pod) leaves it as admitting it once.
fn push_env(container: &mut Container, name: &str, value: &str) {
    let env = container.env.get_or_insert_with(Vec::new);
    let var = EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..Default::default()
    };
    match env.iter_mut().rfind(|e| e.name == name) {
        Some(existing) => *existing = var,
        None => env.push(var),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;

    fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Container {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect()
            })
        };
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: map(limits),
                requests: map(requests),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn limit_of(c: &Container, name: &str) -> Option<String> {
        limit(c, name).map(str::to_owned)
    }

    fn env_of(c: &Container) -> Vec<(String, String)> {
        c.env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn whole_card_requests_become_exclusive() {
        let nvidia = NvidiaConfig::default();
        let mut c = container(&[("nvidia.com/gpu", "1")], &[]);
        assert!(mutate_container(&mut c, &nvidia).unwrap());
        assert_eq!(limit_of(&c, "nvidia.com/gpucores").as_deref(), Some("100"));

        let mut c = container(
            &[
                ("nvidia.com/gpu", "1"),
                ("nvidia.com/gpumem-percentage", "100"),
            ],
            &[],
        );
        mutate_container(&mut c, &nvidia).unwrap();
        assert_eq!(limit_of(&c, "nvidia.com/gpucores").as_deref(), Some("100"));
    }

    #[test]
    fn sized_or_cored_requests_stay_shareable() {
        let nvidia = NvidiaConfig::default();
        for extra in [
            ("nvidia.com/gpumem", "8192"),
            ("nvidia.com/gpumem-percentage", "50"),
            ("nvidia.com/gpucores", "30"),
        ] {
            let mut c = container(&[("nvidia.com/gpu", "1"), extra], &[]);
            mutate_container(&mut c, &nvidia).unwrap();
            let cores = limit_of(&c, "nvidia.com/gpucores");
            assert!(
                cores.is_none() || extra.0 == "nvidia.com/gpucores",
                "{extra:?}"
            );
        }
        // Cores given only in requests still count as given.
        let mut c = container(&[("nvidia.com/gpu", "1")], &[("nvidia.com/gpucores", "20")]);
        mutate_container(&mut c, &nvidia).unwrap();
        assert_eq!(limit_of(&c, "nvidia.com/gpucores"), None);
    }

    #[test]
    fn count_is_added_when_only_size_is_given() {
        let nvidia = NvidiaConfig {
            default_gpu_num: 2,
            ..Default::default()
        };
        let mut c = container(&[("nvidia.com/gpumem", "4096")], &[]);
        assert!(mutate_container(&mut c, &nvidia).unwrap());
        assert_eq!(limit_of(&c, "nvidia.com/gpu").as_deref(), Some("2"));
        assert_eq!(limit_of(&c, "nvidia.com/gpucores"), None);

        // With a whole-card percentage the added count also makes it exclusive.
        let mut c = container(&[("nvidia.com/gpumem-percentage", "100")], &[]);
        mutate_container(&mut c, &nvidia).unwrap();
        assert_eq!(limit_of(&c, "nvidia.com/gpucores").as_deref(), Some("100"));

        let none = NvidiaConfig {
            default_gpu_num: 0,
            ..Default::default()
        };
        let mut c = container(&[("nvidia.com/gpumem", "4096")], &[]);
        assert!(mutate_container(&mut c, &none).unwrap());
        assert_eq!(limit_of(&c, "nvidia.com/gpu"), None);
    }

    #[test]
    fn count_only_in_requests_is_a_vgpu_container() {
        let mut c = container(&[], &[("nvidia.com/gpu", "1")]);
        assert!(mutate_container(&mut c, &NvidiaConfig::default()).unwrap());
        assert_eq!(limit_of(&c, "nvidia.com/gpucores").as_deref(), Some("100"));
    }

    #[test]
    fn zero_count_is_not_made_exclusive() {
        let mut c = container(&[("nvidia.com/gpu", "0")], &[]);
        mutate_container(&mut c, &NvidiaConfig::default()).unwrap();
        assert_eq!(limit_of(&c, "nvidia.com/gpucores"), None);
    }

    #[test]
    fn env_vars_follow_config_and_priority() {
        let nvidia = NvidiaConfig {
            overwrite_env: true,
            gpu_core_policy: "force".into(),
            ..Default::default()
        };
        let mut c = container(
            &[("nvidia.com/gpu", "1"), ("nvidia.com/priority", "1")],
            &[],
        );
        mutate_container(&mut c, &nvidia).unwrap();
        assert_eq!(
            env_of(&c),
            vec![
                (ENV_TASK_PRIORITY.to_owned(), "1".to_owned()),
                (ENV_CORE_POLICY.to_owned(), "force".to_owned()),
            ]
        );

        let mut plain = Container {
            name: "plain".into(),
            ..Default::default()
        };
        assert!(!mutate_container(&mut plain, &nvidia).unwrap());
        assert_eq!(
            env_of(&plain),
            vec![
                (ENV_CORE_POLICY.to_owned(), "force".to_owned()),
                (ENV_VISIBLE_DEVICES.to_owned(), "none".to_owned()),
            ]
        );
    }

    #[test]
    fn admitting_twice_sets_each_variable_once_and_ours_wins_over_the_users() {
        let nvidia = NvidiaConfig {
            gpu_core_policy: "force".into(),
            ..Default::default()
        };
        let mut c = container(
            &[("nvidia.com/gpu", "1"), ("nvidia.com/priority", "1")],
            &[],
        );
        c.env = Some(vec![EnvVar {
            name: ENV_CORE_POLICY.into(),
            value: Some("disable".into()),
            ..Default::default()
        }]);
        mutate_container(&mut c, &nvidia).unwrap();
        let once = env_of(&c);
        mutate_container(&mut c, &nvidia).unwrap();
        assert_eq!(env_of(&c), once);
        assert_eq!(
            once,
            vec![
                (ENV_CORE_POLICY.to_owned(), "force".to_owned()),
                (ENV_TASK_PRIORITY.to_owned(), "1".to_owned()),
            ]
        );
    }

    #[test]
    fn invalid_values_are_refused_with_container_and_resource() {
        let nvidia = NvidiaConfig::default();
        let cases = [
            (
                vec![
                    ("nvidia.com/gpu", "1"),
                    ("nvidia.com/gpumem-percentage", "150"),
                ],
                "nvidia.com/gpumem-percentage: 150 is not a percentage between 1 and 100",
            ),
            (
                vec![
                    ("nvidia.com/gpu", "1"),
                    ("nvidia.com/gpumem-percentage", "-1"),
                ],
                "nvidia.com/gpumem-percentage: -1 is not a percentage between 1 and 100",
            ),
            (
                vec![("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "lots")],
                "nvidia.com/gpumem: ",
            ),
            (vec![("nvidia.com/gpu", "0.5")], "nvidia.com/gpu: "),
            (vec![("nvidia.com/gpumem", "lots")], "nvidia.com/gpumem: "),
            (
                vec![("nvidia.com/gpu", "1"), ("nvidia.com/priority", "0.5")],
                "nvidia.com/priority: ",
            ),
        ];
        for (limits, expected) in cases {
            let mut c = container(&limits, &[]);
            let err = mutate_container(&mut c, &nvidia).unwrap_err().to_string();
            assert!(err.starts_with("container c: "), "{err}");
            assert!(err.contains(expected), "{err} lacks {expected}");
        }
        // Requests are checked as well as limits.
        let mut c = container(
            &[("nvidia.com/gpu", "1")],
            &[("nvidia.com/gpumem-percentage", "101")],
        );
        assert!(mutate_container(&mut c, &nvidia).is_err());
    }

    #[test]
    fn binary_memory_is_valid() {
        let mut c = container(
            &[("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "16Gi")],
            &[],
        );
        assert!(mutate_container(&mut c, &NvidiaConfig::default()).unwrap());
        assert_eq!(limit_of(&c, "nvidia.com/gpucores"), None);
    }
}
