//! The pods `/filter` was sent, kept until their `/bind`, so the bind needs no read
//! of the pod from the API server: kube-scheduler sends the bind for the pod it
//! just filtered, and the pod watch keeps the copy current meanwhile. A bind for a
//! pod with no copy here (a restart in between, `/filter` served by another
//! replica) reads it. A stale copy is harmless: the Binding carries the pod's UID
//! as precondition, and the ledger, not the copy, says whether the pod is bound.

use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Copies kept at most: a burst of filters whose binds never come (kube-scheduler
/// restarted) must not grow memory without bound.
const COPIES_MAX: usize = 20_000;

/// Pod copies by UID, with when each was taken.
#[derive(Debug, Default)]
pub(crate) struct PodCopies {
    pods: Mutex<HashMap<String, (Arc<Pod>, Instant)>>,
}

impl PodCopies {
    /// Keeps the pod `/filter` was sent at `now`; past the cap, copies older than
    /// `keep_for` go first, and if none is, the new one is not kept.
    pub(crate) fn keep(&self, pod: &Arc<Pod>, now: Instant, keep_for: Duration) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let mut pods = self.pods.lock();
        if pods.len() >= COPIES_MAX && !pods.contains_key(&uid) {
            pods.retain(|_, (_, at)| now.saturating_duration_since(*at) < keep_for);
            if pods.len() >= COPIES_MAX {
                return;
            }
        }
        pods.insert(uid, (Arc::clone(pod), now));
    }

    /// Replaces a kept copy with a newer one from the pod watch.
    pub(crate) fn refresh(&self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        if let Some(entry) = self.pods.lock().get_mut(uid) {
            entry.0 = Arc::new(pod.clone());
        }
    }

    /// The copy of the pod with `uid`, if one is kept.
    pub(crate) fn get(&self, uid: &str) -> Option<Arc<Pod>> {
        self.pods.lock().get(uid).map(|(pod, _)| pod.clone())
    }

    /// Lets go of the copy of the pod with `uid` (bound, failed, deleted).
    pub(crate) fn drop_copy(&self, uid: &str) {
        self.pods.lock().remove(uid);
    }
}
