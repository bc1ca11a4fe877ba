//! Fuzz-style property test of the router: kube-scheduler- and API-server-shaped
//! `/filter`, `/bind` and `/mutate` bodies, then mutated (bytes flipped, cut, JSON
//! fragments spliced in), sent in sequences through the real router over one
//! cluster. After every request: no panic, an answer in the route's shape, and no
//! GPU booked past its slots, memory or compute.

use super::{AppState, RouterOptions, router};
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObjects;
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::{ExtenderBindingResult, ExtenderError, ExtenderFilterResult};
use crate::metrics::Metrics;
use crate::scheduler::{GangConfig, Scheduler, SchedulerConfig};
use crate::webhook::{AdmissionReviewResponse, WebhookConfig};
use axum::body::Body;
use axum::http::Request;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tower::ServiceExt;

const NODES: [&str; 3] = ["gpu-a", "gpu-b", "cpu-c"];
const PODS: [&str; 4] = ["p0", "p1", "p2", "p3"];

fn cluster() -> ClusterObjects {
    let register = |node: &str| {
        let gpus: Vec<Value> = (0..2)
            .map(|i| {
                json!({"id": format!("GPU-{node}-{i}"), "index": i, "count": 4, "devmem": 24000,
                    "devcore": 100, "type": "NVIDIA A10", "numa": 0, "health": true,
                    "mode": "hami-core"})
            })
            .collect();
        Value::Array(gpus).to_string()
    };
    let nodes = NODES
        .iter()
        .map(|name| {
            let annotations = if name.starts_with("gpu") {
                json!({"hami.io/node-nvidia-register": register(name)})
            } else {
                json!({})
            };
            serde_json::from_value(json!({"metadata": {"name": name, "resourceVersion": "5",
                "annotations": annotations}}))
            .expect("node")
        })
        .collect();
    ClusterObjects {
        nodes,
        ..Default::default()
    }
}

struct Harness {
    app: axum::Router,
    scheduler: Arc<Scheduler>,
    runtime: tokio::runtime::Runtime,
}

fn harness() -> Harness {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let objects = cluster();
    let memory = Arc::new(MemoryCluster::new(objects.nodes.clone(), Vec::new(), true));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let config = SchedulerConfig {
        node_lock_retry_timeout: Duration::from_millis(50),
        gang: GangConfig {
            enabled: false,
            ..GangConfig::default()
        },
        ..SchedulerConfig::default()
    };
    let scheduler = Arc::new(Scheduler::new(config, api, Arc::new(Metrics::new())));
    scheduler.load(&objects);
    let state = Arc::new(AppState {
        scheduler: scheduler.clone(),
        webhook: WebhookConfig {
            scheduler_name: "vgpu-scheduler".into(),
            force_overwrite_default_scheduler: true,
            nvidia: Default::default(),
            gang_gates: false,
            allow_privileged_vgpu: false,
            annotation_writers: Default::default(),
        },
        memory_cluster: Some(memory),
        ready: AtomicBool::new(true),
    });
    let app = router(
        state,
        RouterOptions {
            require_client_certificate: false,
            max_request_body: 1 << 20,
            max_admission_body: 1 << 20,
            max_bodies_in_flight: 4 << 20,
            max_admission_bodies_in_flight: 4 << 20,
        },
    );
    Harness {
        app,
        scheduler,
        runtime,
    }
}

#[derive(Debug, Clone)]
enum Verb {
    Filter,
    Bind,
    Mutate,
}

impl Verb {
    fn path(&self) -> &'static str {
        match self {
            Verb::Filter => "/filter",
            Verb::Bind => "/bind",
            Verb::Mutate => "/mutate",
        }
    }
}

fn pod(name: &str, gpus: u32, mem: u64, cores: u32, annotations: Value) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}"),
                     "annotations": annotations},
        "spec": {"schedulerName": "vgpu-scheduler", "containers": [{"name": "c", "resources": {
            "limits": {"nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string(),
                       "nvidia.com/gpucores": cores.to_string()}}}]}
    })
}

/// A well-formed request of `verb` built from the generated numbers.
fn seed(verb: &Verb, pick: (usize, usize), gpus: u32, mem: u64, cores: u32) -> Value {
    let name = PODS[pick.0 % PODS.len()];
    let node = NODES[pick.1 % NODES.len()];
    let forged = json!({"hami.io/vgpu-node": node,
        "hami.io/vgpu-devices-allocated": format!("GPU-{node}-0,NVIDIA,{mem},{cores}:;")});
    match verb {
        Verb::Filter => json!({"Pod": pod(name, gpus, mem, cores, json!({})),
                               "NodeNames": NODES}),
        Verb::Bind => json!({"PodName": name, "PodNamespace": "team",
                             "PodUID": format!("uid-{name}"), "Node": node}),
        Verb::Mutate => json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "r-1", "kind": {"group": "", "kind": "Pod"}, "namespace": "team",
                        "operation": if pick.0.is_multiple_of(2) { "CREATE" } else { "UPDATE" },
                        "userInfo": {"username": "alice"},
                        "object": pod(name, gpus, mem, cores, forged), "oldObject": null}}),
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Cut(usize),
    Splice(usize, &'static str),
}

