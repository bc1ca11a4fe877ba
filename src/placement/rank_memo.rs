//! Candidates whose ranking facts were looked up once, for one request.
//!
//! A search that ranks the same candidates again and again (the spare node for a
//! busy one tries a few ways of choosing before it settles) would otherwise look
//! every candidate up in its source at every pass: at 5,000 candidates one lookup
//! per node per pass cost ten times the `/filter` it was part of. Here each is
//! looked up once, in one pass, and every later pass reads a dense list.

use super::judge::NodeFacts;
use super::rejection::NodeRejection;
use super::source::{NodeSource, RankFacts};
use crate::device::request::PodRequest;
use crate::fit::{FitRequest, Placement, QuotaHeadroom};

/// `inner`'s candidates with their ranking facts for `request` read once.
pub struct RankMemo<'s, S: ?Sized> {
    inner: &'s S,
    request: &'s PodRequest,
    ranks: Vec<Option<RankFacts>>,
}

impl<'s, S: NodeSource + ?Sized> RankMemo<'s, S> {
    /// Looks up every candidate's ranking facts for `request`.
    pub fn new(inner: &'s S, request: &'s PodRequest) -> Self {
        Self {
            inner,
            request,
            ranks: (0..inner.len()).map(|i| inner.rank(i, request)).collect(),
        }
    }
}

impl<S: NodeSource + ?Sized> NodeSource for RankMemo<'_, S> {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn name(&self, i: usize) -> &str {
        self.inner.name(i)
    }

    fn sorted_by_name(&self) -> bool {
        self.inner.sorted_by_name()
    }

    fn rank(&self, i: usize, request: &PodRequest) -> Option<RankFacts> {
        // Only the request the facts were read for is answered from them.
        if std::ptr::eq(request, self.request) {
            self.ranks.get(i).copied().flatten()
        } else {
            self.inner.rank(i, request)
        }
    }

    fn fit(&self, i: usize, request: &FitRequest<'_>) -> Result<Placement, NodeRejection> {
        self.inner.fit(i, request)
    }

    fn quota(&self, namespace: &str) -> QuotaHeadroom {
        self.inner.quota(namespace)
    }

    fn facts(&self, i: usize) -> Option<NodeFacts<'_>> {
        self.inner.facts(i)
    }
}
