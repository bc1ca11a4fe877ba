//! Members alike fail alike. A gang's members are usually copies of one
//! template: when one of them fits no node, the next one asking exactly the same
//! of exactly the same nodes fails the same way, node by node, so judging every
//! node again for it changes nothing but the time taken (a gang of ten on a
//! thousand full nodes is ten thousand node checks for one answer). Volcano's
//! allocate skips the rest of a task role once one of its tasks failed its
//! predicates; here the later member is noted with the earlier one's reason, so
//! what the gang waits with reads as if each member had been judged.
//!
//! What makes two tasks alike is everything the node choice and the queue's
//! allocatable check read of a task: its namespace, its pod's spec, labels and
//! annotations (predicates, inter-pod affinity, device selectors), its requests
//! and charge, and its parsed vGPU request. Names and UIDs differ and are read
//! by neither. A placement changes the nodes and the queue the next member is
//! judged against, so it forgets every failure seen before it.

use crate::volcano::framework::job::GpuAsk;
use crate::volcano::framework::{GangKey, Session, TaskInfo};
use std::sync::Arc;

/// Distinct failures remembered: members of a gang come from a few templates,
/// and a gang of many distinct members should not compare each with all.
const REMEMBERED: usize = 4;

/// The members of one attempt that could not be placed since its last
/// placement, with why.
#[derive(Default)]
pub(super) struct AlikeFailures {
    failed: Vec<(String, String)>,
}

impl AlikeFailures {
    /// Why an earlier member alike to `uid` (of job `key`) could not be placed,
    /// when one could not since the last placement.
    pub fn earlier(&self, session: &Session, key: &GangKey, uid: &str) -> Option<String> {
        let task = session.state.task(key, uid)?;
        self.failed.iter().find_map(|(other, reason)| {
            let other = session.state.task(key, other)?;
            alike(task, other).then(|| reason.clone())
        })
    }

    /// `uid` could not be placed, for `reason`.
    pub fn failed(&mut self, uid: &str, reason: &str) {
        if self.failed.len() == REMEMBERED {
            self.failed.remove(0);
        }
        self.failed.push((uid.to_string(), reason.to_string()));
    }

    /// A member was placed: the nodes and the queue changed.
    pub fn placed(&mut self) {
        self.failed.clear();
    }
}

/// Whether the node choice and the allocatable check cannot tell `a` from `b`.
fn alike(a: &TaskInfo, b: &TaskInfo) -> bool {
    a.namespace == b.namespace
        && a.resreq == b.resreq
        && a.requests == b.requests
        && a.cards == b.cards
        && same_gpu_ask(&a.gpu, &b.gpu)
        && (Arc::ptr_eq(&a.pod, &b.pod)
            || (a.pod.metadata.namespace == b.pod.metadata.namespace
                && a.pod.metadata.labels == b.pod.metadata.labels
                && a.pod.metadata.annotations == b.pod.metadata.annotations
                && a.pod.spec == b.pod.spec))
}

/// Whether two vGPU asks are fitted alike (the pod's UID and name, which the
/// parse also keeps, are not read by the fit).
fn same_gpu_ask(a: &GpuAsk, b: &GpuAsk) -> bool {
    match (a, b) {
        (GpuAsk::None, GpuAsk::None) => true,
        (GpuAsk::Invalid(x), GpuAsk::Invalid(y)) => x == y,
        (GpuAsk::Vgpu(x), GpuAsk::Vgpu(y)) => {
            Arc::ptr_eq(x, y)
                || (x.namespace == y.namespace
                    && x.request == y.request
                    && x.policies == y.policies
                    && x.selectors == y.selectors)
        }
        _ => false,
    }
}
