//! `/bind`: node lock, bind phase, Binding; every failure rolls back.

use super::bind_patch::{Held, bind_writes, carries_allocation};
use super::{PodContext, Scheduler, clear_allocation_patch};
use crate::cluster::api::EventType;
use crate::device::model::PodDevices;
use crate::extender::wire::{ExtenderBindingArgs, ExtenderBindingResult};
use crate::ledger::PodPhase;
use crate::node_lock;
use crate::node_lock::mode::NodeLockMode;
use k8s_openapi::api::core::v1::Pod;
use std::sync::Arc;

impl Scheduler {
    /// `/bind`.
    pub async fn bind(&self, args: ExtenderBindingArgs) -> ExtenderBindingResult {
        let (Some(name), Some(namespace), Some(uid), Some(node)) = (
            args.pod_name.filter(|s| !s.is_empty()),
            args.pod_namespace.filter(|s| !s.is_empty()),
            args.pod_uid.filter(|s| !s.is_empty()),
            args.node.filter(|s| !s.is_empty()),
        ) else {
            return ExtenderBindingResult {
                error: "bind args need PodName, PodNamespace, PodUID and Node".into(),
            };
        };
        let result = self.bind_pod(&namespace, &name, &uid, &node).await;
        match result {
            Ok(()) => {
                self.metrics.bind_outcome("bound");
                ExtenderBindingResult::default()
            }
            Err(error) => {
                self.metrics.bind_outcome("failed");
                tracing::warn!(pod = %format!("{namespace}/{name}"), node = %node, %error, "bind failed");
                self.event(
                    (&namespace, &name, &uid),
                    EventType::Warning,
                    "BindingFailed",
                    error.clone(),
                )
                .await;
                ExtenderBindingResult { error }
            }
        }
    }

    async fn bind_pod(&self, ns: &str, name: &str, uid: &str, node: &str) -> Result<(), String> {
        let result = self.bind_known_pod(ns, name, uid, node).await;
        self.pod_copies.drop_copy(uid);
        result
    }

