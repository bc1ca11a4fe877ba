//! What a session changed, by node position. A session over a thousand nodes
//! places one or a few pods on one or a few of them, yet ranking asks about
//! every node it walks: a bit per node says whether there is a change to look
//! up, and the changes themselves sit in a short list sorted by position. A
//! slot per node (allocated, zeroed and dropped by every session) cost more
//! than the session's placement.

/// Values by node position, few of them set.
#[derive(Debug, Clone)]
pub(crate) struct ChangedNodes<T> {
    /// A bit per node position set; empty until the first change.
    marks: Vec<u64>,
    /// The changes, by position.
    entries: Vec<(usize, T)>,
}

impl<T> Default for ChangedNodes<T> {
    fn default() -> Self {
        Self {
            marks: Vec::new(),
            entries: Vec::new(),
        }
    }
}

/// The same changes at the same positions (the bits follow from them).
impl<T: PartialEq> PartialEq for ChangedNodes<T> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl<T> ChangedNodes<T> {
    fn marked(&self, i: usize) -> bool {
        self.marks
            .get(i / 64)
            .is_some_and(|word| word & (1 << (i % 64)) != 0)
    }

    fn slot(&self, i: usize) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&i, |(at, _)| *at)
    }

    /// The change at position `i`, if any.
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if !self.marked(i) {
            return None;
        }
        self.slot(i).ok().map(|s| &self.entries[s].1)
    }

    /// Whether position `i` has no change.
    pub(crate) fn is_unchanged(&self, i: usize) -> bool {
        !self.marked(i)
    }

    /// The change at position `i`, made with `make` if there is none.
    pub(crate) fn get_or_insert_with(&mut self, i: usize, make: impl FnOnce() -> T) -> &mut T {
        let s = match self.slot(i) {
            Ok(s) => s,
            Err(s) => {
                if self.marks.len() <= i / 64 {
                    self.marks.resize(i / 64 + 1, 0);
                }
                self.marks[i / 64] |= 1 << (i % 64);
                self.entries.insert(s, (i, make()));
                s
            }
        };
        &mut self.entries[s].1
    }

    /// Forgets the change at position `i`.
    pub(crate) fn remove(&mut self, i: usize) {
        if let Ok(s) = self.slot(i) {
            self.entries.remove(s);
            self.marks[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Every change with its position, by position.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.entries.iter().map(|(i, change)| (*i, change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_found_by_position_and_forgotten() {
        let mut changed: ChangedNodes<&str> = ChangedNodes::default();
        assert_eq!(changed.get(0), None);
        assert!(changed.is_unchanged(700));
        *changed.get_or_insert_with(700, || "a") = "b";
        changed.get_or_insert_with(3, || "c");
        changed.get_or_insert_with(64, || "d");
        assert_eq!(changed.get_or_insert_with(700, || "never"), &"b");
        assert_eq!(changed.get(700), Some(&"b"));
        assert_eq!(changed.get(3), Some(&"c"));
        assert_eq!(changed.get(64), Some(&"d"));
        for unset in [0, 2, 4, 63, 65, 699, 701, 10_000] {
            assert_eq!(changed.get(unset), None, "position {unset}");
            assert!(changed.is_unchanged(unset));
        }
        assert_eq!(
            changed.iter().collect::<Vec<_>>(),
            [(3, &"c"), (64, &"d"), (700, &"b")]
        );
        changed.remove(64);
        changed.remove(5);
        assert_eq!(changed.get(64), None);
        assert!(changed.is_unchanged(64));
        assert!(!changed.is_unchanged(3));
        assert_eq!(changed.iter().map(|(i, _)| i).collect::<Vec<_>>(), [3, 700]);
        // Equal by the changes alone, whatever bits were ever set.
        let mut same = ChangedNodes::default();
        same.get_or_insert_with(700, || "b");
        same.get_or_insert_with(3, || "c");
        assert_eq!(changed, same);
        same.remove(3);
        assert_ne!(changed, same);
    }
}
