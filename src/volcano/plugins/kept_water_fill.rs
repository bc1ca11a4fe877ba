//! proportion's water-filling, kept from one session to the next: its result
//! depends only on the cluster's total and each queue's weight, guarantee,
//! capability and request. Comparing those few figures with the last session's
//! costs a handful of queues, while filling again costs rounds over every queue
//! and dimension, so a session whose queues and total did not move reuses the
//! last shares.

use crate::resources::Resources;
use crate::volcano::proportion::{ProportionInput, water_fill};
use std::collections::BTreeMap;

/// Per queue: real capability and deserved amount.
pub(crate) type QueueShares = BTreeMap<String, (Resources, Resources)>;

/// The last water-filling: what it was computed from and what it gave.
#[derive(Debug, Default)]
pub(crate) struct KeptWaterFill {
    total: Resources,
    inputs: Vec<(String, ProportionInput)>,
    shares: QueueShares,
}

impl KeptWaterFill {
    /// The shares of `inputs` (by queue name, in queue-name order) out of
    /// `total`: filled again only when any of them differs from the last.
    pub(crate) fn shares(
        &mut self,
        total: &Resources,
        inputs: Vec<(String, ProportionInput)>,
    ) -> &QueueShares {
        if self.total != *total || self.inputs != inputs {
            let only_inputs: Vec<ProportionInput> =
                inputs.iter().map(|(_, input)| input.clone()).collect();
            self.shares = inputs
                .iter()
                .map(|(name, _)| name.clone())
                .zip(
                    water_fill(total, &only_inputs)
                        .into_iter()
                        .map(|s| (s.real_capability, s.deserved)),
                )
                .collect();
            self.total = total.clone();
            self.inputs = inputs;
        }
        &self.shares
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, weight: u32, gpus: i64) -> (String, ProportionInput) {
        (
            name.to_owned(),
            ProportionInput {
                weight,
                guarantee: Resources::new(),
                capability: None,
                request: Resources::from_units([("nvidia.com/gpu", gpus)]),
            },
        )
    }

    fn deserved_gpus(shares: &QueueShares) -> Vec<(String, i64)> {
        shares
            .iter()
            .map(|(name, (_, deserved))| (name.clone(), deserved.get("nvidia.com/gpu") / 1000))
            .collect()
    }

    #[test]
    fn shares_follow_every_input_and_the_total() {
        let mut kept = KeptWaterFill::default();
        let total = Resources::from_units([("nvidia.com/gpu", 8)]);
        let first = deserved_gpus(kept.shares(&total, vec![queue("a", 1, 8), queue("b", 1, 8)]));
        assert_eq!(first, [("a".to_owned(), 4), ("b".to_owned(), 4)]);
        // Same figures again: the same shares.
        let again = deserved_gpus(kept.shares(&total, vec![queue("a", 1, 8), queue("b", 1, 8)]));
        assert_eq!(again, first);
        // A request below the fair share frees the rest for the other queue.
        let request = deserved_gpus(kept.shares(&total, vec![queue("a", 1, 2), queue("b", 1, 8)]));
        assert_eq!(request, [("a".to_owned(), 2), ("b".to_owned(), 6)]);
        // A weight.
        let weight = deserved_gpus(kept.shares(&total, vec![queue("a", 3, 8), queue("b", 1, 8)]));
        assert_eq!(weight, [("a".to_owned(), 6), ("b".to_owned(), 2)]);
        // The cluster's total.
        let bigger = Resources::from_units([("nvidia.com/gpu", 16)]);
        let total_changed =
            deserved_gpus(kept.shares(&bigger, vec![queue("a", 3, 8), queue("b", 1, 8)]));
        assert_eq!(total_changed, [("a".to_owned(), 8), ("b".to_owned(), 8)]);
        // A queue gone.
        let one = deserved_gpus(kept.shares(&bigger, vec![queue("b", 1, 8)]));
        assert_eq!(one, [("b".to_owned(), 8)]);
    }
}
