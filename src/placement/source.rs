//! Where a node choice finds its candidates.

use super::judge::NodeFacts;
use super::rejection::NodeRejection;
use crate::device::request::PodRequest;
use crate::fit::{FitRequest, Placement, QuotaHeadroom};

/// What ranking needs of one candidate, before any fit.
#[derive(Debug, Clone, Copy)]
pub struct RankFacts {
    /// The node score before placing (see `fit::node_score`).
    pub score: f64,
    /// False when the node's GPUs cannot be used at all.
    pub usable: bool,
    /// False when the node surely cannot hold the request (too few GPUs with room):
    /// the full fit would fail too.
    pub may_fit: bool,
}

/// Candidate nodes, addressed by position `0..len()`.
pub trait NodeSource {
    /// Number of candidates.
    fn len(&self) -> usize;

    /// Whether there is no candidate.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A candidate's name.
    fn name(&self, i: usize) -> &str;

    /// Whether candidates are sorted by name, so that position order is name
    /// order (ties are then broken without comparing strings).
    fn sorted_by_name(&self) -> bool {
        false
    }

    /// The candidates that can take a GPU at all, in the order ranking without
    /// plugin scores puts them (node score, highest first when `highest_first`,
    /// else lowest first; equal scores in position order), when the source keeps
    /// that order; `None`: every candidate is to be ranked. Candidates left out
    /// are surely not eligible for a request that asks for a GPU.
    fn in_score_order(&self, _highest_first: bool) -> Option<Box<dyn Iterator<Item = usize> + '_>> {
        None
    }

    /// Ranking facts; `None` for a node the source does not know.
    fn rank(&self, i: usize, request: &PodRequest) -> Option<RankFacts>;

    /// Fits the pod on the candidate, or says why not (in HAMi's words).
    fn fit(&self, i: usize, request: &FitRequest<'_>) -> Result<Placement, NodeRejection>;

    /// The namespace's quota headroom as this source sees it.
    fn quota(&self, namespace: &str) -> QuotaHeadroom;

    /// What plugins read of the candidate; `None` for a node the source does not know.
    fn facts(&self, i: usize) -> Option<NodeFacts<'_>>;
}
