//! proportion: weight-based fair share between queues (spec §C.7).
//!
//! Every queue gets a **deserved** amount per resource dimension by water-filling:
//! the cluster is handed out by weight in rounds; a queue that cannot take its whole
//! share (it asked for less, or hit its capability) keeps what it can use and the
//! rest goes back into the pool for the others in the next round.
//!
//! ```text
//! realCapability = min((total − Σ guarantees) + own guarantee, capability)
//! loop:
//!     W = Σ weights of queues not yet met
//!     for each unmet queue:
//!         fair     += remaining × weight / W
//!         deserved  = max(min(fair, realCapability, request), guarantee)
//!         met when request ≤ deserved, or min(fair, realCapability, request) did not move
//!     remaining −= what the deserved amounts grew by
//! until every queue is met or nothing remains
//! ```
//!
//! **Guarantees.** Volcano starts the loop with `remaining = total` and lifts a queue to
//! its guarantee with the final `max`, without charging the lift to `remaining`. With
//! guarantees set that hands out more than the cluster has: total 10, queue A
//! guaranteeing 6, three queues of equal weight: round one gives 3.33 each, A is lifted
//! to 6, and the deserved amounts sum to 12.67. Here every queue starts at its
//! guarantee, `remaining` starts at `total − Σ guarantees`, and only growth above the
//! guarantee is charged, so the deserved amounts never sum to more than the cluster
//! whenever the guarantees fit. `fair` (the weighted share before the guarantee floor)
//! is tracked apart from `deserved` so the floor stays a floor, not an addition. With
//! no guarantees the loop is Volcano's (a queue with an empty request sits out from
//! the start, as a queue without jobs does in Volcano).
//!
//! Rounds in which every queue still sits below its guarantee change nothing but
//! `fair`; they are skipped in one step ([`water_fill`] computes how many), which
//! replaces Volcano's "stop when `remaining` did not change" rule: that rule would stop
//! while a queue's share is still climbing towards its guarantee. Without guarantees
//! the two rules stop at the same round. When a queue below its guarantee floor keeps
//! its weight in `W` while others absorb the rest, the leftover shrinks geometrically;
//! the loop ends at the latest after [`MAX_ROUNDS`] rounds and then leaves the last few
//! milli-units unassigned.
//!
//! Amounts are integers in milli-units; each share is rounded down, so a handful of
//! milli-units may stay unassigned.

use super::dim_amounts::{Amounts, Dims};
use super::resources::{Excess, Resources};
use crate::placement::resource_fit::POD_COUNT;

/// Safety bound on water-filling rounds (see the module documentation).
pub const MAX_ROUNDS: usize = 1000;

/// One queue as the proportion plugin sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProportionInput {
    /// Queue weight (≥ 1).
    pub weight: u32,
    /// `spec.guarantee.resource` (empty when unset).
    pub guarantee: Resources,
    /// `spec.capability`; absent dimensions are unlimited.
    pub capability: Option<Resources>,
    /// Allocated plus pending requests of the queue's jobs.
    pub request: Resources,
}

/// The plugin's result for one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProportionShare {
    /// `min((total − Σ guarantees) + guarantee, capability)`; a limit (absent =
    /// unlimited).
    pub real_capability: Resources,
    /// The fair amount: present for every dimension of the cluster total and of the
    /// guarantee, with explicit zeros.
    pub deserved: Resources,
}

/// `min((total − total_guarantee) + guarantee, capability)`. Dimensions the cluster
/// does not have stay unlimited unless the capability names them.
pub fn real_capability(
    total: &Resources,
    total_guarantee: &Resources,
    guarantee: &Resources,
    capability: Option<&Resources>,
) -> Resources {
    let mut real = total.minus(total_guarantee);
    for (dim, g) in guarantee.iter() {
        if real.contains(dim) {
            real.set(dim, real.get(dim).saturating_add(g));
        }
    }
    match capability {
        Some(cap) => real.min_limit(cap),
        None => real,
    }
}

