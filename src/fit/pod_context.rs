//! A vGPU pod as the fit needs it, parsed once per decision: its per-container
//! requests, the policies in force for it and its device selectors.

use crate::device::device_config::NvidiaConfig;
use crate::device::request::{PodRequest, parse_pod_request};
use crate::device::selectors::DeviceSelectors;
use crate::object_namespace::namespace_of;
use crate::policy::{GpuPolicy, NodePolicy, PodPolicies};
use k8s_openapi::api::core::v1::Pod;

/// A vGPU pod, parsed once per call.
#[derive(Debug, Clone)]
pub struct PodContext {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Per-container vGPU requests.
    pub request: PodRequest,
    /// Node and GPU policies in force for the pod.
    pub policies: PodPolicies,
    /// Type, UUID and NUMA selectors from its annotations.
    pub selectors: DeviceSelectors,
}

impl PodContext {
    /// Parses the pod; `Ok(None)` when it asks for no vGPU.
    pub fn parse(
        pod: &Pod,
        nvidia: &NvidiaConfig,
        node_policy: NodePolicy,
        gpu_policy: &GpuPolicy,
    ) -> Result<Option<Self>, String> {
        let request = parse_pod_request(pod, nvidia).map_err(|e| e.to_string())?;
        if request.is_empty() {
            return Ok(None);
        }
        let empty = Default::default();
        let annotations = pod.metadata.annotations.as_ref().unwrap_or(&empty);
        let policies = PodPolicies::resolve(annotations, node_policy, gpu_policy)?;
        let uid = pod
            .metadata
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .ok_or("pod has no metadata.uid")?;
        Ok(Some(Self {
            uid,
            namespace: namespace_of(&pod.metadata).to_owned(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            request,
            policies,
            selectors: DeviceSelectors::from_annotations(annotations),
        }))
    }
}
