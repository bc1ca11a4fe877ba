//! Water-filling as first written, on maps: the reference the allocation-free
//! [`super::proportion::water_fill`] is checked against, decision for decision.

use super::proportion::{MAX_ROUNDS, ProportionInput, ProportionShare, real_capability};
use super::resources::Resources;
use proptest::prelude::*;

/// The water-filling computation for all queues at once; results are in input order.
fn water_fill_by_maps(total: &Resources, queues: &[ProportionInput]) -> Vec<ProportionShare> {
    let mut total_guarantee = Resources::new();
    for q in queues {
        total_guarantee.add(&q.guarantee);
    }
    let real: Vec<Resources> = queues
        .iter()
        .map(|q| real_capability(total, &total_guarantee, &q.guarantee, q.capability.as_ref()))
        .collect();
    let zero: Resources = total.dims().map(|d| (d.to_owned(), 0)).collect();
    let mut fair: Vec<Resources> = vec![zero; queues.len()];
    let mut clamped: Vec<Resources> = (0..queues.len())
        .map(|i| clamp(&fair[i], &real[i], &queues[i].request))
        .collect();
    let mut deserved: Vec<Resources> = (0..queues.len())
        .map(|i| clamped[i].max_amount(&queues[i].guarantee))
        .collect();
    // Every queue starts at its guarantee, so only the rest is shared out.
    let mut remaining = total.minus(&total_guarantee);
    // A queue whose request its guarantee already covers (in particular one with no
    // jobs, which Volcano leaves out of the computation) takes no part in sharing.
    let mut met: Vec<bool> = queues
        .iter()
        .zip(&deserved)
        .map(|(q, d)| q.weight == 0 || q.request.fits_within_amount(d))
        .collect();

    for _ in 0..MAX_ROUNDS {
        let weight: u64 = queues
            .iter()
            .zip(&met)
            .filter(|(_, m)| !**m)
            .map(|(q, _)| u64::from(q.weight))
            .sum();
        if weight == 0 || remaining.is_empty() {
            break;
        }
        let shares: Vec<Option<Resources>> = queues
            .iter()
            .zip(&met)
            .map(|(q, m)| (!*m).then(|| share_of(&remaining, q.weight, weight)))
            .collect();

        // Skip rounds that would only move `fair` below a guarantee floor.
        let skip = rounds_without_event(queues, &fair, &real, &shares).saturating_sub(1);
        if skip > 0 {
            for (f, s) in fair.iter_mut().zip(&shares) {
                if let Some(s) = s {
                    for (dim, amount) in s.iter() {
                        let step = i64::try_from(i128::from(amount) * i128::from(skip))
                            .unwrap_or(i64::MAX);
                        f.set(dim, f.get(dim).saturating_add(step));
                    }
                }
            }
        }

        let mut consumed = Resources::new();
        for (i, q) in queues.iter().enumerate() {
            let Some(share) = &shares[i] else { continue };
            fair[i].add(share);
            let new_clamped = clamp(&fair[i], &real[i], &q.request);
            let new_deserved = new_clamped.max_amount(&q.guarantee);
            consumed.add(&new_deserved.minus(&deserved[i]));
            let unchanged = new_clamped == clamped[i];
            clamped[i] = new_clamped;
            deserved[i] = new_deserved;
            if unchanged || q.request.fits_within_amount(&deserved[i]) {
                met[i] = true;
            }
        }
        remaining.saturating_sub(&consumed);
    }

    real.into_iter()
        .zip(deserved)
        .map(|(real_capability, deserved)| ProportionShare {
            real_capability,
            deserved,
        })
        .collect()
}

/// `remaining × weight / total_weight` per dimension, rounded down.
fn share_of(remaining: &Resources, weight: u32, total_weight: u64) -> Resources {
    remaining
        .iter()
        .map(|(dim, r)| {
            let s = i128::from(r) * i128::from(weight) / i128::from(total_weight.max(1));
            (dim.to_owned(), i64::try_from(s).unwrap_or(i64::MAX))
        })
        .collect()
}

/// `min(fair, realCapability, request)` on the dimensions of `fair` (the cluster's).
fn clamp(fair: &Resources, real: &Resources, request: &Resources) -> Resources {
    fair.iter()
        .map(|(dim, f)| {
            let hi = upper(real, request, dim);
            (dim.to_owned(), f.min(hi))
        })
        .collect()
}

/// `min(realCapability, request)` for one dimension (request absent = 0).
fn upper(real: &Resources, request: &Resources, dim: &str) -> i64 {
    real.limit(dim).unwrap_or(i64::MAX).min(request.get(dim))
}

/// A lower bound on the number of rounds with the given shares until some unmet
/// queue's deserved amount changes or its clamped share stops moving (at least 1).
/// Rounds before that only raise `fair` below guarantee floors.
fn rounds_without_event(
    queues: &[ProportionInput],
    fair: &[Resources],
    real: &[Resources],
    shares: &[Option<Resources>],
) -> u64 {
    let mut best = u64::MAX;
    for (i, q) in queues.iter().enumerate() {
        let Some(share) = &shares[i] else { continue };
        let mut moving = false;
        for (dim, s) in share.iter() {
            let f = fair[i].get(dim);
            let hi = upper(&real[i], &q.request, dim);
            if s <= 0 || f >= hi {
                continue;
            }
            moving = true;
            let g = q.guarantee.get(dim);
            // Round in which min(fair, hi) passes the floor, if it ever does.
            let cross = if hi > g {
                Some(if f > g { 1 } else { div_floor(g - f, s) + 1 })
            } else {
                None
            };
            // Round after which min(fair, hi) stops moving.
            let saturate = div_ceil(hi - f, s).saturating_add(1);
            best = best.min(cross.map_or(saturate, |c| c.min(saturate)));
        }
        if !moving {
            // Nothing moves for this queue: it is met in the very next round.
            return 1;
        }
    }
    best.max(1)
}

fn div_floor(a: i64, b: i64) -> u64 {
    u64::try_from(a / b).unwrap_or(0)
}

fn div_ceil(a: i64, b: i64) -> u64 {
    u64::try_from(a / b + i64::from(a % b != 0)).unwrap_or(0)
}

const DIMS: [&str; 4] = ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/gpumem"];

fn arb_resources() -> impl Strategy<Value = Resources> {
    proptest::collection::btree_map(
        proptest::sample::select(DIMS.to_vec()),
        prop_oneof![Just(0_i64), 0_i64..20_000, 0_i64..5_000_000],
        0..4,
    )
    .prop_map(Resources::from_milli)
}

fn arb_queue() -> impl Strategy<Value = ProportionInput> {
    (
        prop_oneof![Just(0_u32), 1_u32..10],
        arb_resources(),
        proptest::option::of(arb_resources()),
        arb_resources(),
    )
        .prop_map(|(weight, guarantee, capability, request)| ProportionInput {
            weight,
            guarantee,
            capability,
            request,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn the_filling_decides_as_the_one_on_maps(
        total in arb_resources(),
        queues in proptest::collection::vec(arb_queue(), 0..6),
    ) {
        prop_assert_eq!(
            super::proportion::water_fill(&total, &queues),
            water_fill_by_maps(&total, &queues)
        );
    }
}