/// The water-filling computation for all queues at once; results are in input order.
/// The rounds run over [`Amounts`] in one list of dimensions, allocating nothing
/// (the proportion plugin fills again whenever a queue's request changes, which
/// is nearly every planning cycle).
pub fn water_fill(total: &Resources, queues: &[ProportionInput]) -> Vec<ProportionShare> {
    let mut total_guarantee = Resources::new();
    for q in queues {
        total_guarantee.add(&q.guarantee);
    }
    let real: Vec<Resources> = queues
        .iter()
        .map(|q| real_capability(total, &total_guarantee, &q.guarantee, q.capability.as_ref()))
        .collect();
    let dims = Dims::of(
        std::iter::once(total)
            .chain(queues.iter().flat_map(|q| [&q.guarantee, &q.request]))
            .chain(queues.iter().filter_map(|q| q.capability.as_ref())),
    );
    let filled = fill(
        &dims,
        &dims.amounts(total),
        &dims.amounts(&total_guarantee),
        queues,
        &real,
    );
    real.into_iter()
        .zip(filled)
        .map(|(real_capability, deserved)| ProportionShare {
            real_capability,
            deserved: dims.resources(&deserved),
        })
        .collect()
}

/// One queue while filling, over the filling's dimensions.
struct Filling {
    weight: u32,
    guarantee: Amounts,
    request: Amounts,
    real: Amounts,
    /// The weighted share before the guarantee floor.
    fair: Amounts,
    /// `min(fair, realCapability, request)`.
    clamped: Amounts,
    deserved: Amounts,
    met: bool,
    /// This round's share, while the queue is not met.
    share: Amounts,
}

/// The rounds of the module documentation; the deserved amounts in input order.
fn fill(
    dims: &Dims<'_>,
    total: &Amounts,
    total_guarantee: &Amounts,
    queues: &[ProportionInput],
    real: &[Resources],
) -> Vec<Amounts> {
    let n = dims.len();
    let mut filling: Vec<Filling> = queues
        .iter()
        .zip(real)
        .map(|(q, real)| {
            let (guarantee, request, real) = (
                dims.amounts(&q.guarantee),
                dims.amounts(&q.request),
                dims.amounts(real),
            );
            let fair = Amounts::zero_like(total);
            let mut clamped = Amounts::absent(n);
            clamp_into(&mut clamped, &fair, &real, &request);
            let mut deserved = clamped.clone();
            deserved.raise_to(&guarantee);
            // A queue whose request its guarantee already covers (in particular
            // one with no jobs, which Volcano leaves out of the computation) takes
            // no part in sharing.
            let met = q.weight == 0 || request.fits_within_amount(&deserved);
            Filling {
                weight: q.weight,
                guarantee,
                request,
                real,
                fair,
                clamped,
                deserved,
                met,
                share: Amounts::absent(n),
            }
        })
        .collect();
    // Every queue starts at its guarantee, so only the rest is shared out.
    let mut remaining = total.clone();
    remaining.saturating_sub(total_guarantee);
    let (mut consumed, mut new_clamped, mut new_deserved) =
        (Amounts::absent(n), Amounts::absent(n), Amounts::absent(n));

    for _ in 0..MAX_ROUNDS {
        let weight: u64 = filling
            .iter()
            .filter(|q| !q.met)
            .map(|q| u64::from(q.weight))
            .sum();
        if weight == 0 || remaining.is_empty() {
            break;
        }
        for q in filling.iter_mut().filter(|q| !q.met) {
            share_into(&mut q.share, &remaining, q.weight, weight);
        }

        // Skip rounds that would only move `fair` below a guarantee floor.
        let skip = rounds_without_event(&filling).saturating_sub(1);
        if skip > 0 {
            for q in filling.iter_mut().filter(|q| !q.met) {
                for (dim, amount) in q.share.present() {
                    let step =
                        i64::try_from(i128::from(amount) * i128::from(skip)).unwrap_or(i64::MAX);
                    q.fair.set(dim, q.fair.get(dim).saturating_add(step));
                }
            }
        }

        consumed.clear();
        for q in filling.iter_mut().filter(|q| !q.met) {
            q.fair.add(&q.share);
            clamp_into(&mut new_clamped, &q.fair, &q.real, &q.request);
            new_deserved.copy_from(&new_clamped);
            new_deserved.raise_to(&q.guarantee);
            consumed.add_growth(&new_deserved, &q.deserved);
            let unchanged = new_clamped == q.clamped;
            std::mem::swap(&mut q.clamped, &mut new_clamped);
            std::mem::swap(&mut q.deserved, &mut new_deserved);
            if unchanged || q.request.fits_within_amount(&q.deserved) {
                q.met = true;
            }
        }
        remaining.saturating_sub(&consumed);
    }
    filling.into_iter().map(|q| q.deserved).collect()
}

