//! `--node-lock pods`: a node takes one pod at a time for the device plugin
//! without a lock annotation (see `node_lock::mode`). A bind claims its node in
//! this process; the pod watch ends the claim once the device plugin answered.

use super::Scheduler;
use crate::node_lock::mode::NodeLockMode;
use crate::node_lock::{self, LockError};
use k8s_openapi::api::core::v1::Pod;

impl Scheduler {
    fn pods_hold_nodes(&self) -> bool {
        self.config.node_lock == NodeLockMode::Pods
    }

    /// Claims `node` for the pod `uid` (`ns/name`) about to be bound there:
    /// contention while another pod bound there is still allocating, or while
    /// another binder's lock annotation holds the node.
    pub(super) async fn claim_node(
        &self,
        node: &str,
        uid: &str,
        ns: &str,
        name: &str,
    ) -> Result<(), LockError> {
        let timeout = self.config.node_lock_timeout;
        let contention = |holder: String| LockError::Contention {
            node: node.to_string(),
            timeout,
            holder,
        };
        let known = self.lock_knowledge();
        let now = self.clock.wall();
        if let Some(holder) =
            node_lock::foreign_holder(self.api.as_ref(), known, now, node, (ns, name), timeout)
                .await?
        {
            return Err(contention(holder));
        }
        self.allocating_pods
            .claim(node, (uid, ns, name), now, timeout)
            .map_err(|held| contention(held.holder))?;
        self.lock_handoff.claimed(node, self.clock.now(), true);
        Ok(())
    }

    /// Under `--node-lock pods`, the pods each node holds for the device
    /// plugin (`namespace/name`), as `/debug/state` shows them.
    pub(super) fn allocating_pods_by_node(
        &self,
    ) -> Option<std::collections::BTreeMap<String, Vec<String>>> {
        self.pods_hold_nodes()
            .then(|| self.allocating_pods.holders())
    }

    /// The pod's bind failed or the pod is gone: its node, if it held one
    /// under `--node-lock pods`, may take the next pod.
    pub(super) fn give_up_node_claim(&self, uid: &str) {
        if !self.pods_hold_nodes() {
            return;
        }
        if let Some(node) = self.allocating_pods.release(uid) {
            self.lock_handoff.claim_ended(&node, self.clock.now());
        }
    }

    /// Follows a pod the watch shows: one the device plugin answered, finished
    /// or bound elsewhere ends its node's claim; one allocating that no bind
    /// here claimed (bound before a restart, or by another binder) holds its
    /// node from now on.
    pub(super) fn follow_allocating_pod(&self, pod: &Pod) {
        if !self.pods_hold_nodes() {
            return;
        }
        let followed = self.allocating_pods.observe(pod, self.clock.wall());
        if let Some(node) = followed.freed {
            self.lock_handoff.claim_ended(&node, self.clock.now());
        }
        if let Some(node) = followed.newly_held {
            // `/filter` then counts the node busy, as it would a lock it saw.
            self.lock_handoff.claimed(&node, self.clock.now(), false);
        }
    }
}
