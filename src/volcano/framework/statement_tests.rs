//! A statement's discard is the exact inverse of its operations: after any
//! sequence of allocations, pipelines and evictions on GPU nodes, discarding leaves
//! the session (its state and every plugin's figures) exactly as it was.

use super::job::{GangKey, GpuAsk, TaskPlacement, TaskStatus};
use super::nodes::{NodeSet, SessionNode};
use super::outcome::EvictAction;
use super::queue::QueueInfo;
use super::session::Session;
use super::statement::Statement;
use super::testing::{job, state, task};
use crate::device::device_config::NvidiaConfig;
use crate::device::model::{ContainerDevice, GpuDevice};
use crate::fit::PodContext;
use crate::ledger::{Ledger, NodeEntry};
use crate::node_load::NodeResources;
use crate::policy::{GpuPolicy, NodePolicy};
use crate::resources::Resources;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const CONFS: [&str; 2] = [
    "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: drf\n    enableHierarchy: true\n  - name: capacity\n    enableHierarchy: true\n  - name: capacity-card\n  - name: binpack\n",
    "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: overcommit\n  - name: drf\n  - name: proportion\n  - name: capacity-card\n",
];

fn gpu(node: usize, i: u32) -> GpuDevice {
    GpuDevice {
        id: Arc::from(format!("GPU-{node:04}-{i:04}-aa6e500d-328b-a510")),
        index: i,
        count: 4,
        devmem: 81559,
        devcore: 100,
        model: if node.is_multiple_of(2) {
            "NVIDIA H100 80GB HBM3".into()
        } else {
            "NVIDIA A100-SXM4-80GB".into()
        },
        numa: 0,
        health: true,
        mode: "hami-core".into(),
        pair_scores: Default::default(),
        mig_profiles: Vec::new(),
    }
}

fn vgpu_pod(uid: &str, gpus: u32, mem: u64) -> PodContext {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string()}}}]}
    }))
    .expect("pod");
    PodContext::parse(
        &pod,
        &NvidiaConfig::default(),
        NodePolicy::Binpack,
        &GpuPolicy::default(),
    )
    .expect("parses")
    .expect("asks for vGPUs")
}

/// Three nodes of four GPUs; three queues (one a parent) with card quotas; jobs
/// with pending vGPU tasks and running ones holding GPUs.
fn session(conf: &str) -> Session {
    let mut ledger = Ledger::default();
    for n in 0..3 {
        ledger.upsert_node(
            &format!("node-{n}"),
            NodeEntry {
                devices: (0..4).map(|i| gpu(n, i)).collect(),
                ..NodeEntry::default()
            },
        );
    }
    let nodes = ledger
        .snapshot_nodes()
        .into_iter()
        .map(|(name, gpus)| {
            let resources = NodeResources {
                allocatable: Resources::from_units([("cpu", 64)]),
                requested: Resources::new(),
                traits: None,
                pods: Default::default(),
            };
            SessionNode::new(name, gpus, resources)
        })
        .collect();
    let quota = |k: &str, n| BTreeMap::from([(k.to_string(), n)]);
    let queues = vec![
        QueueInfo::idle(QueueSpec {
            card_quota: quota("NVIDIA-H100", 6),
            ..QueueSpec::new("org")
        }),
        QueueInfo::idle(QueueSpec {
            parent: Some("org".into()),
            hierarchy: Some("root/org/a".into()),
            card_quota: quota("NVIDIA-A100", 3),
            ..QueueSpec::new("a")
        }),
        QueueInfo::idle(QueueSpec {
            parent: Some("org".into()),
            hierarchy: Some("root/org/b".into()),
            ..QueueSpec::new("b")
        }),
    ];
    let mut jobs = Vec::new();
    for (j, queue) in ["a", "b", "a", "b"].iter().enumerate() {
        let key = GangKey {
            namespace: "ns".into(),
            name: format!("job-{j}").into(),
            single: false,
        };
        let mut tasks = Vec::new();
        for t in 0..3 {
            let uid = format!("job-{j}-{t}");
            let mut tk = task(&key, &uid, Resources::from_units([("cpu", 2)]));
            tk.uid = uid.clone();
            tk.priority = (j % 2) as i32;
            tk.gpu = GpuAsk::Vgpu(std::sync::Arc::new(vgpu_pod(
                &uid,
                1 + (t % 2) as u32,
                8000,
            )));
            if t == 0 {
                // Running on node j % 3, GPU t, holding 8000 MiB.
                let node = j % 3;
                tk.status = TaskStatus::Running;
                tk.placement = Some(TaskPlacement {
                    node: format!("node-{node}"),
                    devices: vec![vec![ContainerDevice {
                        uuid: gpu(node, 0).id,
                        vendor: Arc::from("NVIDIA"),
                        usedmem: 8000,
                        usedcores: 0,
                        mig: None,
                    }]],
                    init_count: 0,
                });
                tk.resreq = Resources::from_units([("cpu", 2), ("nvidia.com/gpu", 1)]);
                tk.resreq.set("nvidia.com/gpumem", 8_000_000);
                tk.cards = BTreeMap::from([(
                    crate::volcano::card_quota::card_type(&gpu(node, 0).model),
                    1,
                )]);
            }
            tasks.push(tk);
        }
        jobs.push(job(&format!("job-{j}"), queue, 2, tasks));
    }
    let mut st = state(
        Resources::from_units([("cpu", 192), ("nvidia.com/gpu", 48)]),
        queues,
        jobs,
    );
    for j in st.jobs.values() {
        for t in j.tasks.iter().filter(|t| t.holds_resources()) {
            let q = st.queues.get_mut(&j.queue).expect("queue");
            q.allocated.add(&t.resreq);
            super::queue::add_cards(&mut q.cards, &t.cards);
        }
    }
    st.nodes = NodeSet::new(nodes, BTreeMap::new());
    let conf = SchedulerConf::parse(conf).expect("conf");
    Session::open(st, registry::build(&conf).expect("builds"))
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Allocate(usize, usize),
    Pipeline(usize, usize),
    Evict(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..4, 0usize..3).prop_map(|(j, t)| Op::Allocate(j, t)),
        (0usize..4, 0usize..3).prop_map(|(j, t)| Op::Pipeline(j, t)),
        (0usize..4, 0usize..3).prop_map(|(j, t)| Op::Evict(j, t)),
    ]
}

