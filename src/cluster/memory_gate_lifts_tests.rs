//! A gate lift is noted beside a stored pod's JSON instead of rewriting it; the
//! pod read back must be the one a rewrite would have stored: every lift, label,
//! annotation and pin in the order they were made.

use super::MemoryCluster;
use crate::cluster::api::{BindingMetadata, ClusterApi, GateLift, MetadataPatch};
use crate::gang::pin::{is_pinned_to, pin_to_node};
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const GATES: [&str; 3] = ["example.com/a", "example.com/b", "example.com/c"];
const NODES: [&str; 2] = ["n1", "n2"];
const KEYS: [&str; 3] = ["k0", "k1", "k2"];

type Changes = BTreeMap<String, Option<String>>;

fn pod(gates: Option<&[usize]>, zone_affinity: bool) -> Pod {
    let mut spec = json!({"containers": [{"name": "c"}]});
    if let Some(gates) = gates {
        spec["schedulingGates"] = gates.iter().map(|g| json!({"name": GATES[*g]})).collect();
    }
    if zone_affinity {
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
        ]}}});
    }
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ml", "uid": "uid-p",
                     "labels": {"k0": "first"}, "annotations": {"k1": "first"}},
        "spec": spec
    }))
    .expect("pod")
}

/// A pod as the store shows it: maps left empty by removals are absent.
fn shown(pod: &Pod) -> Value {
    let mut value = serde_json::to_value(pod).expect("encode");
    for map in ["labels", "annotations"] {
        if value["metadata"][map]
            .as_object()
            .is_some_and(|m| m.is_empty())
        {
            value["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove(map);
        }
    }
    value
}

fn apply(map: &mut Option<BTreeMap<String, String>>, changes: &Changes) {
    let map = map.get_or_insert_with(BTreeMap::new);
    for (k, v) in changes {
        match v {
            Some(v) => map.insert(k.clone(), v.clone()),
            None => map.remove(k),
        };
    }
}

/// A gate lift as one update of the whole pod makes it.
fn lifted(pod: &mut Pod, gate: &str, pin: Option<&str>, metadata: &MetadataPatch) {
    apply(&mut pod.metadata.annotations, &metadata.annotations);
    apply(&mut pod.metadata.labels, &metadata.labels);
    let spec = pod.spec.as_mut().expect("spec");
    if let Some(node) = pin
        && spec
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| g.iter().any(|g| g.name == gate))
    {
        pin_to_node(spec, node);
    }
    if let Some(gates) = spec.scheduling_gates.as_mut() {
        gates.retain(|g| g.name != gate);
        if gates.is_empty() {
            spec.scheduling_gates = None;
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Lift {
        gate: usize,
        pin: Option<usize>,
        metadata: MetadataPatch,
    },
    Patch(MetadataPatch),
}

fn changes() -> impl Strategy<Value = Changes> {
    proptest::collection::btree_map(
        (0..KEYS.len()).prop_map(|k| KEYS[k].to_owned()),
        proptest::option::of("[a-z]{1,3}"),
        0..3,
    )
}

fn metadata() -> impl Strategy<Value = MetadataPatch> {
    (changes(), changes()).prop_map(|(annotations, labels)| MetadataPatch {
        annotations,
        labels,
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..GATES.len(), proptest::option::of(0..NODES.len()), metadata())
            .prop_map(|(gate, pin, metadata)| Step::Lift { gate, pin, metadata }),
        1 => metadata().prop_map(Step::Patch),
    ]
}

fn gates() -> impl Strategy<Value = Option<Vec<usize>>> {
    proptest::option::of(proptest::sample::subsequence(vec![0, 1, 2], 0..=3))
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(future)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// After every lift and metadata patch, the pod read back is the pod a
    /// rewrite of the whole object would have stored, and a lift is recorded
    /// exactly when it took a gate away.
    #[test]
    fn a_pod_reads_back_as_rewritten(
        gates in gates(),
        zone_affinity in any::<bool>(),
        steps in proptest::collection::vec(step(), 1..8),
    ) {
        block_on(async {
            let mut expected = pod(gates.as_deref(), zone_affinity);
            let store = MemoryCluster::new(Vec::new(), Vec::new(), false).recording_lifted_gates();
            store.insert_pod(&expected);
            for step in &steps {
                match step {
                    Step::Lift { gate, pin, metadata } => {
                        let held = expected
                            .spec
                            .as_ref()
                            .and_then(|s| s.scheduling_gates.as_ref())
                            .is_some_and(|g| g.iter().any(|g| g.name == GATES[*gate]));
                        let pin = pin.map(|n| NODES[n]);
                        lifted(&mut expected, GATES[*gate], pin, metadata);
                        let lift = GateLift { gate: GATES[*gate], pin, metadata, seen: None };
                        store.remove_scheduling_gate("ml", "p", &lift).await.expect("lift");
                        let recorded = store.take_lifted_gates();
                        prop_assert_eq!(recorded.len(), usize::from(held));
                    }
                    Step::Patch(metadata) => {
                        apply(&mut expected.metadata.annotations, &metadata.annotations);
                        apply(&mut expected.metadata.labels, &metadata.labels);
                        store.patch_pod_metadata("ml", "p", metadata).await.expect("patch");
                    }
                }
                let read = store.get_pod("ml", "p").await.expect("read").expect("stored");
                prop_assert_eq!(shown(&read), shown(&expected));
            }
            Ok(())
        })?;
    }
}

/// A pod released with a pin is bound there, and its stored copy shows the
/// node and no gate; binding it again is refused as the API server refuses it.
#[tokio::test]
async fn a_pod_lifted_and_pinned_is_bound_with_the_lift() {
    let store = MemoryCluster::new(Vec::new(), Vec::new(), false);
    store.insert_node(serde_json::from_value(json!({"metadata": {"name": "n1"}})).expect("node"));
    store.insert_pod(&pod(Some(&[0]), false));
    let mut metadata = MetadataPatch::default();
    metadata
        .labels
        .insert("team".to_owned(), Some("research".to_owned()));
    let lift = GateLift {
        gate: GATES[0],
        pin: Some("n1"),
        metadata: &metadata,
        seen: None,
    };
    store
        .remove_scheduling_gate("ml", "p", &lift)
        .await
        .expect("lift");
    let released = store.get_pod("ml", "p").await.expect("read").expect("pod");
    let spec = released.spec.as_ref().expect("spec");
    assert!(spec.scheduling_gates.is_none());
    assert!(is_pinned_to(spec, "n1"));
    assert_eq!(
        released
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team")),
        Some(&"research".to_owned())
    );
    let none = BindingMetadata::default();
    store
        .bind_pod("ml", "p", "uid-p", "n1", &none)
        .await
        .expect("bind");
    let bound = store.get_pod("ml", "p").await.expect("read").expect("pod");
    let spec = bound.spec.expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    assert!(spec.scheduling_gates.is_none());
    assert_eq!(
        bound.metadata.labels.and_then(|mut l| l.remove("team")),
        Some("research".to_owned())
    );
    assert!(
        store
            .bind_pod("ml", "p", "uid-p", "n1", &none)
            .await
            .is_err()
    );
}