const FRAGMENTS: [&str; 10] = [
    "null",
    "{}",
    "[]",
    "\"\"",
    "-1",
    "1e400",
    "\"\\u0000\\n\"",
    "{\"Pod\":",
    "\"hami.io/vgpu-node\":\"gpu-a\",",
    "99999999999999999999",
];

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let at = |i: usize| {
            if bytes.is_empty() {
                0
            } else {
                i % (bytes.len() + 1)
            }
        };
        match m {
            Mutation::Flip(i, b) if !bytes.is_empty() => {
                let i = i % bytes.len();
                bytes[i] = *b;
            }
            Mutation::Flip(..) => {}
            Mutation::Cut(i) => {
                let i = at(*i);
                bytes.truncate(i);
            }
            Mutation::Splice(i, fragment) => {
                let i = at(*i);
                bytes.splice(i..i, fragment.bytes());
            }
        }
    }
    bytes
}

fn verb() -> impl Strategy<Value = Verb> {
    prop_oneof![Just(Verb::Filter), Just(Verb::Bind), Just(Verb::Mutate)]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), prop::sample::select(&FRAGMENTS[..]))
            .prop_map(|(i, f)| Mutation::Splice(i, f)),
    ]
}

/// One request: the verb, the seed's numbers, and its mutations (often none, so
/// that sequences also place and bind pods).
fn request() -> impl Strategy<Value = (Verb, Vec<u8>)> {
    (
        verb(),
        (0usize..2, 0usize..3),
        prop_oneof![1 => Just(0u32), 4 => 1u32..3],
        prop_oneof![6 => 0u64..30000, 1 => Just(u64::MAX)],
        0u32..120,
        prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(mutation(), 1..4)],
    )
        .prop_map(|(verb, pick, gpus, mem, cores, mutations)| {
            let body = seed(&verb, pick, gpus, mem, cores).to_string().into_bytes();
            let body = mutate(body, &mutations);
            (verb, body)
        })
}

/// Whether `body` is an answer in the shape of `verb`'s answers.
fn well_formed(verb: &Verb, body: &[u8]) -> bool {
    match verb {
        Verb::Filter => {
            serde_json::from_slice::<ExtenderFilterResult>(body).is_ok()
                || serde_json::from_slice::<ExtenderError>(body).is_ok()
        }
        Verb::Bind => serde_json::from_slice::<ExtenderBindingResult>(body).is_ok(),
        Verb::Mutate => serde_json::from_slice::<AdmissionReviewResponse>(body)
            .is_ok_and(|r| r.kind == "AdmissionReview"),
    }
}

/// Every GPU within its registered slots, memory and compute, and the usage kept
/// incrementally equal to a recount.
fn ledger_holds(scheduler: &Scheduler) -> Result<(), String> {
    scheduler.with_ledger(|ledger| {
        for (name, node) in ledger.nodes() {
            for (device, usage) in node.devices.iter().zip(&node.usage) {
                if usage.used > device.count
                    || usage.usedmem > device.devmem
                    || usage.usedcores > device.devcore
                {
                    return Err(format!("{name}/{}: {usage:?} over {device:?}", device.id));
                }
            }
        }
        if ledger.recomputed_node_usage() != *ledger.incremental_node_usage() {
            return Err("incremental usage differs from a recount".into());
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn mutated_requests_never_panic_answer_in_shape_and_never_overbook(
        requests in prop::collection::vec(request(), 1..10)
    ) {
        let h = harness();
        for (verb, body) in requests {
            let request = Request::post(verb.path())
                .header("content-type", "application/json")
                .body(Body::from(body.clone()))
                .expect("request");
            let response = h.runtime.block_on(h.app.clone().oneshot(request)).expect("infallible");
            prop_assert_eq!(response.status().as_u16(), 200);
            let answer = h
                .runtime
                .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                .expect("answer body");
            prop_assert!(
                well_formed(&verb, &answer),
                "{} {:?} answered {:?}",
                verb.path(),
                String::from_utf8_lossy(&body),
                String::from_utf8_lossy(&answer)
            );
            prop_assert!(
                !String::from_utf8_lossy(&answer).contains("task failed"),
                "a handler task panicked: {:?}",
                String::from_utf8_lossy(&answer)
            );
            if let Err(e) = ledger_holds(&h.scheduler) {
                prop_assert!(false, "after {} {:?}: {}", verb.path(), String::from_utf8_lossy(&body), e);
            }
        }
    }
}
