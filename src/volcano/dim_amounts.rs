//! Amounts over a fixed list of dimensions, for water-filling. They mean what
//! [`Resources`] means (an absent dimension is zero as an amount and unlimited
//! as a limit; amounts never go below zero), but sit in a vector indexed by a
//! dimension's place in one list shared by every queue of the filling: a round
//! of filling then adds, compares and clamps in place and allocates nothing,
//! where the same round on maps would build a map per queue and operation.

use crate::resources::{Dim, Resources};
use std::sync::Arc;

/// The dimensions one filling works over, in name order, with the names the
/// amounts share (the filling's results share them too).
#[derive(Debug)]
pub(crate) struct Dims<'a>(Vec<&'a Dim>);

impl<'a> Dims<'a> {
    /// Every dimension any of `all` names.
    pub fn of(all: impl IntoIterator<Item = &'a Resources>) -> Self {
        let mut names: Vec<&'a Dim> = all
            .into_iter()
            .flat_map(|r| r.shared_iter().map(|(dim, _)| dim))
            .collect();
        names.sort_unstable();
        names.dedup_by(|a, b| a == b);
        Self(names)
    }

    /// How many dimensions there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `r` over these dimensions (`r` names none but these).
    pub fn amounts(&self, r: &Resources) -> Amounts {
        // Both in name order: one walk side by side, no lookups.
        let mut values = r.iter().peekable();
        Amounts(
            self.0
                .iter()
                .map(|d| {
                    while values.next_if(|(name, _)| *name < &***d).is_some() {}
                    values.next_if(|(name, _)| *name == &***d).map(|(_, v)| v)
                })
                .collect(),
        )
    }

    /// The dimensions `a` has, as resources.
    pub fn resources(&self, a: &Amounts) -> Resources {
        Resources::from_ordered(
            self.0
                .iter()
                .zip(&a.0)
                .filter_map(|(d, v)| v.map(|v| (Arc::clone(d), v))),
        )
    }
}

/// One value per dimension of a [`Dims`], `None` where the dimension is absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Amounts(Vec<Option<i64>>);

impl Amounts {
    /// No dimension present, over `n` dimensions.
    pub fn absent(n: usize) -> Self {
        Self(vec![None; n])
    }

    /// Every dimension `like` has, at zero.
    pub fn zero_like(like: &Amounts) -> Self {
        Self(like.0.iter().map(|v| v.map(|_| 0)).collect())
    }

    /// Dimension `i` as an amount (absent = 0).
    pub fn get(&self, i: usize) -> i64 {
        self.0[i].unwrap_or(0)
    }

    /// Dimension `i` as a limit (absent = unlimited).
    pub fn limit(&self, i: usize) -> Option<i64> {
        self.0[i]
    }

    /// Sets dimension `i` (negative values become zero).
    pub fn set(&mut self, i: usize, milli: i64) {
        self.0[i] = Some(milli.max(0));
    }

    /// The dimensions present with their values, by position.
    pub fn present(&self) -> impl Iterator<Item = (usize, i64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i, v)))
    }

    /// Whether no dimension holds a positive amount.
    pub fn is_empty(&self) -> bool {
        self.0.iter().flatten().all(|v| *v <= 0)
    }

    /// Forgets every dimension.
    pub fn clear(&mut self) {
        self.0.iter_mut().for_each(|v| *v = None);
    }

    /// `self += other` on the union of dimensions (saturating).
    pub fn add(&mut self, other: &Amounts) {
        for (slot, v) in self.0.iter_mut().zip(&other.0) {
            if let Some(v) = v {
                *slot = Some(slot.unwrap_or(0).saturating_add(*v));
            }
        }
    }

    /// `self -= other`, floored at zero, on the dimensions `self` has.
    pub fn saturating_sub(&mut self, other: &Amounts) {
        for (slot, o) in self.0.iter_mut().zip(&other.0) {
            if let Some(v) = slot {
                *v = v.saturating_sub(o.unwrap_or(0)).max(0);
            }
        }
    }

    /// `self = max(self, other)` as amounts on the union of dimensions.
    pub fn raise_to(&mut self, other: &Amounts) {
        for (slot, o) in self.0.iter_mut().zip(&other.0) {
            if let Some(o) = o {
                *slot = Some(slot.map_or(*o, |v| v.max(*o)));
            }
        }
    }

    /// `self += (grown − before)` floored at zero per dimension, on the
    /// dimensions `grown` has: what `grown` added over `before`.
    pub fn add_growth(&mut self, grown: &Amounts, before: &Amounts) {
        for (i, g) in grown.present() {
            let slot = &mut self.0[i];
            *slot = Some(
                slot.unwrap_or(0)
                    .saturating_add(g.saturating_sub(before.get(i)).max(0)),
            );
        }
    }

    /// Every present dimension of this amount ≤ the same one of `other` (absent
    /// there = 0).
    pub fn fits_within_amount(&self, other: &Amounts) -> bool {
        self.present().all(|(i, v)| v <= other.get(i))
    }

    /// Copies `other` into `self` without allocating.
    pub fn copy_from(&mut self, other: &Amounts) {
        self.0.copy_from_slice(&other.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(pairs: &[(&str, i64)]) -> Resources {
        Resources::from_milli(pairs.iter().map(|(d, v)| (*d, *v)))
    }

    #[test]
    fn each_operation_means_what_it_means_on_resources() {
        let a = r(&[("cpu", 5), ("gpu", 2)]);
        let b = r(&[("gpu", 3), ("mem", 7)]);
        let dims = Dims::of([&a, &b]);
        assert_eq!(dims.len(), 3);
        let (da, db) = (dims.amounts(&a), dims.amounts(&b));
        assert_eq!(dims.resources(&da), a);

        let mut sum = da.clone();
        sum.add(&db);
        assert_eq!(dims.resources(&sum), a.plus(&b));

        let mut less = da.clone();
        less.saturating_sub(&db);
        assert_eq!(dims.resources(&less), a.minus(&b));

        let mut most = da.clone();
        most.raise_to(&db);
        assert_eq!(dims.resources(&most), a.max_amount(&b));

        let mut growth = Amounts::absent(dims.len());
        growth.add_growth(&da, &db);
        assert_eq!(dims.resources(&growth), a.minus(&b));

        assert_eq!(da.fits_within_amount(&db), a.fits_within_amount(&b));
        assert_eq!(
            dims.amounts(&r(&[("gpu", 3)])).fits_within_amount(&db),
            r(&[("gpu", 3)]).fits_within_amount(&b)
        );
        assert!(dims.amounts(&r(&[("cpu", 0)])).is_empty());
        assert_eq!(da.limit(2), None, "absent is unlimited as a limit");
        assert_eq!(da.get(2), 0, "and zero as an amount");
        assert_eq!(
            dims.resources(&Amounts::zero_like(&da)),
            r(&[("cpu", 0), ("gpu", 0)])
        );
    }
}
