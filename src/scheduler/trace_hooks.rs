//! Where the scheduler tells its trace recorder what it saw (see `crate::trace`).
//! Each hook is a no-op until a recorder is set, and with one it only queues:
//! nothing here waits.

use super::Scheduler;
use crate::trace::TraceRecorder;
use k8s_openapi::api::core::v1::Pod;
use std::sync::Arc;

impl Scheduler {
    /// Records what this scheduler sees from now on into `recorder`; false when
    /// a recorder was set already (it stays).
    pub fn record_trace(&self, recorder: Arc<TraceRecorder>) -> bool {
        self.trace.set(recorder).is_ok()
    }

    /// A pod as a watch (or a cluster file) shows it: first sight of one of our
    /// vGPU pods still waiting, its bind, or its end.
    pub(super) fn trace_pod_event(&self, pod: &Pod) {
        let Some(trace) = self.trace.get() else {
            return;
        };
        // The same test as for claims: pods of other schedulers are not ours to
        // record, whatever they ask for.
        let Some(uid) = pod
            .metadata
            .uid
            .as_deref()
            .filter(|_| self.placed_here(pod))
        else {
            return;
        };
        let spec = pod.spec.as_ref();
        let finished = super::tracking::pod_finished(pod);
        let node = spec
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty());
        let at = self.clock.wall();
        match node {
            _ if finished => trace.gone(at, uid),
            // Bound by kube-scheduler through `/bind` (recorded there first) or
            // by anything else that binds pods named for this scheduler.
            Some(node) => trace.bound(at, uid, node),
            None if pod.metadata.deletion_timestamp.is_none() => {
                if matches!(self.pod_context(pod), Ok(Some(_))) {
                    trace.pod(at, pod);
                }
            }
            None => {}
        }
    }

    /// A vGPU pod kube-scheduler asks to place: its first sight when no watch
    /// showed it before (a cluster file has no watch). kube-scheduler calls its
    /// extenders for every profile, so a pod here may be another scheduler's.
    /// One naming no scheduler at all (only a cluster file holds such a pod:
    /// the API server names `default-scheduler`) is placed here, so recorded.
    pub(super) fn trace_filtered(&self, pod: &Pod) {
        let unnamed = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .is_none_or(str::is_empty);
        if let Some(trace) = self.trace.get()
            && (unnamed || self.placed_here(pod))
        {
            trace.pod(self.clock.wall(), pod);
        }
    }

    /// A pod `/bind` bound.
    pub(super) fn trace_bound(&self, uid: &str, node: &str) {
        if let Some(trace) = self.trace.get() {
            trace.bound(self.clock.wall(), uid, node);
        }
    }

    /// A pod deleted (or missed being deleted).
    pub(super) fn trace_gone(&self, uid: &str) {
        if let Some(trace) = self.trace.get() {
            trace.gone(self.clock.wall(), uid);
        }
    }

    /// After a list of pods that started at `since`: pods followed from before
    /// it that it lacks were deleted unseen, and are recorded gone.
    pub(super) fn trace_retain(
        &self,
        existing: &std::collections::HashSet<String>,
        since: std::time::Instant,
    ) {
        if let Some(trace) = self.trace.get() {
            let wall = self.clock.wall();
            let ago = self.clock.now().saturating_duration_since(since);
            let listed_from = wall - chrono::Duration::from_std(ago).unwrap_or_default();
            trace.retain(wall, listed_from, existing);
        }
    }

    /// A PodGroup as a watch (or a cluster file) shows it.
    pub(super) fn trace_podgroup(&self, namespace: &str, name: &str, group: &serde_json::Value) {
        if let Some(trace) = self.trace.get() {
            trace.podgroup(self.clock.wall(), namespace, name, group);
        }
    }

    /// A PodGroup deleted.
    pub(super) fn trace_forget_podgroup(&self, namespace: &str, name: &str) {
        if let Some(trace) = self.trace.get() {
            trace.forget_podgroup(namespace, name);
        }
    }
}
