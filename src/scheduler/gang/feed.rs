//! Feeding the gang book from watch events (pods, PodGroups, Queues), waking the
//! planner when something it cares about changed.

use crate::gang::book::{MemberPhase, member_of};
use crate::scheduler::Scheduler;
use crate::volcano::objects::{PodGroupSpec, QueueSpec};
use k8s_openapi::api::core::v1::Pod;
use std::collections::HashSet;

impl Scheduler {
    /// Applies a PodGroup (JSON as the API serves it).
    pub fn apply_podgroup(&self, object: &serde_json::Value) {
        match PodGroupSpec::from_json(object) {
            Ok(group) => {
                self.trace_podgroup(&group.namespace, &group.name, object);
                self.gang.book.write().apply_group(group);
                self.gang.wake.notify_one();
            }
            Err(e) => tracing::warn!(error = %e, "ignoring unreadable PodGroup"),
        }
    }

    /// Forgets a deleted PodGroup.
    pub fn forget_podgroup(&self, namespace: &str, name: &str) {
        self.trace_forget_podgroup(namespace, name);
        self.gang.book.write().forget_group(namespace, name);
        self.gang.wake.notify_one();
    }

    /// Applies a PodGroup of either API, told apart by its `apiVersion` (the
    /// cluster file holds both).
    pub fn apply_any_podgroup(&self, object: &serde_json::Value) {
        if crate::gang::native_group::is_native(object) {
            self.apply_native_podgroup(object);
        } else {
            self.apply_podgroup(object);
        }
    }

    /// Applies one of Kubernetes' own PodGroups (`scheduling.k8s.io`), completed
    /// from the Workload template it was made from where that is known.
    pub fn apply_native_podgroup(&self, object: &serde_json::Value) {
        let completed = self.gang.native_sources.lock().podgroup(object);
        self.read_native_podgroup(&completed);
        self.gang.wake.notify_one();
    }

    fn read_native_podgroup(&self, object: &serde_json::Value) {
        match crate::gang::native_group::podgroup_from_json(object) {
            Ok(group) => {
                // Recorded as completed, so a replay needs no Workload.
                self.trace_podgroup(&group.namespace, &group.name, object);
                self.gang.book.write().apply_native_group(group);
            }
            Err(e) => tracing::warn!(error = %e, "ignoring unreadable scheduling.k8s.io PodGroup"),
        }
    }

    /// Forgets one of Kubernetes' own PodGroups.
    pub fn forget_native_podgroup(&self, namespace: &str, name: &str) {
        self.gang
            .native_sources
            .lock()
            .forget_podgroup(namespace, name);
        self.trace_forget_podgroup(namespace, name);
        self.gang.book.write().forget_native_group(namespace, name);
        self.gang.wake.notify_one();
    }

    /// Applies a Workload (`scheduling.k8s.io`): the PodGroups made from its
    /// templates are read again, completed from them.
    pub fn apply_workload(&self, object: &serde_json::Value) {
        let podgroups = self.gang.native_sources.lock().workload(object);
        for podgroup in &podgroups {
            self.read_native_podgroup(podgroup);
        }
        self.gang.wake.notify_one();
    }

    /// Forgets a Workload: the PodGroups made from it are read as they are.
    pub fn forget_workload(&self, namespace: &str, name: &str) {
        let podgroups = self
            .gang
            .native_sources
            .lock()
            .forget_workload(namespace, name);
        for podgroup in &podgroups {
            self.read_native_podgroup(podgroup);
        }
        self.gang.wake.notify_one();
    }

