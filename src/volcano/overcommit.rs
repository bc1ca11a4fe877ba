//! overcommit: admit jobs against an inflated cluster size.
//!
//! Volcano's overcommit plugin lets the enqueue action admit more PodGroups than fit
//! right now, betting that running jobs finish and free room: the cluster counts as
//! `total × overcommit-factor` (default 1.2, never below 1.0). What is left for a new
//! job is
//!
//! ```text
//! idle = total × factor − used − inqueue
//! ```
//!
//! where `used` is what queues have allocated and `inqueue` the minimum resources of
//! jobs already admitted but not yet running. A job is admitted when its
//! `minResources ≤ idle` on every dimension it requests. A job without
//! `minResources` is always admitted.
//!
//! Unlike queue limits, a dimension the cluster lacks has an idle amount of **zero**,
//! not "unlimited": this plugin is about the cluster's real size, and admitting a job
//! for a resource no node offers only leaves its pods pending.
//!
//! The factor is applied in thousandths (1.2 → 1200/1000) with integer arithmetic, so
//! the result is exact and the same on every run.

use super::resources::{Excess, Resources};

/// The factor in thousandths, rounded to the nearest; non-finite or sub-1.0 values
/// (which the configuration already replaces) become 1000.
pub fn factor_per_mille(factor: f64) -> i64 {
    if factor.is_finite() && factor >= 1.0 {
        // Bounded above so the cast cannot saturate in surprising ways.
        (factor.min(1.0e6) * 1000.0).round() as i64
    } else {
        1000
    }
}

/// `total × factor − used − inqueue` per dimension of `total`, floored at zero.
pub fn idle(
    total: &Resources,
    factor_per_mille: i64,
    used: &Resources,
    inqueue: &Resources,
) -> Resources {
    total
        .iter()
        .map(|(dim, amount)| {
            let scaled = i128::from(amount) * i128::from(factor_per_mille) / 1000;
            let left = scaled - i128::from(used.get(dim)) - i128::from(inqueue.get(dim));
            let left = i64::try_from(left.max(0)).unwrap_or(i64::MAX);
            (dim.to_owned(), left)
        })
        .collect()
}

/// The first dimension `min_resources` requests (a positive amount) on which it
/// exceeds `idle`; a dimension missing from `idle` counts as zero.
pub fn first_excess(min_resources: &Resources, idle: &Resources) -> Option<Excess> {
    min_resources.iter().find_map(|(dim, amount)| {
        let available = idle.get(dim);
        (amount > 0 && amount > available).then(|| Excess {
            dimension: dim.to_owned(),
            amount,
            limit: available,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: i64) -> Resources {
        Resources::from_units([("nvidia.com/gpu", n)])
    }

    #[test]
    fn factor_table() {
        // (factor, total, used, inqueue, idle) in whole GPUs / milli where noted.
        let cases: &[(f64, i64, i64, i64, i64)] = &[
            // 10 GPUs × 1.2 = 12; 12 − 8 − 2 = 2.
            (1.2, 10, 8, 2, 2_000),
            // Factor 1.0: exactly what is free.
            (1.0, 10, 8, 2, 0),
            // Factor 1.5 on 8 GPUs = 12; 12 − 4 − 0 = 8.
            (1.5, 8, 4, 0, 8_000),
            // Over-admitted already: idle floors at zero.
            (1.2, 10, 10, 5, 0),
            // 3 GPUs × 1.2 = 3.6; 3.6 − 3 = 0.6 GPU.
            (1.2, 3, 3, 0, 600),
            // Below 1.0 falls back to 1.0 here (the configuration maps it to 1.2).
            (0.5, 10, 5, 0, 5_000),
        ];
        for (factor, total, used, inqueue, want) in cases {
            let got = idle(
                &gpus(*total),
                factor_per_mille(*factor),
                &gpus(*used),
                &gpus(*inqueue),
            );
            assert_eq!(
                got.get("nvidia.com/gpu"),
                *want,
                "factor {factor} total {total}"
            );
        }
    }

    #[test]
    fn admission_checks_requested_dimensions_only() {
        let total = Resources::from_units([("cpu", 100), ("nvidia.com/gpu", 10)]);
        let idle = idle(
            &total,
            1200,
            &Resources::from_units([("nvidia.com/gpu", 8)]),
            &Resources::new(),
        );
        // cpu idle 120, gpu idle 4.
        assert_eq!(
            first_excess(&Resources::from_units([("nvidia.com/gpu", 4)]), &idle),
            None
        );
        assert_eq!(
            first_excess(
                &Resources::from_units([("cpu", 1), ("nvidia.com/gpu", 5)]),
                &idle
            ),
            Some(Excess {
                dimension: "nvidia.com/gpu".into(),
                amount: 5000,
                limit: 4000
            })
        );
        // A dimension no node has: idle zero, rejected.
        assert_eq!(
            first_excess(&Resources::from_units([("example.com/fpga", 1)]), &idle)
                .map(|e| e.dimension),
            Some("example.com/fpga".to_owned())
        );
        // Zero requests never reject.
        assert_eq!(
            first_excess(&Resources::from_units([("example.com/fpga", 0)]), &idle),
            None
        );
    }
}
