//! How a node scores for a waiting task of a bucket (Volcano's bucket score):
//!
//! ```text
//! raw   = tasks of the bucket placed on the node
//!       − tasks on the node the task repels (when it repels any)
//!       + tasks of the bucket still waiting (the task included)
//!       − waiting tasks that would have to go elsewhere, the node being too
//!         small for the whole bucket
//! score = raw × task-topology.weight × 100 / tasks in the largest bucket
//! ```
//!
//! So the node that already holds the task's bucket wins, a node holding tasks
//! it repels loses, and among empty nodes the one that can take the whole
//! bucket wins. A node the task itself does not fit scores 0.
//!
//! Whether requests fit is judged on the node's free amounts summed over its
//! GPUs (vGPU slots, memory, cores) and its allocatable CPU and memory, the
//! figures every node-scoring plugin reads (dimensions a node reports nothing
//! for are left to the fit). Volcano takes the waiting tasks out in no
//! particular order until the rest fits; here the ones that would be placed
//! last go first, so the score is the same every time.

use super::buckets::JobBuckets;
use crate::placement::NodeFacts;
use crate::resources::{Resources, VgpuDims};
use crate::volcano::plugins::binpack::MAX_NODE_SCORE;
use crate::volcano::plugins::node_resource::capacity_and_used;

impl JobBuckets {
    /// The node's score for the bucketed task `uid` asking `request`, with the
    /// plugin's weight; 0 for a task in no bucket.
    pub fn node_score(
        &self,
        uid: &str,
        request: &Resources,
        node: &NodeFacts<'_>,
        dims: &VgpuDims,
        weight: i64,
    ) -> f64 {
        let raw = self.raw_score(uid, request, node, dims);
        let score = raw.saturating_mul(weight) as f64;
        if self.largest == 0 {
            return score;
        }
        score * MAX_NODE_SCORE / self.largest as f64
    }

    fn raw_score(
        &self,
        uid: &str,
        request: &Resources,
        node: &NodeFacts<'_>,
        dims: &VgpuDims,
    ) -> i64 {
        if !fits(request, node, dims) {
            return 0;
        }
        let Some(member) = self.members.get(uid) else {
            return 0;
        };
        let bucket = &self.buckets[member.bucket];
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let mut score = count(bucket.placed_on.get(node.name).copied().unwrap_or(0));
        if let Some(roles) = self.roles_on_node.get(node.name) {
            score += self.relations.pull(&member.role, roles, true).min(0);
        }
        score += count(bucket.waiting.len());
        if fits(&bucket.request, node, dims) {
            return score;
        }
        let mut remaining = bucket.request.clone();
        for other in bucket
            .waiting
            .iter()
            .rev()
            .filter(|w| w.uid != uid && !w.request.is_empty())
        {
            remaining.saturating_sub(&other.request);
            score -= 1;
            if fits(&remaining, node, dims) {
                break;
            }
        }
        score
    }
}

