//! Worked examples: Volcano's own tables (resource_strategy_fit_test.go,
//! proportional_test.go and the sra design's table) with the vGPU count read from
//! the node's GPUs, plus the configuration this scheduler refuses.

use super::*;
use crate::device::model::GpuDevice;
use crate::fit::NodeView;
use crate::resources::VgpuDims;
use crate::usage::GpuUsage;
use crate::volcano::conf::SchedulerConf;
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const GI: i64 = 1 << 30;
/// Volcano's `G` (10^9 bytes).
const G: i64 = 1_000_000_000;

use ScoringType::{LeastAllocated as Least, MostAllocated as Most};

/// A candidate node: its GPUs (H100s), allocatable and requested resources.
struct Node {
    name: &'static str,
    devices: Vec<GpuDevice>,
    usage: Vec<GpuUsage>,
    vendor: Vec<bool>,
    models: Vec<String>,
    cordoned: BTreeSet<String>,
    allocatable: Resources,
    requested: Resources,
}

impl Node {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            devices: Vec::new(),
            usage: Vec::new(),
            vendor: Vec::new(),
            models: Vec::new(),
            cordoned: BTreeSet::new(),
            allocatable: Resources::new(),
            requested: Resources::new(),
        }
    }

    /// `n` more GPUs of `count` vGPU slots each, nothing on them.
    fn gpus(mut self, n: u32, count: u32) -> Self {
        for _ in 0..n {
            let index = self.devices.len() as u32;
            self.devices.push(GpuDevice {
                id: Arc::from(format!("GPU-{}-{index}", self.name)),
                index,
                count,
                devmem: 81559,
                devcore: 100,
                model: "NVIDIA H100 80GB HBM3".into(),
                numa: 0,
                health: true,
                mode: "hami-core".into(),
                pair_scores: Default::default(),
                mig_profiles: Vec::new(),
            });
            self.usage.push(GpuUsage::default());
            self.vendor.push(true);
            self.models.push("nvidia h100 80gb hbm3".into());
        }
        self
    }

    /// One vGPU of a quarter of the card on GPU `i`.
    fn busy(mut self, i: usize) -> Self {
        self.usage[i] = GpuUsage {
            used: 1,
            usedmem: 20000,
            usedcores: 25,
            ..GpuUsage::default()
        };
        self
    }

    fn alloc(mut self, dim: &str, milli: i64) -> Self {
        self.allocatable.set(dim, milli);
        self
    }

    fn req(mut self, dim: &str, milli: i64) -> Self {
        self.requested.set(dim, milli);
        self
    }

    fn facts(&self) -> NodeFacts<'_> {
        NodeFacts {
            name: self.name,
            gpus: NodeView {
                devices: &self.devices,
                usage: &self.usage,
                cordoned: &self.cordoned,
                is_vendor: &self.vendor,
                model_lower: &self.models,
            },
            allocatable: &self.allocatable,
            requested: &self.requested,
            traits: None,
            measured: crate::node_metrics::MeasuredUsage::NOT_COLLECTED,
        }
    }
}

fn task<'a>(resreq: &'a Resources, pod: Option<&'a Pod>, dims: &'a VgpuDims) -> TaskFacts<'a> {
    TaskFacts {
        namespace: "c1",
        name: "p",
        gpu: None,
        resreq,
        pod,
        queue: None,
        dims,
        pod_affinity: None,
        preferred_pod_affinity: None,
    }
}

/// A pod with one container requesting `requests` and carrying `annotations`.
fn pod(requests: &[(&str, &str)], annotations: &[(&str, &str)]) -> Pod {
    let requests: BTreeMap<&str, &str> = requests.iter().copied().collect();
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "c1", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    }))
    .expect("pod")
}

fn milli(pairs: &[(&str, i64)]) -> Resources {
    Resources::from_milli(pairs.iter().copied())
}

