//! capacity-card: per-queue quotas counted in whole GPU cards of a given type.
//!
//! A queue carries `volcano.sh/card.quota: '{"NVIDIA-H200": 8}'`; jobs in it may hold
//! at most 8 H200 cards, whatever other quotas say. Card types are named like GPU
//! feature discovery's `nvidia.com/gpu.product` label (`NVIDIA-H200-141GB-HBM3`), which
//! is what operators already see on their nodes.
//!
//! **Card type of a GPU.** The device plugin registers a model string such as
//! `NVIDIA H200 141GB HBM3` (older HAMi releases wrote `NVIDIA-NVIDIA H200 141GB
//! HBM3`); [`card_type`] turns spaces into `-` and drops the doubled vendor prefix,
//! giving `NVIDIA-H200-141GB-HBM3`.
//!
//! **MIG instances** are cards of their own type, `<card type>/mig-<profile>-mixed`
//! (`NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed`), after the `mixed` MIG strategy's
//! resource names (see `device::card_name`).
//!
//! **Matching a quota key.** A key matches a card type when it equals it or when the
//! type starts with `key + "-"`, so `NVIDIA-H200` covers `NVIDIA-H200-141GB-HBM3` but
//! `NVIDIA-H20` does not; for MIG types the part after `/` must be equal, so
//! `NVIDIA-H200/mig-1g.18gb-mixed` covers `NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed`,
//! and a whole-card key never counts MIG instances (nor a MIG key whole cards).
//! When several keys match, the longest wins, so a queue can give a specific SKU
//! its own quota next to a family-wide one. Card types no key matches are
//! unlimited.
//!
//! **How a vGPU slice counts.** The capacity-card description this follows does not
//! say how a shared GPU counts, so this module counts **each distinct physical GPU a
//! pod uses as one card**, however small its slice (`nvidia.com/gpumem`,
//! `nvidia.com/gpucores`) and however many of its containers share it. A quota of 8
//! cards therefore bounds how many physical GPUs the queue touches, which is what a
//! card quota is for (buying and reserving whole cards); slices are bounded by the
//! queue's `nvidia.com/gpu` / `gpumem` / `gpucores` capability instead.
//!
//! **How a MIG instance counts.** Each instance is one card of its MIG type, as
//! each is a device of its own under the `mixed` strategy: two `1g.18gb` instances
//! on one H200 are two `NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed` cards, and they
//! do not count against an `NVIDIA-H200` quota. A pod holding a MIG GPU whose
//! slices are unknown (it is kept whole for the pod) counts as a whole card.
//!
//! **`volcano.sh/card.name`.** A pod naming its card types is placed only on GPUs
//! (or MIG profiles) those names cover, and its cards are charged under the name
//! that covered them rather than the card type itself, as Volcano's capacity-card
//! charges a task to the card name it asks for.
//!
//! **Explicit requests.** A workload may state its card needs up front with the
//! annotation `volcano.sh/card.request: '{"NVIDIA-H200": 2}'` (see
//! [`card_request`]). Enqueue checks use it: the caller adds it to the PodGroup's
//! minimum resources under the dimension `card/<name>` ([`card_request_resources`]),
//! in milli-units like every other dimension (2 cards = 2000).

use super::objects::parse_card_counts;
use super::resources::{MILLI, Resources};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Annotation (on a pod, PodGroup or workload) with the cards a job needs.
pub const CARD_REQUEST_ANNOTATION: &str = "volcano.sh/card.request";

/// Prefix of the resource dimensions that carry card counts in a `Resources`.
pub const CARD_DIMENSION_PREFIX: &str = "card/";

/// The `volcano.sh/card.request` annotation is not a JSON object of counts.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("annotation {CARD_REQUEST_ANNOTATION}: {reason}")]
pub struct CardRequestError {
    /// What is wrong with the value.
    pub reason: String,
}

/// The first quota key a use would exceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardExcess {
    /// The quota key (`NVIDIA-H200`).
    pub key: String,
    /// Cards in use plus requested.
    pub amount: i64,
    /// The quota.
    pub quota: i64,
}

pub use crate::device::card_name::{card_type, key_matches, mig_card_type};

/// The longest quota key covering `card`, if any.
pub fn quota_key_for<'a>(quota: &'a BTreeMap<String, i64>, card: &str) -> Option<&'a str> {
    quota
        .keys()
        .filter(|key| key_matches(key, card))
        .max_by_key(|key| key.len())
        .map(String::as_str)
}