    /// Applies a Queue (JSON as the API serves it).
    pub fn apply_queue(&self, object: &serde_json::Value) {
        match QueueSpec::from_json(object) {
            Ok(queue) => {
                let mut book = self.gang.book.write();
                // Status writes (ours every cycle) change nothing the plugins read.
                if book.queues.get(&queue.name) != Some(&queue) {
                    book.apply_queue(queue);
                    self.queues_changed(&book);
                }
                drop(book);
                self.gang.wake.notify_one();
            }
            Err(e) => {
                let name = object
                    .pointer("/metadata/name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("");
                tracing::warn!(queue = name, error = %e, "queue is unreadable; it admits nothing until fixed");
                let mut book = self.gang.book.write();
                book.queue_error(name, e.to_string());
                self.queues_changed(&book);
            }
        }
    }

    /// Forgets a deleted Queue.
    pub fn forget_queue(&self, name: &str) {
        self.metrics.forget_queue(name);
        let mut book = self.gang.book.write();
        book.forget_queue(name);
        self.queues_changed(&book);
        drop(book);
        self.gang.wake.notify_one();
    }

    /// Feeds a pod event to the gang book: the pod as the cluster shows it (the
    /// watch, the cluster file), so no longer one known only from `/filter`.
    pub(crate) fn gang_apply_pod(&self, pod: &Pod) {
        self.feed_member(pod, Source::Cluster);
    }

    /// Feeds the gang book a pod as a `/filter` request shows it: known only
    /// from the request unless the cluster showed it already.
    pub(super) fn gang_apply_filtered_pod(&self, pod: &Pod) {
        self.feed_member(pod, Source::Filter);
    }

    fn feed_member(&self, pod: &Pod, source: Source) {
        if !self.config.gang.enabled {
            return;
        }
        let member = member_of(pod);
        if member.is_none() {
            // The common case, on every pod event: only touch the locks when the
            // pod used to be a member.
            let Some(uid) = pod.metadata.uid.as_deref() else {
                return;
            };
            if self.gang.book.read().members().contains_key(uid) {
                self.gang_forget_pod(uid);
            }
            return;
        }
        if let Some(uid) = pod.metadata.uid.as_deref() {
            let mut planned = self.gang.planned.lock();
            // A copy without the plan annotation may be older than our write, so
            // only a pod that left Pending (or the gang) ends its plan here.
            match &member {
                Some(m) if m.phase == MemberPhase::Pending => {
                    if m.plan_deadline.is_some() {
                        planned.insert(uid.to_string());
                    }
                }
                _ => {
                    planned.remove(uid);
                }
            }
        }
        let mut book = self.gang.book.write();
        match member {
            Some(m) => {
                let relevant = m.gated || m.phase != MemberPhase::Pending;
                let mut filter_only = self.gang.filter_only.lock();
                match source {
                    Source::Cluster => filter_only.forget(&m.uid),
                    Source::Filter => {
                        let shown_by_cluster =
                            book.members().contains_key(&m.uid) && !filter_only.contains(&m.uid);
                        if !shown_by_cluster {
                            filter_only.saw(&m.uid, &m.namespace, &m.name, self.clock.now());
                        }
                    }
                }
                drop(filter_only);
                book.insert_member(m);
                if relevant {
                    self.gang.wake.notify_one();
                }
            }
            None => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    book.forget_pod(uid);
                    self.gang.filter_only.lock().forget(uid);
                }
            }
        }
    }

    pub(crate) fn gang_forget_pod(&self, uid: &str) {
        self.gang.planned.lock().remove(uid);
        let mut book = self.gang.book.write();
        self.gang.filter_only.lock().forget(uid);
        if book.forget_pod(uid) {
            self.gang.wake.notify_one();
        }
    }

    pub(crate) fn gang_forget_plan(&self, uid: &str) {
        self.gang.planned.lock().remove(uid);
    }

    pub(crate) fn gang_retain_pods(&self, existing: &HashSet<String>) {
        let mut book = self.gang.book.write();
        book.retain_pods(existing);
        self.gang
            .filter_only
            .lock()
            .retain(|uid| book.members().contains_key(uid));
    }
}

/// Where a pod event comes from.
#[derive(Clone, Copy)]
enum Source {
    /// The cluster showed the pod (the watch, the cluster file).
    Cluster,
    /// A `/filter` request named it.
    Filter,
}
