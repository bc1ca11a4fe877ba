//! The mutating admission webhook: prepares vGPU pods for this scheduler when they are
//! created, as HAMi's webhook does.
//!
//! The API server sends every pod CREATE here (an `AdmissionReview`). Pods that ask
//! for vGPU resources get `spec.schedulerName` pointed at this scheduler, a GPU count
//! when they only gave memory or cores, and exclusive compute when they asked for
//! whole cards; invalid vGPU quantities are refused at admission instead of silently
//! bypassing the scheduler later. The answer carries an RFC 6902 JSON Patch.
//!
//! Entry point: [`review`], which turns a request body into the `AdmissionReview`
//! answer the HTTP handler sends back with status 200.

mod container;
mod patch;
mod placement_annotations;
mod pod;
pub mod quota_check;
mod review;
mod wire;

#[cfg(test)]
mod tests;

pub use placement_annotations::{AnnotationWriters, PLACEMENT_ANNOTATIONS};
pub use pod::{Admission, admit_pod};
pub use quota_check::{NoQuota, QuotaLookup};
pub use review::{review, review_with_quota};
pub use wire::{
    ADMISSION_V1, ADMISSION_V1BETA1, AdmissionResponse, AdmissionReviewResponse, PATCH_TYPE_JSON,
    ResponseStatus,
};

use crate::device::device_config::NvidiaConfig;

/// What the webhook needs to know to mutate pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// This scheduler's name (`--scheduler-name`), written into `spec.schedulerName`
    /// of vGPU pods. Empty means the webhook never redirects pods to a scheduler.
    pub scheduler_name: String,
    /// Whether pods that name `default-scheduler` explicitly are still taken over.
    /// Most controllers fill `default-scheduler` in on their own, so without this the
    /// webhook could not tell a deliberate choice from a default.
    pub force_overwrite_default_scheduler: bool,
    /// Resource names and defaults for NVIDIA vGPUs.
    pub nvidia: NvidiaConfig,
    /// Whether gang and queue pods we schedule get our scheduling gate at creation,
    /// so they wait outside kube-scheduler until the planner places their gang.
    pub gang_gates: bool,
    /// Whether privileged containers may ask for vGPU (`--allow-privileged-vgpu`).
    /// They see every GPU on their node, so their limits do not hold; HAMi refuses
    /// them, and so does this webhook unless the operator accepts the risk, in
    /// which case they are scheduled like other vGPU pods, with a warning.
    pub allow_privileged_vgpu: bool,
    /// Who may write the placement annotations (see `placement_annotations`).
    pub annotation_writers: AnnotationWriters,
}
