//! Every node's allocatable resources summed, kept as nodes change instead of
//! added up again each planning cycle. The sum holds a dimension exactly when
//! some node offers it (even at zero), as adding the nodes up would.

use crate::resources::Resources;
use std::collections::BTreeMap;

/// The sum, and how many nodes offer each dimension.
#[derive(Debug, Default)]
pub struct AllocatableTotal {
    total: Resources,
    offered_by: BTreeMap<String, usize>,
}

impl AllocatableTotal {
    /// A node offered `before` and now offers `after`.
    pub fn replace(&mut self, before: &Resources, after: &Resources) {
        let mut total = std::mem::take(&mut self.total);
        total.saturating_sub(before);
        total.add(after);
        for (dim, _) in before.iter() {
            if let Some(count) = self.offered_by.get_mut(dim) {
                *count -= 1;
                if *count == 0 {
                    self.offered_by.remove(dim);
                }
            }
        }
        for (dim, _) in after.iter() {
            *self.offered_by.entry(dim.to_string()).or_default() += 1;
        }
        let mut kept = Resources::default();
        for (dim, value) in total.iter() {
            if self.offered_by.contains_key(dim) {
                kept.set(dim, value);
            }
        }
        self.total = kept;
    }

    /// The sum of what every node offers.
    pub fn get(&self) -> &Resources {
        &self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summed(nodes: &[&Resources]) -> Resources {
        let mut sum = Resources::default();
        for n in nodes {
            sum.add(n);
        }
        sum
    }

    #[test]
    fn the_kept_sum_is_what_adding_the_nodes_up_gives() {
        let a = Resources::from_units([("cpu", 8), ("pods", 0)]);
        let b = Resources::from_units([("cpu", 4), ("memory", 16)]);
        let b2 = Resources::from_units([("cpu", 2)]);
        let mut total = AllocatableTotal::default();
        total.replace(&Resources::default(), &a);
        total.replace(&Resources::default(), &b);
        assert_eq!(*total.get(), summed(&[&a, &b]));
        total.replace(&b, &b2);
        assert_eq!(
            *total.get(),
            summed(&[&a, &b2]),
            "memory no node offers is gone"
        );
        total.replace(&a, &Resources::default());
        assert_eq!(
            *total.get(),
            summed(&[&b2]),
            "a dimension offered at zero goes with its node"
        );
    }
}
