//! Some of a source's candidates: a node choice confined to part of the cluster
//! (the nodes of one HyperNode, for a gang that must stay inside it).

use super::judge::NodeFacts;
use super::rejection::NodeRejection;
use super::source::{NodeSource, RankFacts};
use crate::device::request::PodRequest;
use crate::fit::{FitRequest, Placement, QuotaHeadroom};

/// The candidates of `source` at `positions` (ascending), addressed `0..len()`.
#[derive(Debug, Clone, Copy)]
pub struct NodeSubset<'a, S: NodeSource + ?Sized> {
    source: &'a S,
    positions: &'a [usize],
}

impl<'a, S: NodeSource + ?Sized> NodeSubset<'a, S> {
    /// The subset; `positions` must be ascending (so that name order is kept when
    /// the source is sorted by name) and within the source.
    pub fn new(source: &'a S, positions: &'a [usize]) -> Self {
        debug_assert!(positions.windows(2).all(|w| w[0] < w[1]));
        debug_assert!(positions.iter().all(|&p| p < source.len()));
        Self { source, positions }
    }
}

impl<S: NodeSource + ?Sized> NodeSource for NodeSubset<'_, S> {
    fn len(&self) -> usize {
        self.positions.len()
    }

    fn name(&self, i: usize) -> &str {
        self.source.name(self.positions[i])
    }

    fn sorted_by_name(&self) -> bool {
        self.source.sorted_by_name()
    }

    fn rank(&self, i: usize, request: &PodRequest) -> Option<RankFacts> {
        self.source.rank(self.positions[i], request)
    }

    fn fit(&self, i: usize, request: &FitRequest<'_>) -> Result<Placement, NodeRejection> {
        self.source.fit(self.positions[i], request)
    }

    fn quota(&self, namespace: &str) -> QuotaHeadroom {
        self.source.quota(namespace)
    }

    fn facts(&self, i: usize) -> Option<NodeFacts<'_>> {
        self.source.facts(self.positions[i])
    }
}