/// Whether `request` fits in what the node has free, dimension by dimension.
fn fits(request: &Resources, node: &NodeFacts<'_>, dims: &VgpuDims) -> bool {
    request
        .iter()
        .filter(|(_, milli)| *milli > 0)
        .all(|(dim, milli)| {
            let (capacity, used) = capacity_and_used(dim, node, dims);
            capacity <= 0.0 || milli as f64 <= capacity - used
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::JobInfo;
    use crate::volcano::framework::testing::{gpu, job};
    use crate::volcano::plugins::task_topology::fixtures::{relations_among, waiting};
    use std::collections::BTreeSet;

    fn buckets(j: &JobInfo, affinity: &str, anti: &str) -> JobBuckets {
        JobBuckets::build(j, relations_among(&["ps", "worker"], affinity, anti, None))
    }

    /// A node of `free` unused whole GPUs, nothing else reported.
    struct TestNode {
        name: &'static str,
        devices: Vec<crate::device::model::GpuDevice>,
        usage: Vec<crate::usage::GpuUsage>,
        cordoned: BTreeSet<String>,
        vendor: Vec<bool>,
        models: Vec<String>,
        none: Resources,
    }

    impl TestNode {
        fn new(n: usize, name: &'static str, free: u32) -> Self {
            let devices: Vec<_> = (0..free).map(|i| gpu(n, i, 1)).collect();
            Self {
                name,
                usage: vec![Default::default(); devices.len()],
                vendor: vec![true; devices.len()],
                models: devices.iter().map(|d| d.model.to_lowercase()).collect(),
                devices,
                cordoned: BTreeSet::new(),
                none: Resources::new(),
            }
        }

        fn facts(&self) -> NodeFacts<'_> {
            NodeFacts {
                name: self.name,
                gpus: crate::fit::NodeView {
                    devices: &self.devices,
                    usage: &self.usage,
                    cordoned: &self.cordoned,
                    is_vendor: &self.vendor,
                    model_lower: &self.models,
                },
                allocatable: &self.none,
                requested: &self.none,
                traits: None,
                measured: crate::node_metrics::MeasuredUsage::NOT_COLLECTED,
            }
        }
    }

    /// Scores for one-GPU task `uid` of nodes named with their free whole GPUs.
    fn scores(b: &JobBuckets, uid: &str, nodes: &[(&'static str, u32)], weight: i64) -> Vec<f64> {
        let dims = VgpuDims::default();
        let request = Resources::from_units([("nvidia.com/gpu", 1)]);
        nodes
            .iter()
            .enumerate()
            .map(|(n, (name, free))| {
                let node = TestNode::new(n, name, *free);
                b.node_score(uid, &request, &node.facts(), &dims, weight)
            })
            .collect()
    }

    #[test]
    fn the_node_holding_the_bucket_wins() {
        let j = job(
            "tf",
            "q",
            3,
            vec![waiting("ps", 0), waiting("worker", 0), waiting("worker", 1)],
        );
        let mut b = buckets(&j, "ps,worker", "");
        let nodes = [("a", 4), ("b", 4)];
        // Nothing placed: every node that takes the whole bucket scores the same,
        // 3 waiting of a largest bucket of 3, times 100.
        assert_eq!(scores(&b, "uid-ps-0", &nodes, 1), vec![100.0, 100.0]);
        b.placed("uid-ps-0", Some("a"));
        // 1 placed + 2 waiting on a; 2 waiting elsewhere; times the weight 10.
        let expected = [30.0 * 100.0 / 3.0, 20.0 * 100.0 / 3.0];
        assert_eq!(scores(&b, "uid-worker-0", &nodes, 10), expected);
    }

    #[test]
    fn a_node_holding_a_repelled_task_loses() {
        let j = job("tf", "q", 2, vec![waiting("ps", 0), waiting("ps", 1)]);
        let mut b = buckets(&j, "", "ps");
        assert_eq!(b.largest, 1, "each ps has a bucket of its own");
        b.placed("uid-ps-0", Some("a"));
        // On a: 0 placed of its bucket − 1 repelled + 1 waiting; elsewhere 1.
        assert_eq!(
            scores(&b, "uid-ps-1", &[("a", 4), ("b", 4)], 1),
            vec![0.0, 100.0]
        );
    }

    #[test]
    fn a_node_too_small_for_the_bucket_scores_the_tasks_it_can_take() {
        let j = job(
            "tf",
            "q",
            4,
            (0..4)
                .map(|i| waiting("worker", i))
                .chain([waiting("ps", 0)])
                .collect(),
        );
        let b = buckets(&j, "ps,worker", "");
        assert_eq!(b.largest, 5);
        // Five one-GPU tasks: a takes all five, b two of them, c none but the
        // task (which fits, so scores 5 − 4 = 1), d nothing at all.
        assert_eq!(
            scores(&b, "uid-ps-0", &[("a", 5), ("b", 2), ("c", 1)], 1),
            vec![100.0, 40.0, 20.0]
        );
        let dims = VgpuDims::default();
        let ask = Resources::from_units([("nvidia.com/gpu", 1)]);
        let gpuless = TestNode::new(3, "d", 0);
        let full = gpuless.facts();
        assert!(
            fits(&ask, &full, &dims),
            "a node without GPUs reports no vGPU figures: left to the fit"
        );
    }

    #[test]
    fn tasks_in_no_bucket_score_zero() {
        let j = job("tf", "q", 1, vec![waiting("ps", 0)]);
        let b = buckets(&j, "ps,worker", "");
        assert_eq!(scores(&b, "uid-unknown", &[("a", 1)], 1), vec![0.0]);
    }
}
