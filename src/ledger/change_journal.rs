//! What changed, in order, by name: which pods' holdings (node, GPUs, or a
//! pipelined promise), which nodes' GPU entries, which nodes' CPU, memory,
//! traits or pods. The planner's picture of the ledger looks again only at
//! those instead of asking the ledger about every one of tens of thousands of
//! waiting members and every node each cycle. A journal keeps the most recent
//! changes only: a reader that fell further behind, or reads another journal,
//! is told to look at everything again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many changes are kept: far more than arrive between two planning cycles,
/// and small enough that a ledger nobody plans on stays small.
const KEPT: usize = 1 << 16;

/// Journals are told apart so a reader's place in one is never taken for a
/// place in another.
static JOURNALS: AtomicU64 = AtomicU64::new(1);

/// Where a reader stopped reading a journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalCursor {
    journal: u64,
    next: u64,
}

/// The names of what changed (pod UIDs, node names, gangs), oldest first.
#[derive(Debug)]
pub struct ChangeJournal<T = Box<str>> {
    journal: u64,
    /// The position of the first kept change.
    first: u64,
    changed: VecDeque<T>,
}

impl<T> Default for ChangeJournal<T> {
    fn default() -> Self {
        Self {
            journal: JOURNALS.fetch_add(1, Ordering::Relaxed),
            first: 0,
            changed: VecDeque::new(),
        }
    }
}

impl ChangeJournal {
    /// Records that what `name` names changed.
    pub fn note(&mut self, name: &str) {
        self.record(name.into());
    }
}

impl<T> ChangeJournal<T> {
    /// Records that `item` changed.
    pub fn record(&mut self, item: T) {
        if self.changed.len() == KEPT {
            self.changed.pop_front();
            self.first += 1;
        }
        self.changed.push_back(item);
    }

    /// Where a reader that has read everything so far stands.
    pub fn end(&self) -> JournalCursor {
        JournalCursor {
            journal: self.journal,
            next: self.first + self.changed.len() as u64,
        }
    }

    /// What changed since `cursor` (some names may repeat), or `None` when that
    /// is no longer known: the reader must look at everything.
    pub fn since(&self, cursor: JournalCursor) -> Option<impl Iterator<Item = &T>> {
        if cursor.journal != self.journal || cursor.next < self.first {
            return None;
        }
        let skip = usize::try_from(cursor.next - self.first).ok()?;
        // A range starts where it is asked to: skipping would walk every change
        // read before.
        Some(self.changed.range(skip..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_the_changes_after_its_cursor_only() {
        let mut journal: ChangeJournal = ChangeJournal::default();
        journal.note("a");
        let cursor = journal.end();
        journal.note("b");
        journal.note("c");
        let seen: Vec<&str> = journal
            .since(cursor)
            .expect("known")
            .map(|n| &**n)
            .collect();
        assert_eq!(seen, ["b", "c"]);
        assert_eq!(journal.since(journal.end()).expect("known").count(), 0);
    }

    #[test]
    fn a_reader_too_far_behind_or_of_another_journal_must_look_at_everything() {
        let mut journal: ChangeJournal = ChangeJournal::default();
        let cursor = journal.end();
        for i in 0..=KEPT {
            journal.note(&i.to_string());
        }
        assert!(
            journal.since(cursor).is_none(),
            "the oldest change was dropped"
        );
        let other: ChangeJournal = ChangeJournal::default();
        assert!(journal.since(other.end()).is_none(), "another journal");
    }
}
