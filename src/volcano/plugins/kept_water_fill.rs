//! proportion's water-filling, kept from one session to the next: its result
//! depends only on the cluster's total and each queue's weight, guarantee,
//! capability and request. Comparing those few figures with the last session's
//! costs a handful of queues, while filling again costs rounds over every queue
//! and dimension, so a session whose queues and total did not move reuses the
//! last shares.

use crate::resources::Resources;
use crate::volcano::proportion::{ProportionInput, water_fill};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Per queue: real capability and deserved amount.
pub(crate) type QueueShares = BTreeMap<String, (Resources, Resources)>;

/// The last water-filling: what it was computed from and what it gave. The
/// shares are behind an `Arc` so a session takes them without copying a map
/// of resources per queue.
#[derive(Debug, Default)]
pub(crate) struct KeptWaterFill {
    total: Resources,
    names: Vec<String>,
    inputs: Vec<ProportionInput>,
    shares: Arc<QueueShares>,
}

impl KeptWaterFill {
    /// The shares of `queues` (by queue name, in queue-name order) out of
    /// `total`: filled again only when any of them differs from the last.
    /// Names are only copied when the set of queues changed.
    pub(crate) fn shares<'a>(
        &mut self,
        total: &Resources,
        queues: impl IntoIterator<Item = (&'a str, ProportionInput)>,
    ) -> Arc<QueueShares> {
        let (names, inputs): (Vec<&str>, Vec<ProportionInput>) = queues.into_iter().unzip();
        let same_names = self
            .names
            .iter()
            .map(String::as_str)
            .eq(names.iter().copied());
        if !same_names || self.total != *total || self.inputs != inputs {
            if !same_names {
                self.names = names.iter().map(|name| (*name).to_owned()).collect();
            }
            self.shares = Arc::new(
                self.names
                    .iter()
                    .cloned()
                    .zip(
                        water_fill(total, &inputs)
                            .into_iter()
                            .map(|s| (s.real_capability, s.deserved)),
                    )
                    .collect(),
            );
            if self.total != *total {
                self.total = total.clone();
            }
            self.inputs = inputs;
        }
        Arc::clone(&self.shares)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, weight: u32, gpus: i64) -> (&str, ProportionInput) {
        (
            name,
            ProportionInput {
                weight,
                guarantee: Resources::new(),
                capability: None,
                request: Resources::from_units([("nvidia.com/gpu", gpus)]),
            },
        )
    }

    fn deserved_gpus(shares: Arc<QueueShares>) -> Vec<(String, i64)> {
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

    /// Random queue sets, one after the other, through one kept fill: every
    /// answer is the plain water-filling of that set, whatever came before.
    mod kept_matches_plain {
        use super::*;
        use proptest::prelude::*;

        fn queues() -> impl Strategy<Value = Vec<(u8, u32, i64)>> {
            proptest::collection::vec((0u8..4, 1u32..4, 0i64..12), 0..5)
        }

        proptest! {
            #[test]
            fn every_answer_is_the_plain_fill(
                rounds in proptest::collection::vec((4i64..20, queues()), 1..8)
            ) {
                let mut kept = KeptWaterFill::default();
                for (gpus, set) in rounds {
                    let by_name: BTreeMap<String, (u32, i64)> = set
                        .into_iter()
                        .map(|(n, w, g)| (format!("q{n}"), (w, g)))
                        .collect();
                    let named: Vec<(&str, ProportionInput)> = by_name
                        .iter()
                        .map(|(name, (w, g))| queue(name, *w, *g))
                        .collect();
                    let total = Resources::from_units([("nvidia.com/gpu", gpus)]);
                    let inputs: Vec<ProportionInput> =
                        named.iter().map(|(_, input)| input.clone()).collect();
                    let plain: QueueShares = by_name
                        .keys()
                        .cloned()
                        .zip(
                            water_fill(&total, &inputs)
                                .into_iter()
                                .map(|s| (s.real_capability, s.deserved)),
                        )
                        .collect();
                    prop_assert_eq!(&*kept.shares(&total, named), &plain);
                }
            }
        }
    }
}