fn apply(session: &mut Session, statement: &mut Statement, op: Op) {
    let (j, t, kind) = match op {
        Op::Allocate(j, t) => (j, t, 0),
        Op::Pipeline(j, t) => (j, t, 1),
        Op::Evict(j, t) => (j, t, 2),
    };
    let key = GangKey {
        namespace: "ns".into(),
        name: format!("job-{j}").into(),
        single: false,
    };
    let uid = format!("job-{j}-{t}");
    let Some(status) = session.state.task(&key, &uid).map(|t| t.status) else {
        return;
    };
    match kind {
        2 if status == TaskStatus::Running => {
            statement.evict(session, &key, &uid, EvictAction::Preempt, "test".into());
        }
        0 | 1 if status == TaskStatus::Pending => {
            let Ok(choice) = session.choose_node(&key, &uid) else {
                return;
            };
            let Some(task) = session.state.task(&key, &uid) else {
                return;
            };
            let charge = session.charge_for(task, choice.as_ref());
            if kind == 0 {
                statement.allocate(session, &key, &uid, choice.as_ref(), charge);
            } else {
                statement.pipeline(session, &key, &uid, choice.as_ref(), charge);
            }
        }
        _ => {}
    }
}

proptest! {
    #[test]
    fn discard_leaves_the_session_exactly_as_it_was(
        conf in 0usize..2,
        first in proptest::collection::vec(op(), 0..6),
        ops in proptest::collection::vec(op(), 1..24),
    ) {
        let mut s = session(CONFS[conf]);
        // Some committed history first, so discard is tested from a changed state.
        let mut history = Statement::new();
        for o in first {
            apply(&mut s, &mut history, o);
        }
        history.commit(&mut s);
        let state_before = s.state.clone();
        let plugins_before = format!("{:?}", s.tiers());
        let reports_before = s.queue_reports();
        let mut statement = Statement::new();
        for o in ops {
            apply(&mut s, &mut statement, o);
        }
        statement.discard(&mut s);
        prop_assert!(s.state == state_before, "state changed by a discarded statement");
        prop_assert_eq!(format!("{:?}", s.tiers()), plugins_before);
        prop_assert_eq!(s.queue_reports(), reports_before);
    }
}

#[test]
fn operations_change_the_session_until_discarded() {
    let mut s = session(CONFS[0]);
    let before = s.state.clone();
    let mut st = Statement::new();
    apply(&mut s, &mut st, Op::Allocate(0, 1));
    apply(&mut s, &mut st, Op::Evict(1, 0));
    assert_eq!(st.len(), 2);
    assert!(s.state != before);
    let a = s.state.queue("a").expect("a").allocated.clone();
    assert!(
        a.get("nvidia.com/gpu")
            > before
                .queue("a")
                .expect("a")
                .allocated
                .get("nvidia.com/gpu")
    );
    assert!(s.state.nodes.changed_nodes().count() > 0);
    st.discard(&mut s);
    assert!(s.state == before);
}
