//! `Resources` against a map of names to milli-units, the plain model of an
//! amount or a limit: every operation on random values gives what the map
//! gives, dimension by dimension and in name order. The sorted list behind
//! `Resources` must keep its order and uniqueness through every insert and
//! merge; a slip in either shows up here as a wrong or repeated dimension.

use crate::resources::Resources;
use proptest::prelude::*;
use std::collections::BTreeMap;

type Model = BTreeMap<String, i64>;

fn pairs() -> impl Strategy<Value = Vec<(String, i64)>> {
    // Few names, so that random values share dimensions and also miss some.
    let name = prop::sample::select(vec![
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "pods",
        "a",
        "zz",
    ]);
    proptest::collection::vec((name.prop_map(str::to_owned), -5i64..50), 0..8)
}

fn model(pairs: &[(String, i64)]) -> Model {
    pairs
        .iter()
        .map(|(k, v)| (k.clone(), (*v).max(0)))
        .collect()
}

fn of(model: &Model) -> Vec<(String, i64)> {
    model.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

fn listed(r: &Resources) -> Vec<(String, i64)> {
    r.iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn union(a: &Model, b: &Model, both: impl Fn(i64, i64) -> i64) -> Model {
    let mut out = a.clone();
    for (k, v) in b {
        out.entry(k.clone())
            .and_modify(|mine| *mine = both(*mine, *v))
            .or_insert(*v);
    }
    out
}

proptest! {
    #[test]
    fn every_operation_matches_the_map(a in pairs(), b in pairs(), probe in pairs()) {
        let (ma, mb) = (model(&a), model(&b));
        let (ra, rb) = (Resources::from_milli(a.clone()), Resources::from_milli(b.clone()));
        prop_assert_eq!(listed(&ra), of(&ma));
        prop_assert_eq!(ra.dimension_count(), ma.len());
        prop_assert_eq!(ra.is_empty(), ma.values().all(|v| *v <= 0));

        prop_assert_eq!(listed(&ra.plus(&rb)), of(&union(&ma, &mb, i64::saturating_add)));
        prop_assert_eq!(listed(&ra.min_limit(&rb)), of(&union(&ma, &mb, i64::min)));
        prop_assert_eq!(listed(&ra.max_amount(&rb)), of(&union(&ma, &mb, i64::max)));
        let minus: Model = ma
            .iter()
            .map(|(k, v)| (k.clone(), (v - mb.get(k).copied().unwrap_or(0)).max(0)))
            .collect();
        prop_assert_eq!(listed(&ra.minus(&rb)), of(&minus));
        let capped: Model = ma
            .iter()
            .map(|(k, v)| (k.clone(), mb.get(k).map_or(*v, |cap| (*v).min(*cap))))
            .collect();
        prop_assert_eq!(listed(&ra.capped_by(&rb)), of(&capped));
        let pruned: Model = ma.iter().filter(|(_, v)| **v > 0).map(|(k, v)| (k.clone(), *v)).collect();
        prop_assert_eq!(listed(&ra.clone().without_zeros()), of(&pruned));
        let (with, without) = ra.split_prefix("nvidia.com/");
        let with_model: Model = ma.iter().filter(|(k, _)| k.starts_with("nvidia.com/")).map(|(k, v)| (k.clone(), *v)).collect();
        let without_model: Model = ma.iter().filter(|(k, _)| !k.starts_with("nvidia.com/")).map(|(k, v)| (k.clone(), *v)).collect();
        prop_assert_eq!(listed(&with), of(&with_model));
        prop_assert_eq!(listed(&without), of(&without_model));

        prop_assert_eq!(
            ra.fits_within_amount(&rb),
            ma.iter().all(|(k, v)| *v <= mb.get(k).copied().unwrap_or(0))
        );
        let excess = ma
            .iter()
            .find(|(k, v)| mb.get(*k).is_some_and(|cap| **v > *cap))
            .map(|(k, _)| k.clone());
        prop_assert_eq!(ra.first_exceeding(&rb), excess);
        for (k, _) in &probe {
            prop_assert_eq!(ra.get(k), ma.get(k).copied().unwrap_or(0));
            prop_assert_eq!(ra.limit(k), ma.get(k).copied());
            prop_assert_eq!(ra.contains(k), ma.contains_key(k));
        }
        // Equal maps, equal values, however they were built.
        let rebuilt = Resources::from_milli(of(&ma).into_iter().rev());
        prop_assert_eq!(&rebuilt, &ra);
    }

    #[test]
    fn setting_one_by_one_matches_the_map(steps in pairs()) {
        let (mut r, mut m) = (Resources::new(), Model::new());
        for (k, v) in steps {
            r.set(k.clone(), v);
            m.insert(k, v.max(0));
            prop_assert_eq!(listed(&r), of(&m));
        }
    }
}
