//! The `hami.io/vgpu-node` label of a placement rides on the Binding with its
//! annotations. The API server always copies a Binding's annotations onto the pod,
//! but its labels only with the `PodTopologyLabelsAdmission` gate (beta and on by
//! default since Kubernetes 1.35). HAMi's vGPU monitor finds a node's pods by that
//! label, so a pod this process bound that the watch then shows without it gets it
//! in a patch of its own: no write at all where the server copies labels, and
//! where it does not, the one write HAMi itself makes (after the Binding instead of
//! before it, which nothing in HAMi's protocol minds: the device plugin never reads
//! the label).

use crate::annotations::VGPU_NODE;
use crate::cluster::api::MetadataPatch;
use crate::object_namespace::namespace_of;
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Pods awaited at most: binds whose pods the watch never shows bound (deleted
/// meanwhile, a watch gap) must not grow memory without bound.
const AWAITED_MAX: usize = 20_000;

/// The pods whose Binding carried the label, by UID, with their node, until the
/// watch shows them bound.
#[derive(Debug, Default)]
pub(crate) struct BindingLabels {
    awaited: Mutex<HashMap<String, String>>,
}

/// A pod whose label did not come with its Binding, and the patch that sets it.
pub(crate) struct MissingLabel {
    pub namespace: String,
    pub name: String,
    pub patch: MetadataPatch,
}

impl BindingLabels {
    /// Notes, before its Binding is sent, that pod `uid` is bound to `node` with the
    /// label (the watch may show the pod bound before the Binding answers).
    pub(crate) fn await_bound(&self, uid: &str, node: &str) {
        let mut awaited = self.awaited.lock();
        if awaited.len() < AWAITED_MAX || awaited.contains_key(uid) {
            awaited.insert(uid.to_string(), node.to_string());
        }
    }

    /// Stops waiting for pod `uid` (its Binding failed, or the pod is gone).
    pub(crate) fn forget(&self, uid: &str) {
        self.awaited.lock().remove(uid);
    }

    /// The pod as the watch shows it: once it is bound to the awaited node, it is
    /// awaited no more, and the patch setting its label is returned if it lacks it.
    pub(crate) fn seen(&self, pod: &Pod) -> Option<MissingLabel> {
        let uid = pod.metadata.uid.as_deref()?;
        let bound_to = pod.spec.as_ref()?.node_name.as_deref()?;
        let node = {
            let mut awaited = self.awaited.lock();
            if awaited.get(uid).map(String::as_str) != Some(bound_to) {
                return None;
            }
            awaited.remove(uid)?
        };
        let labelled = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(VGPU_NODE))
            .is_some_and(|l| *l == node);
        if labelled {
            return None;
        }
        let mut patch = MetadataPatch::default();
        patch.labels.insert(VGPU_NODE.to_string(), Some(node));
        Some(MissingLabel {
            namespace: namespace_of(&pod.metadata).to_owned(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            patch,
        })
    }
}

impl super::Scheduler {
    /// Sets the label on a pod the watch shows bound by this process without it.
    /// Watch events are applied outside any request, so the patch is sent on its
    /// own (and not at all where no runtime runs, as in some unit tests).
    pub(super) fn label_if_binding_did_not(&self, pod: &Pod) {
        let Some(missing) = self.binding_labels.seen(pod) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let api = std::sync::Arc::clone(&self.api);
        runtime.spawn(async move {
            if let Err(e) = api
                .patch_pod_metadata(&missing.namespace, &missing.name, &missing.patch)
                .await
            {
                tracing::warn!(pod = %format!("{}/{}", missing.namespace, missing.name), error = %e, "could not set the {VGPU_NODE} label the Binding did not carry onto the pod");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(node: Option<&str>, label: Option<&str>) -> Pod {
        let mut labels = serde_json::Map::new();
        if let Some(label) = label {
            labels.insert(VGPU_NODE.into(), json!(label));
        }
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": labels},
            "spec": {"containers": [], "nodeName": node},
        }))
        .expect("pod")
    }

    #[test]
    fn a_pod_seen_bound_without_its_label_gets_it_once() {
        let labels = BindingLabels::default();
        labels.await_bound("u1", "gpu-a");
        assert!(
            labels.seen(&pod(None, None)).is_none(),
            "not bound yet: nothing to say"
        );
        let missing = labels
            .seen(&pod(Some("gpu-a"), None))
            .expect("label missing");
        assert_eq!(
            (missing.namespace.as_str(), missing.name.as_str()),
            ("ns", "p")
        );
        assert_eq!(
            missing.patch.labels.get(VGPU_NODE),
            Some(&Some("gpu-a".to_string()))
        );
        assert!(
            labels.seen(&pod(Some("gpu-a"), None)).is_none(),
            "asked once"
        );
    }

    #[test]
    fn a_pod_bound_with_its_label_or_elsewhere_needs_no_patch() {
        let labels = BindingLabels::default();
        labels.await_bound("u1", "gpu-a");
        assert!(labels.seen(&pod(Some("gpu-a"), Some("gpu-a"))).is_none());
        labels.await_bound("u1", "gpu-a");
        assert!(
            labels.seen(&pod(Some("gpu-b"), None)).is_none(),
            "bound by someone else to another node"
        );
        labels.forget("u1");
        assert!(labels.seen(&pod(Some("gpu-a"), None)).is_none());
    }
}
