//! The gangs of each queue by phase (the Queue status and the queue view show
//! them), kept from one cycle to the next. The session shares every verdict
//! that did not change with the last cycle's, so following the difference
//! between the last cycle's verdicts and this one's counts only the gangs
//! whose verdict changed, where counting every gang again each cycle cost a
//! walk over thousands of gangs waiting or running unchanged.

use crate::gang::status::QueueCounts;
use crate::volcano::framework::map_diff::verdict_changes;
use crate::volcano::framework::{GangPhase, GangVerdict, Verdicts};
use std::collections::BTreeMap;

/// Each queue's gangs by phase, with the verdicts they were counted from.
#[derive(Debug, Default)]
pub(crate) struct KeptQueueCounts {
    counted: Verdicts,
    counts: BTreeMap<String, QueueCounts>,
}

impl KeptQueueCounts {
    /// Brings the counts up to `verdicts`, and gives them (queues without a
    /// gang left out).
    pub(crate) fn follow(&mut self, verdicts: &Verdicts) -> &BTreeMap<String, QueueCounts> {
        for (_, old, new) in verdict_changes(&self.counted, verdicts).iter() {
            match (old, new) {
                (None, Some(new)) => count_in(&mut self.counts, new),
                (Some(old), Some(new)) => {
                    if (&old.queue, old.phase) != (&new.queue, new.phase) {
                        count_out(&mut self.counts, old);
                        count_in(&mut self.counts, new);
                    }
                }
                (Some(old), None) => count_out(&mut self.counts, old),
                (None, None) => {}
            }
        }
        self.counted = verdicts.clone();
        &self.counts
    }
}

fn count_in(counts: &mut BTreeMap<String, QueueCounts>, v: &GangVerdict) {
    match counts.get_mut(&v.queue) {
        Some(c) => c.add(v.phase),
        None => counts.entry(v.queue.clone()).or_default().add(v.phase),
    }
}

fn count_out(counts: &mut BTreeMap<String, QueueCounts>, v: &GangVerdict) {
    let Some(c) = counts.get_mut(&v.queue) else {
        return;
    };
    let phase = match v.phase {
        GangPhase::Pending => &mut c.pending,
        GangPhase::Inqueue => &mut c.inqueue,
        GangPhase::Running => &mut c.running,
        GangPhase::Completed => &mut c.completed,
    };
    *phase = phase.saturating_sub(1);
    if *c == QueueCounts::default() {
        counts.remove(&v.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::GangKey;
    use crate::volcano::framework::testing;
    use proptest::prelude::*;

    const PHASES: [GangPhase; 4] = [
        GangPhase::Pending,
        GangPhase::Inqueue,
        GangPhase::Running,
        GangPhase::Completed,
    ];

    fn verdict(gang: usize, queue: usize, phase: usize) -> (GangKey, GangVerdict) {
        let name = format!("g{gang}");
        let v = testing::verdict(&name, &format!("q{queue}"), PHASES[phase], None);
        (testing::gang_key(&name), v)
    }

    /// The gangs of each queue by phase, counted over every verdict.
    fn counted_anew(verdicts: &Verdicts) -> BTreeMap<String, QueueCounts> {
        let mut counts = BTreeMap::new();
        for v in verdicts.values() {
            count_in(&mut counts, v);
        }
        counts
    }

    proptest! {
        /// Cycle after cycle, gangs arrive, change queue or phase and leave
        /// (a few at a time, the rest shared with the last cycle's verdicts):
        /// the counts kept equal the counts over every verdict.
        #[test]
        fn kept_counts_equal_counts_over_every_verdict(
            cycles in prop::collection::vec(
                prop::collection::vec((0usize..40, prop::option::of((0usize..3, 0usize..4))), 0..12),
                1..12,
            )
        ) {
            let mut kept = KeptQueueCounts::default();
            let mut verdicts = Verdicts::new();
            for changes in cycles {
                for (gang, change) in changes {
                    match change {
                        Some((queue, phase)) => {
                            let (key, v) = verdict(gang, queue, phase);
                            verdicts.insert(key, std::sync::Arc::new(v));
                        }
                        None => {
                            verdicts.remove(&verdict(gang, 0, 0).0);
                        }
                    }
                }
                prop_assert_eq!(kept.follow(&verdicts), &counted_anew(&verdicts));
            }
        }
    }
}
