//! The bytes of trace lines waiting for the writer, bounded: the recorder takes
//! a line's bytes before queueing it and the writer gives them back once the
//! line is written (or given up on). Counting events alone would let a few
//! thousand pods with megabytes of annotations each hold gigabytes while the
//! disk is slow; counting bytes keeps what a stuck disk can cost the server's
//! memory to one known figure.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes queued for the writer, shared by the recorder and the writer.
#[derive(Debug, Clone)]
pub struct QueueBudget {
    used: Arc<AtomicUsize>,
    limit: usize,
}

impl QueueBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            used: Arc::new(AtomicUsize::new(0)),
            limit,
        }
    }

    /// Whether nothing more fits: checked before a line is made at all, so a
    /// stuck disk costs a request no serialisation.
    pub fn is_full(&self) -> bool {
        self.used.load(Ordering::Relaxed) >= self.limit
    }

    /// Takes `bytes` if they fit; false (and nothing taken) otherwise.
    pub fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    /// Gives back the bytes of a line written or given up on.
    pub fn give_back(&self, bytes: usize) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// Bytes queued now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_fit_until_the_limit_and_room_comes_back_as_they_are_written() {
        let budget = QueueBudget::new(100);
        assert!(budget.try_take(60));
        assert!(!budget.try_take(41), "over the limit");
        assert!(budget.try_take(40));
        assert!(budget.is_full());
        budget.give_back(60);
        assert_eq!(budget.used(), 40);
        assert!(budget.try_take(60));
    }
}
