//! The nodes that can take a GPU at all, in score order, kept between cycles.
//!
//! A session's node choice for one pod used to rank every node: under binpack on
//! a thousand nodes that was most of a planning cycle in which one pod arrived,
//! and a `/filter` over the same nodes costs a quarter of it. Ranking without
//! plugin scores orders candidates by the node score alone (highest first under
//! binpack, lowest first under spread, ties by name), so the candidates can be
//! walked in that order and the walk stopped at the first that fits. The order of
//! the nodes the session has not changed is kept here and brought up to date only
//! for the nodes a new picture replaced; the few the session changed are ranked
//! by their changed score and merged in while walking.
//!
//! Only nodes that are usable and have a GPU with an open slot are kept: no other
//! node can hold a request for a GPU.

use super::nodes::SessionNode;
use std::cmp::Ordering;
use std::sync::Arc;

/// Positions of the nodes that can take a GPU, by score, then position.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreOrder {
    entries: Vec<(f64, u32)>,
}

/// The order the node choice ranks in: score (by `f64::total_cmp`), highest
/// first when `highest_first`, else lowest first; equal scores by position.
fn ranked_ahead(a: (f64, usize), b: (f64, usize), highest_first: bool) -> Ordering {
    let by_score = if highest_first {
        b.0.total_cmp(&a.0)
    } else {
        a.0.total_cmp(&b.0)
    };
    by_score.then(a.1.cmp(&b.1))
}

/// The order the kept entries are stored in: [`ranked_ahead`], lowest first.
fn by_score(a: &(f64, u32), b: &(f64, u32)) -> Ordering {
    ranked_ahead((a.0, a.1 as usize), (b.0, b.1 as usize), false)
}

impl ScoreOrder {
    /// The order of `nodes` (positions as in the slice).
    pub fn of(nodes: &[Arc<SessionNode>]) -> Self {
        let mut entries: Vec<(f64, u32)> = nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some((n.gpu_rank_score()?, u32::try_from(i).ok()?)))
            .collect();
        entries.sort_unstable_by(by_score);
        Self { entries }
    }

    /// Brings the order up to the node at `position` now being `new` instead of
    /// `old`.
    pub fn replace(&mut self, position: usize, old: &SessionNode, new: &SessionNode) {
        let Ok(at) = u32::try_from(position) else {
            return;
        };
        if let Some(score) = old.gpu_rank_score()
            && let Ok(i) = self.entries.binary_search_by(|e| by_score(e, &(score, at)))
        {
            self.entries.remove(i);
        }
        if let Some(score) = new.gpu_rank_score() {
            let entry = (score, at);
            let i = self
                .entries
                .binary_search_by(|e| by_score(e, &entry))
                .unwrap_or_else(|i| i);
            self.entries.insert(i, entry);
        }
    }

    /// How many nodes are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no node can take a GPU.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The kept nodes, highest score first when `highest_first`, else lowest
    /// first; equal scores by position.
    pub fn walk(&self, highest_first: bool) -> impl Iterator<Item = (f64, usize)> + '_ {
        ScoreWalk {
            entries: &self.entries,
            highest_first,
            group: 0..0,
            rest: 0..self.entries.len(),
        }
        .map(|(score, position)| (score, position as usize))
    }

    /// The kept nodes for which `unchanged` holds, merged with `changed`
    /// (`(score, position)` of the nodes a session changed, in any order) into
    /// one walk in ranking order.
    pub fn walk_merged<'a>(
        &'a self,
        highest_first: bool,
        mut changed: Vec<(f64, usize)>,
        unchanged: impl Fn(usize) -> bool + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        changed.sort_unstable_by(|a, b| ranked_ahead(*a, *b, highest_first));
        MergeRanked {
            kept: self
                .walk(highest_first)
                .filter(move |&(_, i)| unchanged(i))
                .peekable(),
            changed: changed.into_iter().peekable(),
            highest_first,
        }
    }
}

/// Two lists of ranked nodes, each in ranking order, walked as one.
struct MergeRanked<A: Iterator<Item = (f64, usize)>, B: Iterator<Item = (f64, usize)>> {
    kept: std::iter::Peekable<A>,
    changed: std::iter::Peekable<B>,
    highest_first: bool,
}

impl<A: Iterator<Item = (f64, usize)>, B: Iterator<Item = (f64, usize)>> Iterator
    for MergeRanked<A, B>
{
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let take_kept = match (self.kept.peek(), self.changed.peek()) {
            (Some(&k), Some(&c)) => ranked_ahead(k, c, self.highest_first).is_lt(),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let next = if take_kept {
            self.kept.next()
        } else {
            self.changed.next()
        };
        next.map(|(_, i)| i)
    }
}

/// A walk over score-ordered entries in either direction, equal scores always
/// by ascending position.
struct ScoreWalk<'a> {
    entries: &'a [(f64, u32)],
    highest_first: bool,
    /// The run of equal scores being walked.
    group: std::ops::Range<usize>,
    /// The entries not walked yet, outside `group`.
    rest: std::ops::Range<usize>,
}

impl Iterator for ScoreWalk<'_> {
    type Item = (f64, u32);

    fn next(&mut self) -> Option<Self::Item> {
        if !self.highest_first {
            let i = self.rest.next()?;
            return Some(self.entries[i]);
        }
        if self.group.is_empty() {
            let end = self.rest.end;
            let last = self.entries[..end].last()?.0;
            let mut start = end - 1;
            while start > self.rest.start && self.entries[start - 1].0.total_cmp(&last).is_eq() {
                start -= 1;
            }
            self.group = start..end;
            self.rest.end = start;
        }
        let i = self.group.next()?;
        Some(self.entries[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(scores: &[f64]) -> ScoreOrder {
        let mut entries: Vec<(f64, u32)> = scores
            .iter()
            .enumerate()
            .map(|(i, s)| (*s, i as u32))
            .collect();
        entries.sort_unstable_by(by_score);
        ScoreOrder { entries }
    }

    #[test]
    fn highest_first_walks_equal_scores_by_ascending_position() {
        let o = order(&[0.5, 0.9, 0.5, 0.9, 0.1]);
        let walked: Vec<usize> = o.walk(true).map(|(_, p)| p).collect();
        assert_eq!(walked, vec![1, 3, 0, 2, 4]);
        let walked: Vec<usize> = o.walk(false).map(|(_, p)| p).collect();
        assert_eq!(walked, vec![4, 0, 2, 1, 3]);
    }

    #[test]
    fn changed_nodes_are_merged_by_their_changed_score_and_left_out_of_the_kept_walk() {
        // Node 2 was 0.5 when kept; the session changed it to 0.9, tying nodes
        // 1 and 3, and node 4 to 0.5.
        let o = order(&[0.5, 0.9, 0.5, 0.9, 0.1]);
        let changed = vec![(0.5, 4), (0.9, 2)];
        let unchanged = |i: usize| i != 2 && i != 4;
        let walked: Vec<usize> = o.walk_merged(true, changed.clone(), unchanged).collect();
        assert_eq!(walked, vec![1, 2, 3, 0, 4]);
        let walked: Vec<usize> = o.walk_merged(false, changed, unchanged).collect();
        assert_eq!(walked, vec![0, 4, 1, 2, 3]);
    }

    #[test]
    fn an_empty_order_walks_nothing() {
        assert_eq!(ScoreOrder::default().walk(true).count(), 0);
        assert_eq!(ScoreOrder::default().walk(false).count(), 0);
    }
}
