//! Which pods' holdings (node, GPUs, or a pipelined promise) changed, in order,
//! so the planner's picture of the ledger looks again only at those instead of
//! asking the ledger about every one of tens of thousands of waiting members each
//! cycle. The journal keeps the most recent changes only: a reader that fell
//! further behind, or reads another ledger, is told to look at every pod again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many changes are kept: far more than arrive between two planning cycles,
/// and small enough that a ledger nobody plans on stays small.
const KEPT: usize = 1 << 16;

/// Ledgers are told apart so a reader's place in one is never taken for a place
/// in another.
static LEDGERS: AtomicU64 = AtomicU64::new(1);

/// Where a reader stopped reading a journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalCursor {
    ledger: u64,
    next: u64,
}

/// The UIDs of pods whose holding changed, oldest first.
#[derive(Debug)]
pub struct HoldingsJournal {
    ledger: u64,
    /// The position of the first kept change.
    first: u64,
    changed: VecDeque<Box<str>>,
}

impl Default for HoldingsJournal {
    fn default() -> Self {
        Self {
            ledger: LEDGERS.fetch_add(1, Ordering::Relaxed),
            first: 0,
            changed: VecDeque::new(),
        }
    }
}

impl HoldingsJournal {
    /// Records that `uid`'s holding changed.
    pub fn note(&mut self, uid: &str) {
        if self.changed.len() == KEPT {
            self.changed.pop_front();
            self.first += 1;
        }
        self.changed.push_back(uid.into());
    }

    /// Where a reader that has read everything so far stands.
    pub fn end(&self) -> JournalCursor {
        JournalCursor {
            ledger: self.ledger,
            next: self.first + self.changed.len() as u64,
        }
    }

    /// The pods whose holding changed since `cursor` (some may repeat), or `None`
    /// when that is no longer known: the reader must look at every pod.
    pub fn since(&self, cursor: JournalCursor) -> Option<impl Iterator<Item = &str>> {
        if cursor.ledger != self.ledger || cursor.next < self.first {
            return None;
        }
        let skip = usize::try_from(cursor.next - self.first).ok()?;
        Some(self.changed.iter().skip(skip).map(|uid| &**uid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_the_changes_after_its_cursor_only() {
        let mut journal = HoldingsJournal::default();
        journal.note("a");
        let cursor = journal.end();
        journal.note("b");
        journal.note("c");
        let seen: Vec<&str> = journal.since(cursor).expect("known").collect();
        assert_eq!(seen, ["b", "c"]);
        assert_eq!(journal.since(journal.end()).expect("known").count(), 0);
    }

    #[test]
    fn a_reader_too_far_behind_or_of_another_ledger_must_look_at_everything() {
        let mut journal = HoldingsJournal::default();
        let cursor = journal.end();
        for i in 0..=KEPT {
            journal.note(&i.to_string());
        }
        assert!(
            journal.since(cursor).is_none(),
            "the oldest change was dropped"
        );
        let other = HoldingsJournal::default();
        assert!(journal.since(other.end()).is_none(), "another ledger");
    }
}
