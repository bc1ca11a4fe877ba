//! The admission decision for one pod CREATE: which pods are ours, how they are
//! mutated, and which are refused.

use super::WebhookConfig;
use super::container::{is_privileged, mutate_container};
use k8s_openapi::api::core::v1::Pod;

/// The scheduler name Kubernetes fills in when a pod names none.
const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// What to do with a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Store the pod, after replacing it with `mutated` when that is given.
    Allow {
        /// The pod to store; `None` keeps the pod exactly as received.
        mutated: Option<Box<Pod>>,
        /// Warnings for the client.
        warnings: Vec<String>,
        /// Why, for the log.
        note: String,
    },
    /// Refuse the pod.
    Deny {
        /// 403 for pods we refuse on purpose.
        code: u16,
        /// Shown to the user.
        message: String,
    },
}

impl Admission {
    fn unchanged(note: impl Into<String>) -> Self {
        Self::Allow {
            mutated: None,
            warnings: Vec::new(),
            note: note.into(),
        }
    }

    fn forbidden(message: impl Into<String>) -> Self {
        Self::Deny {
            code: 403,
            message: message.into(),
        }
    }
}

/// Decides on a pod being created, following HAMi's webhook step by step, with two
/// deliberate differences: invalid vGPU quantities are refused (HAMi answered 500
/// or let the pod bypass the scheduler), and requests count like limits when
/// deciding whether a container asks for a vGPU. Privileged containers that ask
/// for vGPU are refused as HAMi refuses them, unless the operator allowed them.
pub fn admit_pod(pod: &Pod, config: &WebhookConfig) -> Admission {
    let Some(spec) = pod.spec.as_ref().filter(|s| !s.containers.is_empty()) else {
        return Admission::forbidden("pod has no containers");
    };

    if let Some(current) = spec.scheduler_name.as_deref().filter(|s| !s.is_empty()) {
        let may_take_over =
            current == DEFAULT_SCHEDULER && config.force_overwrite_default_scheduler;
        if !may_take_over && (config.scheduler_name.is_empty() || config.scheduler_name != current)
        {
            return Admission::unchanged("pod already has different scheduler assigned");
        }
    }

    let mut mutated = pod.clone();
    let mut has_resource = false;
    let mut privileged = Vec::new();
    let mut vgpu_containers = Vec::new();
    if let Some(spec) = mutated.spec.as_mut() {
        let init = spec.init_containers.iter_mut().flatten();
        for container in init.chain(spec.containers.iter_mut()) {
            let uses_vgpu = match mutate_container(container, &config.nvidia) {
                Ok(uses_vgpu) => uses_vgpu,
                Err(e) => return Admission::forbidden(e.to_string()),
            };
            has_resource |= uses_vgpu;
            if is_privileged(container) {
                privileged.push((container.name.clone(), uses_vgpu));
            }
            if uses_vgpu {
                vgpu_containers.push(container.name.clone());
            }
        }
    }

    let mut warnings = Vec::new();
    if has_resource && !privileged.is_empty() {
        // A privileged container sees every GPU on its node, so no vGPU limit
        // holds for it: it can use memory and compute booked for other pods.
        let reasons = privileged
            .iter()
            .map(|(name, uses_vgpu)| privileged_reason(name, *uses_vgpu, &vgpu_containers));
        if !config.allow_privileged_vgpu {
            return Admission::forbidden(format!(
                "{}; drop privileged, or ask the operator to start the scheduler with --allow-privileged-vgpu",
                reasons.collect::<Vec<_>>().join("; ")
            ));
        }
        warnings = privileged
            .iter()
            .map(|(name, uses_vgpu)| if *uses_vgpu {
                format!("vGPU limits do not apply to privileged container {name}: it can use every GPU on its node")
            } else {
                format!(
                    "vGPU limits of container {} do not hold: privileged container {name} of the same pod can use every GPU on its node",
                    vgpu_containers.join(", ")
                )
            })
            .collect();
    }

    if let Some(spec) = mutated.spec.as_mut() {
        if has_resource {
            let runtime_class = &config.nvidia.runtime_class_name;
            let unset = spec.runtime_class_name.as_deref().is_none_or(str::is_empty);
            if unset && !runtime_class.is_empty() {
                spec.runtime_class_name = Some(runtime_class.clone());
            }
        }
        if has_resource && !config.scheduler_name.is_empty() {
            spec.scheduler_name = Some(config.scheduler_name.clone());
            if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                return Admission::forbidden(format!(
                    "pod is pinned to node {node} with spec.nodeName; vGPU pods must be placed by {}: remove spec.nodeName",
                    config.scheduler_name
                ));
            }
        }
    }

    let gated = config.gang_gates && add_gang_gate(&mut mutated, config);
    let note = match (has_resource, gated) {
        (_, true) => "gang or queue pod gated until its gang is placed",
        (true, false) => "vGPU pod mutated",
        (false, false) => "pod asks for no vGPU",
    };
    Admission::Allow {
        mutated: Some(Box::new(mutated)),
        warnings,
        note: note.into(),
    }
}

/// Why a privileged container defeats the vGPU limits of its pod, naming it
/// precisely: it either asks for vGPU itself, or shares the pod of the containers
/// that do (and could use their GPUs, and every other one on the node, unlimited).
fn privileged_reason(name: &str, uses_vgpu: bool, vgpu_containers: &[String]) -> String {
    if uses_vgpu {
        format!(
            "container {name} is privileged and asks for vGPU resources: a privileged container sees every GPU on its node, so its vGPU limits cannot hold"
        )
    } else {
        format!(
            "container {name} is privileged and shares the pod with vGPU container {}: it asks for no vGPU itself, but a privileged container sees every GPU on its node, so the pod's vGPU limits cannot hold",
            vgpu_containers.join(", ")
        )
    }
}

/// Adds our scheduling gate to a gang or queue pod that this scheduler will
/// schedule (the planner lifts it when the whole gang has a place). Pods of other
/// schedulers, such as Volcano's own, are left alone.
fn add_gang_gate(pod: &mut Pod, config: &WebhookConfig) -> bool {
    use crate::gang::book::GANG_GATE;
    use crate::gang::membership::Membership;
    if Membership::of(pod).is_none() || config.scheduler_name.is_empty() {
        return false;
    }
    let Some(spec) = pod.spec.as_mut() else {
        return false;
    };
    if spec.scheduler_name.as_deref() != Some(config.scheduler_name.as_str()) {
        return false;
    }
    let gates = spec.scheduling_gates.get_or_insert_with(Vec::new);
    if !gates.iter().any(|g| g.name == GANG_GATE) {
        gates.push(k8s_openapi::api::core::v1::PodSchedulingGate {
            name: GANG_GATE.to_string(),
        });
    }
    true
}