/// The plugin built from `arguments:` (YAML, indented for the entry).
fn plugin(args: &str) -> ResourceStrategyFit {
    let conf = SchedulerConf::parse(&format!(
        "actions: allocate\ntiers:\n- plugins:\n  - name: resource-strategy-fit\n    arguments:\n{args}"
    ))
    .expect("configuration parses");
    let option = &conf.tiers[0].plugins[0];
    let args = Arguments::new(
        "tiers[0].plugins[0]",
        "resource-strategy-fit",
        &option.arguments,
    );
    ResourceStrategyFit::from_args(&args).expect("arguments accepted")
}

/// Why loading a configuration with these arguments fails.
fn refusal(args: &str) -> String {
    crate::volcano::load_conf(&format!(
        "actions: allocate\ntiers:\n- plugins:\n  - name: resource-strategy-fit\n    arguments:\n{args}"
    ))
    .expect_err("refused")
    .to_string()
}

fn table(entries: &[(&str, ScoringType, i64)]) -> StrategyTable {
    let mut t = StrategyTable::default();
    for (name, kind, weight) in entries {
        t.insert(
            name,
            ResourceStrategy {
                kind: *kind,
                weight: *weight,
            },
        )
        .expect("valid pattern");
    }
    t
}

fn with_table(weight: i64, entries: &[(&str, ScoringType, i64)]) -> ResourceStrategyFit {
    ResourceStrategyFit {
        weight,
        resources: table(entries),
        sra: None,
        proportional: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// Volcano's TestScore: a task of 100m CPU and 100 bytes on a node with 200 of
/// each used, per strategy and weight, including the pod-level annotations.
#[test]
fn volcano_score_table() {
    const TYPE: &str = SCORING_TYPE_ANNOTATION;
    const WEIGHTS: &str = WEIGHT_ANNOTATION;
    type Case<'a> = (
        &'a str,
        (i64, i64),
        &'a [(&'a str, &'a str)],
        (i64, i64, i64, i64),
        i64,
        &'a [(&'a str, ScoringType, i64)],
        f64,
    );
    let least_1_1: &[(&str, ScoringType, i64)] = &[("cpu", Least, 1), ("memory", Least, 1)];
    let most_1_1: &[(&str, ScoringType, i64)] = &[("cpu", Most, 1), ("memory", Most, 1)];
    let cases: &[Case] = &[
        (
            "least",
            (100, 100),
            &[],
            (200, 200, 500, 500),
            10,
            least_1_1,
            400.0,
        ),
        (
            "least, smaller node",
            (100, 100),
            &[],
            (200, 200, 400, 400),
            10,
            least_1_1,
            250.0,
        ),
        (
            "most",
            (100, 100),
            &[],
            (200, 200, 500, 500),
            10,
            most_1_1,
            600.0,
        ),
        (
            "most, smaller node",
            (100, 100),
            &[],
            (200, 200, 400, 400),
            10,
            most_1_1,
            750.0,
        ),
        (
            "mixed 2:1",
            (100, 100),
            &[],
            (200, 200, 500, 500),
            10,
            &[("cpu", Least, 2), ("memory", Most, 1)],
            466.666_666_67,
        ),
        (
            "mixed 1:2",
            (100, 100),
            &[],
            (200, 200, 500, 500),
            10,
            &[("cpu", Least, 1), ("memory", Most, 2)],
            533.333_333_33,
        ),
        (
            "no CPU asked",
            (0, 100),
            &[],
            (200, 200, 500, 500),
            10,
            &[("cpu", Least, 1), ("memory", Most, 2)],
            600.0,
        ),
        (
            "no CPU on the node",
            (100, 100),
            &[],
            (200, 200, 0, 400),
            10,
            &[("cpu", Least, 1), ("memory", Most, 2)],
            500.0,
        ),
        (
            "memory only",
            (100, 100),
            &[],
            (200, 200, 500, 500),
            10,
            &[("memory", Most, 2)],
            600.0,
        ),
        (
            "pod: least 2:1",
            (100, 100),
            &[
                (TYPE, "LeastAllocated"),
                (WEIGHTS, r#"{"cpu": 2, "memory": 1}"#),
            ],
            (200, 200, 500, 500),
            10,
            least_1_1,
            400.0,
        ),
        (
            "pod: most 1:2",
            (100, 100),
            &[
                (TYPE, "MostAllocated"),
                (WEIGHTS, r#"{"cpu": 1, "memory": 2}"#),
            ],
            (200, 200, 500, 500),
            10,
            least_1_1,
            600.0,
        ),
        (
            "pod: invalid JSON",
            (100, 100),
            &[(TYPE, "LeastAllocated"), (WEIGHTS, "invalid-json")],
            (200, 200, 500, 500),
            10,
            least_1_1,
            0.0,
        ),
        (
            "pod: CPU only",
            (100, 100),
            &[(TYPE, "LeastAllocated"), (WEIGHTS, r#"{"cpu": 2}"#)],
            (200, 200, 500, 500),
            10,
            least_1_1,
            400.0,
        ),
        (
            "nothing asked",
            (0, 0),
            &[],
            (200, 200, 500, 500),
            10,
            least_1_1,
            0.0,
        ),
        (
            "node full",
            (100, 100),
            &[],
            (500, 500, 500, 500),
            10,
            least_1_1,
            0.0,
        ),
        // Short of one resource: the whole node scores 0, however well the others fit.
        (
            "memory short",
            (100, 100),
            &[],
            (200, 450, 500, 500),
            10,
            most_1_1,
            0.0,
        ),
        (
            "mixed 3:1",
            (100, 100),
            &[],
            (200, 200, 500, 500),
            10,
            &[("cpu", Least, 3), ("memory", Most, 1)],
            450.0,
        ),
        (
            "heavier",
            (100, 100),
            &[],
            (200, 200, 500, 500),
            20,
            &[("cpu", Least, 5), ("memory", Least, 5)],
            800.0,
        ),
    ];
    let dims = VgpuDims::default();
    for (name, (cpu, mem), annotations, (ucpu, umem, acpu, amem), weight, entries, expected) in
        cases
    {
        let node = Node::new("n")
            .alloc("cpu", *acpu)
            .alloc("memory", *amem)
            .req("cpu", *ucpu)
            .req("memory", *umem);
        let resreq = milli(&[("cpu", *cpu), ("memory", *mem)]);
        let p = pod(&[], annotations);
        let score =
            with_table(*weight, entries).score(&task(&resreq, Some(&p), &dims), &node.facts());
        assert!(close(score, *expected), "{name}: {score} != {expected}");
    }
}

/// Volcano's TestResourceStrategyFitPlugin: pods asking for `nvidia.com/gpu` and
/// `example.com/foo` on six nodes. Here the GPUs are the nodes' registered vGPUs
/// and `example.com/foo` is read from the pods' containers, as the configuration
/// names it.
#[test]
fn volcano_plugin_table() {
    let dims = VgpuDims::default();
    let cpu_mem = |n: Node| n.alloc("cpu", 4000).alloc("memory", 4 * GI * 1000);
    let nodes = [
        cpu_mem(Node::new("n1").gpus(10, 1)),
        cpu_mem(Node::new("n2").gpus(5, 1)),
        cpu_mem(Node::new("n3")).alloc("example.com/foo", 10_000),
        cpu_mem(Node::new("n4")).alloc("example.com/foo", 5_000),
        cpu_mem(Node::new("n5").gpus(10, 1)).alloc("example.com/foo", 5_000),
        cpu_mem(Node::new("n6")).alloc("example.com/foo", 10_000),
    ];
    // (pod, GPUs asked, foo asked, memory in GiB)
    let pods = [
        ("p1", 0, "2", 1),
        ("p2", 0, "3", 1),
        ("p3", 2, "0", 10),
        ("p4", 3, "0", 1),
        ("p5", 4, "4", 1),
    ];
    let first = plugin(
        "      resourceStrategyFitWeight: 10
      resources:
        nvidia.com/gpu: {type: MostAllocated, weight: 1}
        example.com/foo: {type: LeastAllocated, weight: 1}
",
    );
    let second = plugin(
        "      resourceStrategyFitWeight: 10
      resources:
        nvidia.com/gpu: {type: MostAllocated, weight: 1}
        example.com/foo: {type: LeastAllocated, weight: 2}
",
    );
    let expected: [(&ResourceStrategyFit, &str, &str, f64); 18] = [
        (&first, "p1", "n1", 0.0),
        (&first, "p1", "n2", 0.0),
        (&first, "p1", "n3", 800.0),
        (&first, "p1", "n4", 600.0),
        (&first, "p2", "n1", 0.0),
        (&first, "p2", "n2", 0.0),
        (&first, "p2", "n3", 700.0),
        (&first, "p2", "n4", 400.0),
        (&first, "p3", "n1", 200.0),
        (&first, "p3", "n2", 400.0),
        (&first, "p3", "n3", 0.0),
        (&first, "p3", "n4", 0.0),
        (&first, "p4", "n1", 300.0),
        (&first, "p4", "n2", 600.0),
        (&first, "p4", "n3", 0.0),
        (&first, "p4", "n4", 0.0),
        (&second, "p5", "n5", 266.666_666_66),
        (&second, "p5", "n6", 400.0),
    ];
    for (plugin, pod_name, node_name, want) in expected {
        let (_, gpus, foo, mem) = pods.iter().find(|p| p.0 == pod_name).expect("pod");
        let mut resreq = milli(&[("cpu", 1000), ("memory", mem * GI * 1000)]);
        if *gpus > 0 {
            resreq.set("nvidia.com/gpu", gpus * 1000);
        }
        let p = pod(&[("cpu", "1"), ("example.com/foo", foo)], &[]);
        let node = nodes.iter().find(|n| n.name == node_name).expect("node");
        let score = plugin.score(&task(&resreq, Some(&p), &dims), &node.facts());
        assert!(
            close(score, want),
            "{pod_name} on {node_name}: {score} != {want}"
        );
    }
}

/// The vGPU dimensions under one vendor pattern: packing prefers the node whose
/// GPUs already carry work, spreading the idle one; an exact name beats the
/// pattern.
#[test]
fn vgpu_dimensions_pack_or_spread_through_a_wildcard() {
    let dims = VgpuDims::default();
    let busy = Node::new("busy").gpus(2, 4).busy(0);
    let idle = Node::new("idle").gpus(2, 4);
    let resreq = milli(&[
        ("nvidia.com/gpu", 1000),
        ("nvidia.com/gpumem", 20000 * 1000),
        ("nvidia.com/gpucores", 25 * 1000),
    ]);
    let t = task(&resreq, None, &dims);
    let pack = with_table(10, &[("nvidia.com/*", Most, 1)]);
    let spread = with_table(10, &[("nvidia.com/*", Least, 1)]);
    assert!(pack.score(&t, &busy.facts()) > pack.score(&t, &idle.facts()));
    assert!(spread.score(&t, &idle.facts()) > spread.score(&t, &busy.facts()));
    // Slots 2 of 8, memory 40000 of 163118 MiB, cores 50 of 200, all packed.
    let want = (2.0 / 8.0 + 40000.0 / 163_118.0 + 50.0 / 200.0) / 3.0 * 1000.0;
    assert!(close(pack.score(&t, &busy.facts()), want));
    // Spreading only the slots, by name, wins over the pattern for that resource.
    let mixed = with_table(
        10,
        &[("nvidia.com/*", Most, 1), ("nvidia.com/gpu", Least, 1)],
    );
    let want = (6.0 / 8.0 + 40000.0 / 163_118.0 + 50.0 / 200.0) / 3.0 * 1000.0;
    assert!(close(mixed.score(&t, &busy.facts()), want));
    // A resource nobody configured is not scored: CPU here.
    let mut with_cpu = resreq.clone();
    with_cpu.set("cpu", 1000);
    assert!(close(
        pack.score(&task(&with_cpu, None, &dims), &busy.facts()),
        pack.score(&t, &busy.facts())
    ));
}

#[test]
fn pod_annotations_turn_the_preference_around() {
    let dims = VgpuDims::default();
    let busy = Node::new("busy").gpus(2, 4).busy(0);
    let idle = Node::new("idle").gpus(2, 4);
    let resreq = milli(&[("nvidia.com/gpu", 1000)]);
    let spread = with_table(10, &[("nvidia.com/gpu", Least, 1)]);
    let prefers = |p: &Pod| {
        let t = task(&resreq, Some(p), &dims);
        let (b, i) = (
            spread.score(&t, &busy.facts()),
            spread.score(&t, &idle.facts()),
        );
        if b > i {
            "busy"
        } else if i > b {
            "idle"
        } else {
            "none"
        }
    };
    assert_eq!(prefers(&pod(&[], &[])), "idle");
    let packing = pod(
        &[],
        &[
            (SCORING_TYPE_ANNOTATION, "MostAllocated"),
            (WEIGHT_ANNOTATION, r#"{"nvidia.com/gpu": 1}"#),
        ],
    );
    assert_eq!(prefers(&packing), "busy");
    // A type alone changes nothing; unreadable weights leave no preference.
    assert_eq!(
        prefers(&pod(&[], &[(SCORING_TYPE_ANNOTATION, "MostAllocated")])),
        "idle"
    );
    let unreadable = pod(
        &[],
        &[
            (SCORING_TYPE_ANNOTATION, "MostAllocated"),
            (WEIGHT_ANNOTATION, "{gpu: 1"),
        ],
    );
    assert_eq!(prefers(&unreadable), "none");
    // Weights naming a pattern reach the vGPU dimensions too.
    let by_pattern = pod(
        &[],
        &[
            (SCORING_TYPE_ANNOTATION, "MostAllocated"),
            (WEIGHT_ANNOTATION, r#"{"nvidia.com/*": 3}"#),
        ],
    );
    assert_eq!(prefers(&by_pattern), "busy");
}

/// The sra design's table: two scarce GPU types, `nvidia.com/t4` and
/// `nvidia.com/a10`, weight 1 each, `sra.weight` 2.
#[test]
fn sra_keeps_pods_off_scarce_resources_they_do_not_need() {
    let dims = VgpuDims::default();
    let p = plugin(
        "      resourceStrategyFitWeight: 0
      sra:
        enable: true
        resources: nvidia.com/t4, nvidia.com/a10
        weight: 2
        resourceWeight:
          nvidia.com/t4: 1
          nvidia.com/a10: 1
",
    );
    assert!(p.scores_nodes() && !p.filters_nodes());
    let base = |name| {
        Node::new(name)
            .alloc("cpu", 16_000)
            .alloc("memory", 32 * GI * 1000)
    };
    let nodes = [
        base("node1").alloc("cpu", 32_000),
        base("node2").alloc("nvidia.com/t4", 10_000),
        base("node3")
            .alloc("nvidia.com/t4", 5_000)
            .alloc("nvidia.com/a10", 10_000),
    ];
    type Requests<'a> = &'a [(&'a str, &'a str)];
    let tasks: [(&str, Requests, [f64; 3]); 3] = [
        ("cpu-task-0", &[], [200.0, 100.0, 0.0]),
        ("gpu-task-0", &[("nvidia.com/t4", "2")], [0.0, 100.0, 0.0]),
        (
            "gpu-task-1",
            &[("nvidia.com/t4", "1"), ("nvidia.com/a10", "2")],
            [0.0, 0.0, 0.0],
        ),
    ];
    let resreq = milli(&[("cpu", 2000), ("memory", 4 * GI * 1000)]);
    for (name, scarce, want) in tasks {
        let mut requests = vec![("cpu", "2"), ("memory", "4Gi")];
        requests.extend_from_slice(scarce);
        let pod = pod(&requests, &[]);
        for (node, want) in nodes.iter().zip(want) {
            let score = p.score(&task(&resreq, Some(&pod), &dims), &node.facts());
            assert!(
                close(score, want),
                "{name} on {}: {score} != {want}",
                node.name
            );
        }
    }
}

/// Volcano's proportional table: 4 CPUs and 4 GB kept per idle GPU.
#[test]
fn proportional_keeps_cpu_and_memory_for_idle_gpus() {
    let dims = VgpuDims::default();
    let p = plugin(
        "      proportional:
        enable: true
        resources: nvidia.com/gpu
        resourceProportion:
          nvidia.com/gpu.cpu: 4
          nvidia.com/gpu.memory: 4
",
    );
    assert!(p.filters_nodes());
    let node = |name, cpu: i64, gb: i64, gpus| {
        Node::new(name)
            .gpus(gpus, 10)
            .alloc("cpu", cpu * 1000)
            .alloc("memory", gb * G * 1000)
    };
    let n1 = node("n1", 30, 30, 6);
    let n2 = node("n2", 26, 26, 2);
    let t = |cpu: i64, gb: i64, gpus: i64| {
        let mut r = milli(&[("cpu", cpu * 1000), ("memory", gb * G * 1000)]);
        if gpus > 0 {
            r.set("nvidia.com/gpu", gpus * 1000);
        }
        r
    };
    let check = |r: &Resources, n: &Node| p.predicate(&task(r, None, &dims), &n.facts());
    assert!(
        check(&t(4, 4, 0), &n1).is_ok(),
        "26 CPUs stay for 24 reserved"
    );
    let refused = check(&t(10, 10, 0), &n1).unwrap_err();
    assert!(refused.contains("idle nvidia.com/gpu"), "{refused}");
    assert!(
        !refused.contains("n1") && !refused.chars().any(|c| c.is_ascii_digit()),
        "no node names or numbers in a reason kube-scheduler aggregates: {refused}"
    );
    assert!(
        check(&t(10, 10, 1), &n1).is_ok(),
        "a pod asking for GPUs is never held back"
    );
    assert!(
        check(&t(10, 10, 0), &n2).is_ok(),
        "two idle GPUs keep 8 CPUs"
    );
}

#[test]
fn idle_means_whole_gpus_with_nothing_on_them() {
    let dims = VgpuDims::default();
    let p = plugin(
        "      proportional:
        enable: true
        resources: nvidia.com/gpu
        resourceProportion:
          nvidia.com/gpu.cpu: 4
          nvidia.com/gpu.memory: 0
",
    );
    let pod = milli(&[("cpu", 10_000)]);
    let check = |n: &Node| p.predicate(&task(&pod, None, &dims), &n.facts());
    // Six GPUs of ten slots: 24 CPUs kept (slots would keep 240).
    let n = |name| {
        Node::new(name)
            .gpus(6, 10)
            .alloc("cpu", 30_000)
            .alloc("memory", G * 1000)
    };
    assert!(check(&n("all-idle")).is_err(), "20 left < 24");
    // Three GPUs carry a vGPU, one is unhealthy, one is cordoned: one idle GPU.
    let mut partly = n("partly").busy(0).busy(1).busy(2);
    partly.devices[3].health = false;
    partly.cordoned.insert(partly.devices[4].id.to_string());
    assert_eq!(
        proportional::idle_units("nvidia.com/gpu", &partly.facts(), &dims),
        Some(1.0)
    );
    assert!(check(&partly).is_ok(), "20 left >= 4");
    // Pods already on the node count against what is left.
    let crowded = n("crowded")
        .busy(0)
        .busy(1)
        .busy(2)
        .busy(3)
        .busy(4)
        .req("cpu", 18_000);
    assert!(check(&crowded).is_err(), "2 left < 4");
    // Nodes without GPUs, or whose CPU is not known, keep nothing.
    assert!(check(&Node::new("cpu-only").alloc("cpu", 1000)).is_ok());
    assert!(check(&Node::new("unknown").gpus(6, 10)).is_ok());
}

/// Memory is kept in GB of 10^9 bytes, as Volcano computes it, not GiB.
#[test]
fn proportional_memory_is_counted_in_decimal_gigabytes() {
    let dims = VgpuDims::default();
    let p = plugin(
        "      proportional:
        enable: true
        resources: nvidia.com/gpu
        resourceProportion:
          nvidia.com/gpu.cpu: 0
          nvidia.com/gpu.memory: 4
",
    );
    let node = Node::new("n")
        .gpus(6, 1)
        .alloc("cpu", 64_000)
        .alloc("memory", 28 * G * 1000);
    let pod = milli(&[("memory", 4 * G * 1000)]);
    assert!(
        p.predicate(&task(&pod, None, &dims), &node.facts()).is_ok(),
        "24 GB left, 24 GB kept"
    );
    let more = milli(&[("memory", 4 * G * 1000 + 1000)]);
    assert!(
        p.predicate(&task(&more, None, &dims), &node.facts())
            .is_err()
    );
}

/// Volcano's calculateWeight table, and the defaults.
#[test]
fn arguments_follow_volcano() {
    let strategy = |kind, weight| ResourceStrategy { kind, weight };
    let p = plugin(
        "      resourceStrategyFitWeight: 10
      resources:
        cpu: {type: MostAllocated, weight: 1}
        memory: {type: LeastAllocated, weight: 2}
",
    );
    assert_eq!(p.weight, 10);
    assert_eq!(p.resources.lookup("cpu"), Some(&strategy(Most, 1)));
    assert_eq!(p.resources.lookup("memory"), Some(&strategy(Least, 2)));
    // No weight: 10. No resources: CPU and memory, spread, weight 1.
    let p = plugin("      resources:\n        cpu: {type: MostAllocated}\n");
    assert_eq!(p.weight, DEFAULT_WEIGHT);
    assert_eq!(p.resources.lookup("cpu"), Some(&strategy(Most, 1)));
    let p = plugin("      resourceStrategyFitWeight: 10\n");
    assert_eq!(p.resources, StrategyTable::default_cpu_memory());
    assert_eq!(p.resources.lookup("memory"), Some(&strategy(Least, 1)));
    assert!(p.scores_nodes() && !p.filters_nodes());
    assert_eq!((p.sra.as_ref(), p.proportional.as_ref()), (None, None));
    // Weights below 1 count 1; a negative plugin weight counts 10; 0 turns the
    // per-resource score off (and, without SRA, node choice keeps its fast path).
    let p = plugin(
        "      resourceStrategyFitWeight: -3\n      resources:\n        cpu: {weight: 0}\n        memory: {weight: -2}\n",
    );
    assert_eq!(p.weight, DEFAULT_WEIGHT);
    assert_eq!(p.resources.lookup("cpu"), Some(&strategy(Least, 1)));
    assert_eq!(p.resources.lookup("memory"), Some(&strategy(Least, 1)));
    assert!(!plugin("      resourceStrategyFitWeight: 0\n").scores_nodes());
}

/// The complete example of the plugin's documentation loads as written.
#[test]
fn the_documented_example_loads() {
    let text = r#"actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: resource-strategy-fit
    arguments:
      resourceStrategyFitWeight: 10
      resources:
        nvidia.com/gpu:
          type: MostAllocated
          weight: 2
        cpu:
          type: LeastAllocated
          weight: 1
        memory:
          type: LeastAllocated
          weight: 1
      sra:
        enable: true
        resources: nvidia.com/gpu
        weight: 10
        resourceWeight:
          nvidia.com/gpu: 1
      proportional:
        enable: true
        resources: nvidia.com/gpu
        resourceProportion:
          nvidia.com/gpu.cpu: 4
          nvidia.com/gpu.memory: 8
"#;
    let conf = crate::volcano::load_conf(text).expect("the example loads");
    let option = &conf.tiers[0].plugins[0];
    let args = Arguments::new(
        "tiers[0].plugins[0]",
        "resource-strategy-fit",
        &option.arguments,
    );
    let p = ResourceStrategyFit::from_args(&args).expect("arguments");
    assert_eq!(p.weight, 10);
    assert_eq!(
        p.resources,
        table(&[
            ("nvidia.com/gpu", Most, 2),
            ("cpu", Least, 1),
            ("memory", Least, 1)
        ])
    );
    assert_eq!(
        p.sra,
        Some(Sra {
            weight: 10,
            resources: BTreeMap::from([("nvidia.com/gpu".to_owned(), 1)]),
        })
    );
    assert_eq!(
        p.proportional,
        Some(Proportional {
            resources: BTreeMap::from([(
                "nvidia.com/gpu".to_owned(),
                Reserve {
                    cpu: 4.0,
                    memory: 8.0
                }
            )]),
        })
    );
    assert!(p.scores_nodes() && p.filters_nodes());
}

#[test]
fn malformed_arguments_are_refused_naming_the_key() {
    for (args, needle) in [
        (
            "      resources:\n        \"*\": {type: MostAllocated}\n",
            "arguments: resources.*: a lone * is not supported",
        ),
        (
            "      resources:\n        \"*.com/gpu\": {type: MostAllocated}\n",
            "a wildcard is one * at the end of a prefix",
        ),
        (
            "      resources:\n        cloudml.gpu**: {type: MostAllocated}\n",
            "a wildcard is one * at the end of a prefix",
        ),
        (
            "      resources:\n        nvidia.com/gpu: {type: MostAlocated}\n",
            "resources.nvidia.com/gpu.type: expected MostAllocated or LeastAllocated",
        ),
        (
            "      resources:\n        nvidia.com/gpu: {type: MostAllocated, wieght: 2}\n",
            "resources.nvidia.com/gpu.wieght: unknown field",
        ),
        (
            "      resources:\n        nvidia.com/gpu: MostAllocated\n",
            "resources.nvidia.com/gpu: expected a mapping",
        ),
        (
            "      resourceStrategyFitWieght: 3\n",
            "resourceStrategyFitWieght: unknown argument",
        ),
        (
            "      resourceStrategyFitWeight: heavy\n",
            "expected a number",
        ),
        (
            "      sra:\n        enable: true\n        resources: nvidia.com/gpu\n        resourceWeight:\n          nvidia.com/a10: 2\n",
            "sra.resourceWeight.nvidia.com/a10: nvidia.com/a10 is not listed in sra.resources",
        ),
        (
            "      sra:\n        enable: yes please\n",
            "sra.enable: expected true or false",
        ),
        (
            "      sra:\n        enable: true\n        resources: nvidia.com/*\n",
            "wildcards apply to the resources table only",
        ),
        (
            "      proportional:\n        enable: true\n        resources: nvidia.com/gpu\n        resourceProportion:\n          nvidia.com/gpu.cpus: 4\n",
            "expected <resource>.cpu or <resource>.memory",
        ),
        (
            "      proportional:\n        enable: true\n        resources: nvidia.com/gpu\n        resourceProportion:\n          example.com/foo.cpu: 4\n",
            "example.com/foo is not listed in proportional.resources",
        ),
        (
            "      proportional:\n        enabled: true\n",
            "proportional.enabled: unknown field",
        ),
    ] {
        let e = refusal(args);
        assert!(
            e.contains(needle) && e.contains("(resource-strategy-fit)"),
            "{args}: {e}"
        );
    }
}