    /// The pod to bind: the copy `/filter` was sent (kept current by the watch),
    /// else read from the API server.
    async fn pod_to_bind(&self, ns: &str, name: &str, uid: &str) -> Result<Arc<Pod>, String> {
        if let Some(pod) = self.pod_copies.get(uid).filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(name)
        }) {
            return Ok(pod);
        }
        match self.api.get_pod(ns, name).await {
            Ok(Some(pod)) => Ok(Arc::new(pod)),
            Ok(None) => {
                self.ledger.write().mark_finished(uid);
                Err(format!("pod \"{name}\" not found"))
            }
            Err(e) => Err(format!("get pod {ns}/{name}: {e}")),
        }
    }

    async fn bind_known_pod(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        node: &str,
    ) -> Result<(), String> {
        let started = self.clock.now();
        let pod = self.pod_to_bind(ns, name, uid).await?;
        let pod = pod.as_ref();
        if pod.metadata.uid.as_deref() != Some(uid) {
            // A newer pod with the same name: the request is stale, and the pod
            // with this UID is gone for good.
            self.ledger.write().mark_finished(uid);
            return Err(format!(
                "pod {ns}/{name} has UID {}, not {uid}: it was recreated",
                pod.metadata.uid.as_deref().unwrap_or("")
            ));
        }
        if let Some(bound) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            if bound == node {
                // Idempotent: a retry after a bind whose answer was lost.
                self.ledger.write().mark_bound(uid);
                return Ok(());
            }
            return Err(format!("pod {ns}/{name} is already bound to node {bound}"));
        }
        let ctx = self.pod_context(pod)?;
        // Allocation annotations the pod already carries are cleared if the bind fails.
        let carried = carries_allocation(pod);
        // The API server accepts a Binding to any name, even a node that does not
        // exist; a node the ledger does not know is one whose GPUs nobody counts.
        // Like every failed bind, this one gives back what the pod holds, or its
        // reservation would block the GPUs until it expired.
        if self.ledger.read().node(node).is_none() {
            self.roll_back(ctx.as_ref(), ns, name, node, false, carried)
                .await;
            return Err(format!(
                "node \"{node}\" not found: it is not a node this scheduler knows"
            ));
        }

        // Strict gangs wait here, before any per-node turn is taken, so members on
        // the same node cannot block each other. The reservation is marked
        // `Binding` first so it cannot expire while the member waits.
        {
            let mut ledger = self.ledger.write();
            if ledger
                .pod(uid)
                .is_some_and(|p| p.node == node && matches!(p.phase, PodPhase::Reserved { .. }))
            {
                ledger.set_phase(uid, PodPhase::Binding);
            }
        }
        // Held until the bind ends, so a member counts toward its gang's quorum
        // while its bind is in flight.
        let _passage = match self.gang_bind_barrier(pod).await {
            Ok(passage) => passage,
            Err(e) => {
                self.roll_back(ctx.as_ref(), ns, name, node, false, carried)
                    .await;
                return Err(e);
            }
        };

        // Binds for one node take turns in arrival order: only one pod per node
        // may be between its bind and the device plugin's answer.
        let mut turn = match self.wait_for_turn(node, started).await {
            Ok(turn) => turn,
            Err(e) => {
                self.roll_back(ctx.as_ref(), ns, name, node, false, carried)
                    .await;
                return Err(e);
            }
        };

        // The pod read above may be older than a bind of the same pod that ran
        // meanwhile (a request repeated while this one waited at the barrier or
        // for its turn): undoing anything then would release a bound pod's GPUs.
        let bound = self
            .ledger
            .read()
            .pod(uid)
            .filter(|p| matches!(p.phase, PodPhase::Bound))
            .map(|p| p.node.clone());
        if let Some(bound) = bound {
            if bound == node {
                return Ok(());
            }
            return Err(format!("pod {ns}/{name} is already bound to node {bound}"));
        }

        let devices = match &ctx {
            Some(ctx) => Some(self.ensure_reservation(ctx, node)?),
            None => None,
        };
        // Only pods with GPUs take the node lock: HAMi's device plugin releases it
        // in Allocate, which never runs for a pod without GPUs.
        let locked = ctx.is_some();
        if locked
            && let Err(e) = self
                .lock_node(&mut turn, node, (uid, ns, name), started)
                .await
        {
            self.roll_back(ctx.as_ref(), ns, name, node, false, carried)
                .await;
            return Err(e.to_string());
        }
        // Under the lock, against what the watch shows now: while this bind
        // waited, a pod another replica placed may have been bound to the GPUs
        // chosen here, and displaced this pod's reservation (see
        // `yielding_reservations`). Choose again on this node, or fail cleanly.
        let devices = match (&ctx, devices) {
            (Some(ctx), Some(_)) => match self.ensure_reservation(ctx, node) {
                Ok(devices) => Some(devices),
                Err(e) => {
                    self.roll_back(Some(ctx), ns, name, node, locked, carried)
                        .await;
                    return Err(e);
                }
            },
            (_, devices) => devices,
        };
        let writes = bind_writes(
            pod,
            devices.as_ref().map(|devices| Held { node, devices }),
            self.config.gang.enabled,
            self.clock.wall(),
        );
        // Only a pod carrying what this placement removes is patched first.
        let patched = !writes.removals.annotations.is_empty() || !writes.removals.labels.is_empty();
        if patched
            && let Err(e) = self
                .api
                .patch_pod_metadata(ns, name, &writes.removals)
                .await
        {
            // The write may have taken effect although it answered an error.
            self.roll_back(ctx.as_ref(), ns, name, node, locked, true)
                .await;
            return Err(format!(
                "patch pod {ns}/{name} to remove an earlier placement: {e}"
            ));
        }
        let labelled = writes
            .binding
            .labels
            .contains_key(crate::annotations::VGPU_NODE);
        if labelled && self.api.reports_changes() {
            self.binding_labels.await_bound(uid, node);
        }
        if let Err(e) = self
            .api
            .bind_pod(ns, name, uid, node, &writes.binding)
            .await
        {
            match self.binding_outcome(ns, name, uid, node).await {
                BindingOutcome::Bound => {
                    tracing::info!(pod = %format!("{ns}/{name}"), node, error = %e, "the Binding answered an error but took effect");
                }
                BindingOutcome::NotBound => {
                    // A Binding that did not take effect set nothing on the pod.
                    self.binding_labels.forget(uid);
                    self.roll_back(ctx.as_ref(), ns, name, node, locked, carried || patched)
                        .await;
                    return Err(format!("bind pod {ns}/{name} to {node}: {e}"));
                }
                BindingOutcome::Unknown(read) => {
                    // The pod may be bound: keep its GPUs booked (the watch settles
                    // it either way) but do not leave the node locked for others.
                    // A claim under `--node-lock pods` stays: were the pod bound,
                    // a second pod allocating there would be given its GPUs; the
                    // watch ends it once the pod is answered, gone or bound anew.
                    if locked
                        && self.config.node_lock == NodeLockMode::Node
                        && let Err(e) = node_lock::release(self.api.as_ref(), node, ns, name).await
                    {
                        tracing::warn!(node, error = %e, "could not release node lock after a bind of unknown outcome");
                    }
                    return Err(format!(
                        "bind pod {ns}/{name} to {node}: {e}; reading the pod back failed ({read}), so its GPUs stay booked until the pod is seen bound or gone"
                    ));
                }
            }
        }
        self.ledger.write().mark_bound(uid);
        self.gang_bound(pod, node);
        self.trace_bound(uid, node);
        self.event(
            (ns, name, uid),
            EventType::Normal,
            "BindingSucceed",
            format!("Successfully binding node [{node}] to {ns}/{name}"),
        )
        .await;
        Ok(())
    }

    /// Makes sure the pod holds GPUs on `node` and returns them: the `/filter`
    /// reservation, or (filter mode `all`, an expired reservation, another node
    /// chosen, a restart since `/filter`) a fresh one, which fails cleanly when the
    /// pod no longer fits there. The hold is then marked `Binding`, so it cannot
    /// expire while the bind waits for the lock.
    fn ensure_reservation(&self, ctx: &PodContext, node: &str) -> Result<PodDevices, String> {
        {
            let mut ledger = self.ledger.write();
            let here = ledger
                .pod(&ctx.uid)
                .filter(|p| p.node == node)
                .map(|p| (p.devices.clone(), matches!(p.phase, PodPhase::Binding)));
            if let Some((devices, binding)) = here {
                if !binding {
                    ledger.set_phase(&ctx.uid, PodPhase::Binding);
                }
                return Ok(devices);
            }
            ledger.remove_pod(&ctx.uid);
        }
        let placement = self
            .reserve(ctx, node)
            .map_err(|reason| format!("node {node} cannot take the pod: {reason}"))?;
        self.ledger.write().set_phase(&ctx.uid, PodPhase::Binding);
        Ok(placement.devices)
    }

    /// Whether a Binding that answered an error took effect anyway: the error may
    /// come from a timeout or a proxy after the API server committed it, or be a
    /// conflict because a repeated request already bound the pod. Undoing the
    /// reservation of a bound pod would free GPUs the device plugin is handing out.
    async fn binding_outcome(&self, ns: &str, name: &str, uid: &str, node: &str) -> BindingOutcome {
        match self.api.get_pod(ns, name).await {
            Ok(Some(pod))
                if pod.metadata.uid.as_deref() == Some(uid)
                    && pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node) =>
            {
                BindingOutcome::Bound
            }
            Ok(_) => BindingOutcome::NotBound,
            Err(e) => BindingOutcome::Unknown(e.to_string()),
        }
    }

    async fn roll_back(
        &self,
        ctx: Option<&PodContext>,
        ns: &str,
        name: &str,
        node: &str,
        locked: bool,
        annotated: bool,
    ) {
        if locked && let Some(ctx) = ctx {
            self.unlock_node(node, (&ctx.uid, ns, name)).await;
        }
        if let Some(ctx) = ctx {
            // A repeated request failing after the pod was bound by another one
            // leaves the bound pod's GPUs and annotations alone.
            let released = {
                let mut ledger = self.ledger.write();
                let bound = ledger
                    .pod(&ctx.uid)
                    .is_some_and(|p| matches!(p.phase, PodPhase::Bound));
                if !bound {
                    ledger.mark_local_released(&ctx.uid);
                }
                !bound
            };
            // Nothing of the placement was written: nothing to clear.
            if !released || !annotated {
                return;
            }
            if let Err(e) = self
                .api
                .patch_pod_metadata(ns, name, &clear_allocation_patch())
                .await
            {
                tracing::debug!(pod = name, error = %e, "could not clear allocation annotations after a failed bind");
            }
        }
    }
}

/// What reading a pod back says about a Binding that answered an error.
enum BindingOutcome {
    Bound,
    NotBound,
    /// The pod could not be read.
    Unknown(String),
}