/// Cards used per card type, given `(gpu uuid, registered model)` for every whole
/// device a pod (or set of pods) holds: each distinct GPU counts once. (MIG
/// instances are counted where placements are charged.)
pub fn cards_used<'a>(gpus: impl IntoIterator<Item = (&'a str, &'a str)>) -> BTreeMap<String, i64> {
    let distinct: BTreeSet<(&str, &str)> = gpus.into_iter().collect();
    let mut seen_uuid = BTreeSet::new();
    let mut out = BTreeMap::new();
    for (uuid, model) in distinct {
        if seen_uuid.insert(uuid) {
            *out.entry(card_type(model)).or_insert(0) += 1;
        }
    }
    out
}

/// Reads `volcano.sh/card.request` from annotations: `Ok(None)` when absent.
pub fn card_request(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<BTreeMap<String, i64>>, CardRequestError> {
    annotations
        .get(CARD_REQUEST_ANNOTATION)
        .map(|text| parse_card_counts(text).map_err(|reason| CardRequestError { reason }))
        .transpose()
}

/// The resource dimension that carries a card count: `card/<name>`.
pub fn card_dimension(card: &str) -> String {
    format!("{CARD_DIMENSION_PREFIX}{card}")
}

/// Card counts as `card/<name>` dimensions in milli-units, to add to a PodGroup's
/// minimum resources before an enqueue check.
pub fn card_request_resources(cards: &BTreeMap<String, i64>) -> Resources {
    Resources::from_units(cards.iter().map(|(k, v)| (card_dimension(k), *v)))
}

/// The `card/<name>` dimensions of `r` as whole cards (a partial card rounds up).
pub fn cards_in_resources(r: &Resources) -> BTreeMap<String, i64> {
    r.iter()
        .filter_map(|(dim, milli)| {
            let card = dim.strip_prefix(CARD_DIMENSION_PREFIX)?;
            let whole = milli / MILLI + i64::from(milli % MILLI != 0);
            (whole > 0).then(|| (card.to_owned(), whole))
        })
        .collect()
}

/// Folds per-card-type counts into per-quota-key counts; types no key covers are
/// dropped (they are unlimited).
pub fn use_by_quota_key(
    quota: &BTreeMap<String, i64>,
    cards: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (card, n) in cards {
        if let Some(key) = quota_key_for(quota, card) {
            let slot = out.entry(key.to_owned()).or_insert(0_i64);
            *slot = slot.saturating_add(*n);
        }
    }
    out
}

/// The first quota key (in name order) on which `used + extra` exceeds the quota,
/// considering only keys `extra` touches, so a queue already over quota (after a quota
/// cut) can still run jobs that need none of that card.
pub fn first_quota_excess(
    quota: &BTreeMap<String, i64>,
    used: &BTreeMap<String, i64>,
    extra: &BTreeMap<String, i64>,
) -> Option<CardExcess> {
    let used = use_by_quota_key(quota, used);
    let extra = use_by_quota_key(quota, extra);
    extra.iter().find_map(|(key, add)| {
        if *add <= 0 {
            return None;
        }
        let limit = *quota.get(key)?;
        let amount = used.get(key).copied().unwrap_or(0).saturating_add(*add);
        (amount > limit).then(|| CardExcess {
            key: key.clone(),
            amount,
            quota: limit,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn card_type_matches_gpu_feature_discovery() {
        assert_eq!(
            card_type("NVIDIA H200 141GB HBM3"),
            "NVIDIA-H200-141GB-HBM3"
        );
        assert_eq!(card_type("NVIDIA-NVIDIA A40"), "NVIDIA-A40");
        assert_eq!(
            card_type("NVIDIA GeForce RTX 4090"),
            "NVIDIA-GeForce-RTX-4090"
        );
        assert_eq!(card_type("NVIDIA A100-SXM4-80GB"), "NVIDIA-A100-SXM4-80GB");
        assert_eq!(card_type("  NVIDIA   L4 "), "NVIDIA-L4");
    }

    #[test]
    fn mig_keys_match_mig_card_types_by_longest_key() {
        let q = quota(&[
            ("NVIDIA-H200", 8),
            ("NVIDIA-H200/mig-1g.18gb-mixed", 14),
            ("NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed", 7),
        ]);
        assert_eq!(
            quota_key_for(&q, "NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed"),
            Some("NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed")
        );
        assert_eq!(
            quota_key_for(&q, "NVIDIA-H200-NVL/mig-1g.18gb-mixed"),
            Some("NVIDIA-H200/mig-1g.18gb-mixed")
        );
        assert_eq!(quota_key_for(&q, "NVIDIA-H200-NVL/mig-2g.35gb-mixed"), None);
        // Slices and whole cards are counted apart.
        let used = quota(&[
            ("NVIDIA-H200-141GB-HBM3", 8),
            ("NVIDIA-H200-NVL/mig-1g.18gb-mixed", 13),
        ]);
        assert_eq!(
            first_quota_excess(
                &q,
                &used,
                &quota(&[("NVIDIA-H200-NVL/mig-1g.18gb-mixed", 1)])
            ),
            None
        );
        assert_eq!(
            first_quota_excess(&q, &used, &quota(&[("NVIDIA-H200/mig-1g.18gb-mixed", 2)])),
            Some(CardExcess {
                key: "NVIDIA-H200/mig-1g.18gb-mixed".into(),
                amount: 15,
                quota: 14
            })
        );
    }

    #[test]
    fn longest_matching_key_wins() {
        let q = quota(&[
            ("NVIDIA-H200", 8),
            ("NVIDIA-H200-141GB-HBM3", 2),
            ("NVIDIA-H20", 4),
        ]);
        assert_eq!(
            quota_key_for(&q, "NVIDIA-H200-141GB-HBM3"),
            Some("NVIDIA-H200-141GB-HBM3")
        );
        assert_eq!(quota_key_for(&q, "NVIDIA-H200-NVL"), Some("NVIDIA-H200"));
        assert_eq!(quota_key_for(&q, "NVIDIA-H20"), Some("NVIDIA-H20"));
        assert_eq!(quota_key_for(&q, "NVIDIA-H20-96GB"), Some("NVIDIA-H20"));
        assert_eq!(quota_key_for(&q, "NVIDIA-H100-80GB-HBM3"), None);
        assert!(!key_matches("NVIDIA-H20", "NVIDIA-H200"));
    }

    #[test]
    fn each_physical_gpu_counts_once() {
        let used = cards_used([
            ("GPU-1", "NVIDIA H200 141GB HBM3"),
            ("GPU-1", "NVIDIA H200 141GB HBM3"), // second container on the same GPU
            ("GPU-2", "NVIDIA H200 141GB HBM3"),
            ("GPU-3", "NVIDIA GeForce RTX 4090"),
        ]);
        assert_eq!(
            used,
            quota(&[
                ("NVIDIA-GeForce-RTX-4090", 1),
                ("NVIDIA-H200-141GB-HBM3", 2)
            ])
        );
    }

    #[test]
    fn quota_rejects_on_the_named_key_and_ignores_unquoted_cards() {
        let q = quota(&[("NVIDIA-H200", 8)]);
        let used = quota(&[("NVIDIA-H200-141GB-HBM3", 7), ("NVIDIA-L4", 100)]);
        assert_eq!(
            first_quota_excess(&q, &used, &quota(&[("NVIDIA-H200-141GB-HBM3", 1)])),
            None
        );
        assert_eq!(
            first_quota_excess(&q, &used, &quota(&[("NVIDIA-H200-141GB-HBM3", 2)])),
            Some(CardExcess {
                key: "NVIDIA-H200".into(),
                amount: 9,
                quota: 8
            })
        );
        // The request may name the quota key itself.
        assert!(first_quota_excess(&q, &used, &quota(&[("NVIDIA-H200", 2)])).is_some());
        // Cards without a quota key are unlimited.
        assert_eq!(
            first_quota_excess(&q, &used, &quota(&[("NVIDIA-L4", 50)])),
            None
        );
    }

    #[test]
    fn card_request_annotation() {
        let mut a = BTreeMap::new();
        assert_eq!(card_request(&a), Ok(None));
        a.insert(
            CARD_REQUEST_ANNOTATION.to_owned(),
            r#"{"NVIDIA-H200":2}"#.to_owned(),
        );
        assert_eq!(card_request(&a), Ok(Some(quota(&[("NVIDIA-H200", 2)]))));
        a.insert(CARD_REQUEST_ANNOTATION.to_owned(), "two".to_owned());
        let e = card_request(&a).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("annotation volcano.sh/card.request: "),
            "{e}"
        );
    }

    #[test]
    fn card_dimensions_round_trip() {
        let cards = quota(&[("NVIDIA-H200", 2)]);
        let r = card_request_resources(&cards);
        assert_eq!(r.get("card/NVIDIA-H200"), 2000);
        assert_eq!(cards_in_resources(&r), cards);
        let partial = Resources::from_milli([("card/X", 1500), ("cpu", 4000)]);
        assert_eq!(cards_in_resources(&partial), quota(&[("X", 2)]));
    }
}
