//! binpack: prefer the node that the task fills most, weighted per resource
//! (Volcano's binpack). For each resource the task requests and the plugin weighs:
//!
//! ```text
//! score_r = (used_r + request_r) / allocatable_r × weight_r   (0 if it overflows)
//! score   = Σ score_r / Σ weight_r × 100 × binpack.weight
//! ```
//!
//! CPU and memory come from the node's allocatable and the pods on it; the vGPU
//! dimensions (`nvidia.com/gpu`, `nvidia.com/gpumem`, `nvidia.com/gpucores` by
//! default) from the node's registered GPUs and their usage; any other listed
//! resource from the node's allocatable and the pods' requests. The score adds to
//! the pod's GPU node policy (0..=100) in the one node choice `/filter` and the
//! planner share.

use super::node_resource::capacity_and_used;
use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use std::collections::BTreeMap;

/// kube-scheduler's (and Volcano's) highest node score.
pub const MAX_NODE_SCORE: f64 = 100.0;

const WEIGHT: &str = "binpack.weight";
const CPU: &str = "binpack.cpu";
const MEMORY: &str = "binpack.memory";
const RESOURCES: &str = "binpack.resources";
const RESOURCE_PREFIX: &str = "binpack.resources.";

/// The binpack plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Binpack {
    /// `binpack.weight`.
    pub weight: i64,
    /// `binpack.cpu`.
    pub cpu: i64,
    /// `binpack.memory`.
    pub memory: i64,
    /// `binpack.resources` with their `binpack.resources.<name>` weights.
    pub resources: BTreeMap<String, i64>,
}

/// Builds the plugin. Weights default to 1; a negative resource weight counts 1, as
/// in Volcano.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    Binpack::from_args(ctx).map(|b| Some(Box::new(b) as Box<dyn Plugin>))
}

impl Binpack {
    fn from_args(ctx: &BuildContext<'_>) -> Result<Self, ConfError> {
        let args = &ctx.args;
        let weight_of = |key: &str| -> Result<i64, ConfError> {
            let w = args.integer_at_least(key, i64::MIN)?.unwrap_or(1);
            Ok(if w < 0 { 1 } else { w })
        };
        let names: Vec<String> = args
            .string(RESOURCES)?
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let mut resources = BTreeMap::new();
        for name in &names {
            resources.insert(
                name.clone(),
                weight_of(&format!("{RESOURCE_PREFIX}{name}"))?,
            );
        }
        for (key, _) in args.iter() {
            if let Some(name) = key.strip_prefix(RESOURCE_PREFIX) {
                if !names.iter().any(|n| n == name) {
                    return Err(args.error(key, format!("{name} is not listed in {RESOURCES}")));
                }
            } else if ![WEIGHT, CPU, MEMORY, RESOURCES].contains(&key) {
                return Err(args.error(
                    key,
                    format!("unknown argument (expected {WEIGHT}, {CPU}, {MEMORY}, {RESOURCES}, {RESOURCE_PREFIX}<name>)"),
                ));
            }
        }
        let weight = args.integer_at_least(WEIGHT, 0)?.unwrap_or(1);
        Ok(Self {
            weight,
            cpu: weight_of(CPU)?,
            memory: weight_of(MEMORY)?,
            resources,
        })
    }

    fn weight_for(&self, resource: &str) -> Option<i64> {
        match resource {
            "cpu" => Some(self.cpu),
            "memory" => Some(self.memory),
            other => self.resources.get(other).copied(),
        }
    }

    /// The task's score on the node.
    pub fn score(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        let mut score = 0.0;
        let mut weights = 0i64;
        for (resource, request) in task.resreq.iter() {
            if request == 0 {
                continue;
            }
            let Some(weight) = self.weight_for(resource) else {
                continue;
            };
            let (capacity, used) = capacity_and_used(resource, node, task.dims);
            score += resource_score(request as f64, capacity, used, weight);
            weights += weight;
        }
        if weights > 0 {
            score /= weights as f64;
        }
        score * MAX_NODE_SCORE * self.weight as f64
    }
}

/// One resource's share of the node once the task is on it, weighted; 0 when the
/// node has none of it or the task would not fit.
fn resource_score(request: f64, capacity: f64, used: f64, weight: i64) -> f64 {
    if capacity == 0.0 || weight == 0 {
        return 0.0;
    }
    let after = request + used;
    if after > capacity {
        return 0.0;
    }
    after * weight as f64 / capacity
}

