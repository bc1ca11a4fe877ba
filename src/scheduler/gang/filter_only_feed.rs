//! Letting go of gang and queue pods known only from `/filter` (see
//! `gang::filter_only`): those not asked about for a while, and the oldest beyond
//! the limit, leave the gang book and the cluster file's store, so neither grows
//! with every pod a client ever named and `/filter`'s planning stays as cheap as
//! the pods that are really waiting make it.

use crate::gang::book::MemberPhase;
use crate::gang::filter_only::Dropped;
use crate::scheduler::Scheduler;
use k8s_openapi::api::core::v1::Pod;

impl Scheduler {
    /// `/filter` named a gang or queue pod: the book learns it (as known only
    /// from `/filter` unless the cluster showed it), and what is stale goes.
    pub(super) async fn gang_learn_from_filter(&self, pod: &Pod) {
        self.gang_apply_filtered_pod(pod);
        self.drop_stale_filter_only_pods().await;
    }

    /// Forgets the pods known only from `/filter` that were not asked about
    /// within the time to live, and the oldest beyond the limit; never one that
    /// holds GPUs, a pledge or a plan, or is on a node. Returns how many went.
    pub(crate) async fn drop_stale_filter_only_pods(&self) -> usize {
        if !self.config.gang.enabled {
            return 0;
        }
        let limits = self.config.gang.filter_only;
        let now = self.clock.now();
        let (dropped, kept): (Vec<Dropped>, usize) = {
            let mut book = self.gang.book.write();
            let mut filter_only = self.gang.filter_only.lock();
            let ledger = self.ledger.read();
            let dropped = filter_only.take_stale(now, limits, |uid| {
                ledger.pod(uid).is_some()
                    || ledger.pledge_of(uid).is_some()
                    || book
                        .members()
                        .get(uid)
                        .is_some_and(|m| m.phase != MemberPhase::Pending)
                    || self.gang.planned.lock().contains(uid)
            });
            for d in &dropped {
                book.forget_pod(&d.uid);
            }
            (dropped, filter_only.len())
        };
        self.metrics.filter_only_pods.set(kept as i64);
        for d in &dropped {
            tracing::debug!(pod = %format!("{}/{}", d.namespace, d.name), reason = d.reason.label(), "forgot a gang pod known only from /filter");
            self.metrics.filter_only_pod_dropped(d.reason.label());
            self.api.forget_pod(&d.namespace, &d.name).await;
        }
        if !dropped.is_empty() {
            self.gang.wake.notify_one();
        }
        dropped.len()
    }
}
