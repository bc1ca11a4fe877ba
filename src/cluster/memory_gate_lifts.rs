//! Gate lifts kept beside a stored pod's JSON. The planner lifts a gate from
//! every pod it releases, and rewriting the pod's JSON for that cost a decode
//! and an encode of the whole pod, about a tenth of a queue pod's planning
//! cycle in a replay. A lift is written down instead (the gate, the node it
//! pinned the pod to, its label changes) and applied when the pod is next read,
//! which for a released pod is when it is bound.

use crate::gang::pin::pin_to_node;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// Label or annotation changes: a value to set, or `None` to remove the key.
pub(super) type Changes = BTreeMap<String, Option<String>>;

/// A pod's scheduling gates as its JSON holds them, and the lifts not yet
/// applied to that JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct GateLifts {
    /// The gates the pod still holds, in order.
    gates: Vec<String>,
    /// Lifts since the JSON was encoded, oldest first.
    lifts: Vec<Lift>,
}

#[derive(Debug, Clone, PartialEq)]
struct Lift {
    gate: String,
    /// The node the pod was pinned to; only when the gate was still held.
    pin: Option<String>,
    labels: Changes,
}

impl GateLifts {
    /// The gates of `pod`, or `None` when its spec lists none (a lift on it
    /// is then applied to its JSON at once).
    pub(super) fn of(pod: &Pod) -> Option<Box<Self>> {
        let gates = pod.spec.as_ref()?.scheduling_gates.as_ref()?;
        Some(Box::new(Self {
            gates: gates.iter().map(|g| g.name.clone()).collect(),
            lifts: Vec::new(),
        }))
    }

    /// Lifts `gate`, pinning the pod to `pin` if the gate was still held and
    /// setting `labels` either way (as one update of the pod would); whether
    /// the gate was held.
    pub(super) fn lift(&mut self, gate: &str, pin: Option<&str>, labels: &Changes) -> bool {
        let held = self.gates.iter().any(|g| g == gate);
        self.gates.retain(|g| g != gate);
        self.lifts.push(Lift {
            gate: gate.to_owned(),
            pin: pin.filter(|_| held).map(str::to_owned),
            labels: labels.clone(),
        });
        held
    }

    /// Brings `pod`, decoded from the JSON these lifts were kept beside, to
    /// what the lifts made of it, in the order they were made.
    pub(super) fn apply(&self, pod: &mut Pod) {
        for lift in &self.lifts {
            super::apply(&mut pod.metadata.labels, &lift.labels);
            let Some(spec) = pod.spec.as_mut() else {
                continue;
            };
            if let Some(node) = &lift.pin {
                pin_to_node(spec, node);
            }
            if let Some(gates) = spec.scheduling_gates.as_mut() {
                gates.retain(|g| g.name != lift.gate);
                if gates.is_empty() {
                    spec.scheduling_gates = None;
                }
            }
        }
    }
}