impl Plugin for Binpack {
    fn name(&self) -> &'static str {
        "binpack"
    }

    fn scores_nodes(&self) -> bool {
        self.weight != 0
    }

    fn node_order(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        self.score(task, node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::model::GpuDevice;
    use crate::fit::NodeView;
    use crate::resources::{Resources, VgpuDims};
    use crate::usage::GpuUsage;
    use crate::volcano::conf::SchedulerConf;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    const GI: i64 = 1 << 30;

    fn plugin(args: &str) -> Binpack {
        let conf = SchedulerConf::parse(&format!(
            "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n{args}"
        ))
        .unwrap();
        let option = &conf.tiers[0].plugins[0];
        let ctx = BuildContext {
            args: crate::volcano::framework::arguments::Arguments::new(
                "tiers[0].plugins[0]",
                "binpack",
                &option.arguments,
            ),
            option,
            conf: &conf,
        };
        Binpack::from_args(&ctx).unwrap()
    }

    fn gpu(i: u32) -> GpuDevice {
        GpuDevice {
            id: Arc::from(format!("GPU-{i}")),
            index: i,
            count: 1,
            devmem: 81559,
            devcore: 100,
            model: "NVIDIA H100 80GB HBM3".into(),
            numa: 0,
            health: true,
            mode: "hami-core".into(),
            pair_scores: Default::default(),
            mig_profiles: Vec::new(),
        }
    }

    /// Volcano's binpack test table (pkg/scheduler/plugins/binpack): three nodes,
    /// four pods, two sets of weights; `nvidia.com/gpu` here comes from the node's
    /// registered GPUs, `example.com/foo` from its allocatable.
    #[test]
    fn volcano_worked_examples() {
        let cpu_mem = |cpu: f64, mem: i64| {
            Resources::from_milli([("cpu", (cpu * 1000.0) as i64), ("memory", mem * GI * 1000)])
        };
        let mut n3_alloc = cpu_mem(2.0, 4);
        n3_alloc.set("example.com/foo", 16_000);
        let nodes: Vec<(&str, Resources, Resources, usize)> = vec![
            ("n1", cpu_mem(2.0, 4), cpu_mem(1.0, 1), 0),
            ("n2", cpu_mem(4.0, 16), Resources::new(), 4),
            ("n3", n3_alloc, cpu_mem(1.5, 0), 0),
        ];
        let mut p3 = cpu_mem(2.0, 10);
        p3.set("nvidia.com/gpu", 2000);
        let mut p4 = cpu_mem(3.0, 4);
        p4.set("example.com/foo", 3000);
        let pods = [
            ("p1", cpu_mem(1.0, 1)),
            ("p2", cpu_mem(1.5, 0)),
            ("p3", p3),
            ("p4", p4),
        ];
        let cases: [(&str, [[f64; 3]; 4]); 2] = [
            (
                "      binpack.weight: 10\n      binpack.cpu: 2\n      binpack.memory: 3\n      binpack.resources: nvidia.com/gpu, example.com/foo\n      binpack.resources.nvidia.com/gpu: 7\n      binpack.resources.example.com/foo: 8\n",
                [
                    [700.0, 137.5, 150.0],
                    [0.0, 375.0, 0.0],
                    [0.0, 531.25, 0.0],
                    [0.0, 173.076923076, 346.153846153],
                ],
            ),
            (
                "      binpack.weight: 1\n      binpack.cpu: 1\n      binpack.memory: 1\n      binpack.resources: nvidia.com/gpu\n      binpack.resources.nvidia.com/gpu: 23\n",
                [
                    [75.0, 15.625, 12.5],
                    [0.0, 37.5, 0.0],
                    [0.0, 50.5, 0.0],
                    [0.0, 50.0, 50.0],
                ],
            ),
        ];
        let dims = VgpuDims::default();
        let cordoned = BTreeSet::new();
        for (args, expected) in cases {
            let b = plugin(args);
            for (pi, (pod, resreq)) in pods.iter().enumerate() {
                for (ni, (node, alloc, used, gpus)) in nodes.iter().enumerate() {
                    let devices: Vec<GpuDevice> = (0..*gpus as u32).map(gpu).collect();
                    let usage = vec![GpuUsage::default(); *gpus];
                    let vendor = vec![true; *gpus];
                    let models = vec!["nvidia h100 80gb hbm3".to_string(); *gpus];
                    let facts = NodeFacts {
                        name: node,
                        gpus: NodeView {
                            devices: &devices,
                            usage: &usage,
                            cordoned: &cordoned,
                            is_vendor: &vendor,
                            model_lower: &models,
                        },
                        allocatable: alloc,
                        requested: used,
                        traits: None,
                        measured: crate::node_metrics::MeasuredUsage::NOT_COLLECTED,
                    };
                    let task = TaskFacts {
                        namespace: "c1",
                        name: pod,
                        gpu: None,
                        resreq,
                        pod: None,
                        queue: None,
                        dims: &dims,
                        pod_affinity: None,
                        preferred_pod_affinity: None,
                    };
                    let score = b.score(&task, &facts);
                    assert!(
                        (score - expected[pi][ni]).abs() < 1e-6,
                        "{pod} on {node}: {score} != {}",
                        expected[pi][ni]
                    );
                }
            }
        }
    }

    #[test]
    fn arguments_follow_volcano_and_misspellings_are_refused() {
        let b = plugin(
            "      binpack.weight: 10\n      binpack.cpu: 5\n      binpack.memory: 2\n      binpack.resources: nvidia.com/gpu, example.com/foo\n      binpack.resources.nvidia.com/gpu: 7\n      binpack.resources.example.com/foo: -3\n",
        );
        assert_eq!((b.weight, b.cpu, b.memory), (10, 5, 2));
        assert_eq!(
            b.resources,
            BTreeMap::from([
                ("example.com/foo".to_string(), 1),
                ("nvidia.com/gpu".to_string(), 7)
            ])
        );
        for (bad, needle) in [
            (
                "      binpack.wieght: 3\n",
                "binpack.wieght: unknown argument",
            ),
            (
                "      binpack.resources.nvidia.com/gpu: 3\n",
                "nvidia.com/gpu is not listed in binpack.resources",
            ),
            (
                "      binpack.weight: heavy\n",
                "binpack.weight: expected a number",
            ),
        ] {
            let e = crate::volcano::load_conf(&format!(
                "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n{bad}"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(needle) && e.contains("(binpack)"), "{e}");
        }
        // Weight 0 scores nothing, so node choice keeps its fast path.
        assert!(!plugin("      binpack.weight: 0\n").scores_nodes());
    }
}
