//! Feeding the gang book the namespaces' ResourceQuotas, which the `resourcequota`
//! plugin checks a job's minimum against before admitting it. The same objects
//! set HAMi's namespace vGPU limits in the ledger; both are fed from the one
//! ResourceQuota watch (or cluster file) through `Scheduler::apply_quota`.

use crate::scheduler::Scheduler;
use crate::volcano::resource_quota::NamespaceQuota;
use k8s_openapi::api::core::v1::ResourceQuota;
use std::collections::HashSet;

impl Scheduler {
    /// Records a ResourceQuota's hard limits and usage for admission. A change
    /// wakes the planner: a raised quota may admit a job that waits for it.
    pub(crate) fn apply_namespace_quota(&self, quota: &ResourceQuota) {
        let quota = NamespaceQuota::of(quota);
        let key = (quota.namespace.clone(), quota.name.clone());
        let changed = {
            let mut book = self.gang.book.write();
            let changed = book.resource_quotas.get(&key) != Some(&quota);
            book.resource_quotas.insert(key, quota);
            changed
        };
        if changed {
            self.gang.wake.notify_one();
        }
    }

    /// Forgets a deleted ResourceQuota.
    pub(crate) fn forget_namespace_quota(&self, namespace: &str, name: &str) {
        let removed = self
            .gang
            .book
            .write()
            .resource_quotas
            .remove(&(namespace.to_string(), name.to_string()));
        if removed.is_some() {
            self.gang.wake.notify_one();
        }
    }

    /// Keeps only the quotas in `existing` (after a relist).
    pub(crate) fn retain_namespace_quotas(&self, existing: &HashSet<(String, String)>) {
        self.gang
            .book
            .write()
            .resource_quotas
            .retain(|key, _| existing.contains(key));
    }
}