/// `remaining × weight / total_weight` per dimension of `remaining`, rounded down.
fn share_into(out: &mut Amounts, remaining: &Amounts, weight: u32, total_weight: u64) {
    out.clear();
    for (dim, r) in remaining.present() {
        let s = i128::from(r) * i128::from(weight) / i128::from(total_weight.max(1));
        out.set(dim, i64::try_from(s).unwrap_or(i64::MAX));
    }
}

/// `min(fair, realCapability, request)` on the dimensions of `fair` (the cluster's).
fn clamp_into(out: &mut Amounts, fair: &Amounts, real: &Amounts, request: &Amounts) {
    out.clear();
    for (dim, f) in fair.present() {
        out.set(dim, f.min(upper_at(real, request, dim)));
    }
}

/// `min(realCapability, request)` for one dimension (request absent = 0).
fn upper_at(real: &Amounts, request: &Amounts, dim: usize) -> i64 {
    real.limit(dim).unwrap_or(i64::MAX).min(request.get(dim))
}

/// `min(realCapability, request)` for one dimension (request absent = 0).
#[cfg(test)]
fn upper(real: &Resources, request: &Resources, dim: &str) -> i64 {
    real.limit(dim).unwrap_or(i64::MAX).min(request.get(dim))
}

/// A lower bound on the number of rounds with this round's shares until some
/// unmet queue's deserved amount changes or its clamped share stops moving (at
/// least 1). Rounds before that only raise `fair` below guarantee floors.
fn rounds_without_event(filling: &[Filling]) -> u64 {
    let mut best = u64::MAX;
    for q in filling.iter().filter(|q| !q.met) {
        let mut moving = false;
        for (dim, s) in q.share.present() {
            let f = q.fair.get(dim);
            let hi = upper_at(&q.real, &q.request, dim);
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

/// Dominant share: the largest `allocated / deserved` over the deserved dimensions
/// (a zero deserved counts 1 when something is allocated, else 0).
pub fn share(allocated: &Resources, deserved: &Resources) -> f64 {
    deserved
        .iter()
        .map(|(dim, d)| ratio(allocated.get(dim), d))
        .fold(0.0, f64::max)
}

/// `allocated / deserved` with Volcano's convention for a zero denominator.
pub(crate) fn ratio(allocated: i64, deserved: i64) -> f64 {
    if deserved <= 0 {
        if allocated > 0 { 1.0 } else { 0.0 }
    } else {
        allocated as f64 / deserved as f64
    }
}

/// Overused: `deserved ≤ allocated` on every deserved dimension. Allocation skips such
/// queues until something frees up.
pub fn overused(deserved: &Resources, allocated: &Resources) -> bool {
    deserved.fits_within_amount(allocated)
}

/// The first dimension the candidate requests on which `allocated + candidate` would
/// exceed `deserved`.
pub fn allocatable_excess(
    allocated: &Resources,
    candidate: &Resources,
    deserved: &Resources,
) -> Option<Excess> {
    let future = allocated.plus(candidate);
    future.first_excess_on(deserved, requested_dims(candidate))
}

/// The first dimension `min_resources` requests on which
/// `min_resources + allocated + inqueue − elastic` would exceed `real_capability`.
pub fn enqueue_excess(
    min_resources: &Resources,
    allocated: &Resources,
    inqueue: &Resources,
    elastic: &Resources,
    real_capability: &Resources,
) -> Option<Excess> {
    let mut future = min_resources.plus(allocated);
    future.add(inqueue);
    future.saturating_sub(elastic);
    future.first_excess_on(real_capability, requested_dims(min_resources))
}

/// The dimensions a queue limit is checked on: those with a positive amount,
/// but `pods`. Volcano leaves the pod count out of every limit comparison
/// (`IsIgnoredScalarResource`: every pod asks one), so a queue's `pods`
/// capability, or a minimum naming `pods`, holds no job back.
pub(crate) fn requested_dims(r: &Resources) -> impl Iterator<Item = &str> {
    r.iter()
        .filter(|(d, v)| *v > 0 && *d != POD_COUNT)
        .map(|(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GPU: &str = "nvidia.com/gpu";

    fn queue(weight: u32, request_gpus: i64) -> ProportionInput {
        ProportionInput {
            weight,
            guarantee: Resources::new(),
            capability: None,
            request: Resources::from_units([(GPU, request_gpus)]),
        }
    }

    fn deserved_gpus(total: i64, queues: &[ProportionInput]) -> Vec<i64> {
        water_fill(&Resources::from_units([(GPU, total)]), queues)
            .iter()
            .map(|s| s.deserved.get(GPU))
            .collect()
    }

    #[test]
    fn weights_split_a_contended_cluster() {
        // 60 GPUs, weights 1:2:3, everyone wants 100. Round 1: W = 6, shares
        // 60×1/6 = 10, 60×2/6 = 20, 60×3/6 = 30; nothing remains.
        assert_eq!(
            deserved_gpus(60, &[queue(1, 100), queue(2, 100), queue(3, 100)]),
            vec![10_000, 20_000, 30_000]
        );
        // Two dimensions are shared independently by the same weights:
        // cpu 120 → 20/40/60.
        let total = Resources::from_units([("cpu", 120), (GPU, 60)]);
        let ask = Resources::from_units([("cpu", 200), (GPU, 100)]);
        let queues: Vec<_> = (1..=3)
            .map(|w| ProportionInput {
                request: ask.clone(),
                ..queue(w, 0)
            })
            .collect();
        let out = water_fill(&total, &queues);
        assert_eq!(
            out[0].deserved,
            Resources::from_units([("cpu", 20), (GPU, 10)])
        );
        assert_eq!(
            out[2].deserved,
            Resources::from_units([("cpu", 60), (GPU, 30)])
        );
    }

    #[test]
    fn surplus_of_a_small_queue_goes_to_the_others_by_weight() {
        // 40 GPUs, weights 1:1:2, A wants only 4.
        // Round 1: W = 4 → shares 10, 10, 20. A is clamped to its request 4 (met);
        //          B 10, C 20; consumed 34, remaining 6.
        // Round 2: W = 3 (B, C) → B += 6×1/3 = 2, C += 6×2/3 = 4; remaining 0.
        assert_eq!(
            deserved_gpus(40, &[queue(1, 4), queue(1, 100), queue(2, 100)]),
            vec![4_000, 12_000, 24_000]
        );
    }

    #[test]
    fn guarantee_raises_a_small_queue() {
        // 60 GPUs, weights A 1 : B 5. Without a guarantee A gets 60×1/6 = 10 and B 50.
        assert_eq!(
            deserved_gpus(60, &[queue(1, 20), queue(5, 100)]),
            vec![10_000, 50_000]
        );
        // A guarantees 20 and wants 20: A starts at 20 and is met from the start
        // (request ≤ deserved); remaining = 60 − 20 = 40.
        // Round 1: W = 5 (B alone) → B += 40 → 40; remaining 0.
        let a = ProportionInput {
            guarantee: Resources::from_units([(GPU, 20)]),
            ..queue(1, 20)
        };
        let out = water_fill(&Resources::from_units([(GPU, 60)]), &[a, queue(5, 100)]);
        assert_eq!(out[0].deserved.get(GPU), 20_000);
        assert_eq!(out[1].deserved.get(GPU), 40_000);
        // realCapability: B = 60 − 20 + 0 = 40, A = 60 − 20 + 20 = 60.
        assert_eq!(out[0].real_capability.get(GPU), 60_000);
        assert_eq!(out[1].real_capability.get(GPU), 40_000);
    }

    #[test]
    fn guarantees_never_hand_out_more_than_the_cluster() {
        // Total 10, A guarantees 6, three equal queues all wanting 100. Volcano's loop
        // gives 6 + 3.33 + 3.33 = 12.67. Here: A starts at 6, remaining 4.
        // B and C have realCapability 10 − 6 = 4 each. Round 1: shares 1.333 each;
        // A's fair 1.333 < 6; B, C 1.333; remaining 4 − 2.666 = 1.334, and so on:
        // B and C approach 2 each while A's fair stays below its floor.
        let total = Resources::from_units([(GPU, 10)]);
        let a = ProportionInput {
            guarantee: Resources::from_units([(GPU, 6)]),
            ..queue(1, 100)
        };
        let out = water_fill(&total, &[a, queue(1, 100), queue(1, 100)]);
        let got: Vec<i64> = out.iter().map(|s| s.deserved.get(GPU)).collect();
        assert_eq!(got[0], 6_000);
        assert!(got.iter().sum::<i64>() <= 10_000, "{got:?}");
        assert!((1_995..=2_000).contains(&got[1]), "{got:?}");
        assert_eq!(got[1], got[2]);
    }

    #[test]
    fn floor_bound_queue_still_reaches_its_fair_share_above_the_guarantee() {
        // Total 60; A (weight 1) guarantees 50 and wants 100; B wants 5.
        // A starts at 50, remaining 10. Round 1: shares 5 each: A's fair 5 < 50;
        // B takes 5 (met). Remaining 5. A alone now: its fair climbs 5 per round and
        // crosses 50 after 10 more rounds (skipped in one step); then A takes the last
        // 5 → 55.
        let a = ProportionInput {
            guarantee: Resources::from_units([(GPU, 50)]),
            ..queue(1, 100)
        };
        assert_eq!(deserved_gpus(60, &[a, queue(1, 5)]), vec![55_000, 5_000]);
    }

    #[test]
    fn capability_caps_a_queue_and_the_rest_goes_to_the_others() {
        // 60 GPUs, equal weights, A capped at 5.
        // Round 1: shares 20: A → 5 (cap), B 20, C 20; remaining 15.
        // Round 2: shares 5: A stays 5 (unchanged → met), B 25, C 25; remaining 5.
        // Round 3: W = 2: B 27.5, C 27.5; remaining 0.
        let a = ProportionInput {
            capability: Some(Resources::from_units([(GPU, 5)])),
            ..queue(1, 100)
        };
        assert_eq!(
            deserved_gpus(60, &[a, queue(1, 100), queue(1, 100)]),
            vec![5_000, 27_500, 27_500]
        );
    }

    #[test]
    fn real_capability_subtracts_other_guarantees() {
        let total = Resources::from_units([("cpu", 100), (GPU, 16)]);
        let all_g = Resources::from_units([(GPU, 6)]);
        let own_g = Resources::from_units([(GPU, 2)]);
        let cap = Resources::from_units([("cpu", 40), ("example.com/fpga", 1)]);
        let real = real_capability(&total, &all_g, &own_g, Some(&cap));
        // gpu: 16 − 6 + 2 = 12; cpu: min(100, 40); fpga only from the capability.
        assert_eq!(
            real,
            Resources::from_units([("cpu", 40), ("example.com/fpga", 1), (GPU, 12)])
        );
    }

    #[test]
    fn checks_name_the_dimension() {
        let deserved = Resources::from_units([("cpu", 10), (GPU, 4)]);
        let allocated = Resources::from_units([("cpu", 2), (GPU, 3)]);
        let candidate = Resources::from_units([("cpu", 1), (GPU, 2)]);
        let e = allocatable_excess(&allocated, &candidate, &deserved).unwrap();
        assert_eq!(
            (e.dimension.as_str(), e.amount, e.limit),
            (GPU, 5_000, 4_000)
        );
        assert!(
            allocatable_excess(&allocated, &Resources::from_units([(GPU, 1)]), &deserved).is_none()
        );
        assert!(overused(
            &Resources::from_units([(GPU, 4)]),
            &Resources::from_units([(GPU, 4)])
        ));
        assert!(!overused(&deserved, &allocated));
        // share = max(2/10, 3/4) = 0.75
        assert_eq!(share(&allocated, &deserved), 0.75);
        assert_eq!(
            share(
                &Resources::from_units([(GPU, 1)]),
                &Resources::from_units([(GPU, 0)])
            ),
            1.0
        );

        // enqueue: min 4 + allocated 3 + inqueue 2 − elastic 1 = 8 > real 7.
        let e = enqueue_excess(
            &Resources::from_units([(GPU, 4)]),
            &Resources::from_units([(GPU, 3)]),
            &Resources::from_units([(GPU, 2)]),
            &Resources::from_units([(GPU, 1)]),
            &Resources::from_units([(GPU, 7)]),
        )
        .unwrap();
        assert_eq!((e.amount, e.limit), (8_000, 7_000));
        assert!(
            enqueue_excess(
                &Resources::from_units([("cpu", 4)]),
                &Resources::new(),
                &Resources::new(),
                &Resources::new(),
                &Resources::from_units([(GPU, 0)]),
            )
            .is_none(),
            "dimensions the job does not request are not checked"
        );
    }

    fn arb_resources() -> impl Strategy<Value = Resources> {
        proptest::collection::btree_map(
            prop_oneof![Just("cpu"), Just(GPU), Just("nvidia.com/gpumem")],
            0_i64..100_000,
            0..3,
        )
        .prop_map(Resources::from_milli)
    }

    fn arb_queue() -> impl Strategy<Value = ProportionInput> {
        (
            1_u32..10,
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
        #[test]
        fn deserved_stays_within_bounds(
            total in arb_resources(),
            queues in proptest::collection::vec(arb_queue(), 1..5),
        ) {
            let out = water_fill(&total, &queues);
            let mut sum_g = Resources::new();
            for q in &queues { sum_g.add(&q.guarantee); }
            let mut sum_d = Resources::new();
            for (q, s) in queues.iter().zip(&out) {
                for (dim, d) in s.deserved.iter() {
                    let cap = upper(&s.real_capability, &q.request, dim);
                    let g = q.guarantee.get(dim);
                    prop_assert!(d <= cap.max(g), "{dim}: deserved {d} > max(min(request, real) {cap}, guarantee {g})");
                    prop_assert!(d >= g);
                }
                sum_d.add(&s.deserved);
            }
            for (dim, t) in total.iter() {
                if sum_g.get(dim) <= t {
                    prop_assert!(sum_d.get(dim) <= t, "{dim}: Σ deserved {} > total {t}", sum_d.get(dim));
                }
            }
        }
    }
}
