//! Card types: the names capacity-card quotas and `volcano.sh/card.name` use for
//! what a pod runs on.
//!
//! * A whole GPU is named like GPU feature discovery's `nvidia.com/gpu.product`
//!   label: the registered model with whitespace runs turned into `-` and the
//!   doubled vendor prefix of older HAMi registrations dropped
//!   (`NVIDIA H200 141GB HBM3` gives `NVIDIA-H200-141GB-HBM3`).
//! * A MIG instance is named after its GPU and profile, with the suffix of the
//!   `mixed` MIG strategy, under which every profile is a resource of its own:
//!   `NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed`.
//!
//! **Matching a name.** A name (a quota key, or a `volcano.sh/card.name` entry)
//! covers a card type when the parts before `/` match as a prefix (equal, or the
//! card's continues with `-`, so `NVIDIA-H200` covers `NVIDIA-H200-141GB-HBM3` but
//! not `NVIDIA-H20...`) and the parts after `/` are equal. A whole-card name never
//! covers a MIG instance, nor a MIG name a whole card.

use std::collections::BTreeMap;

/// Pod annotation naming the card types the pod may run on, `|`-separated
/// (Volcano's capacity-card), e.g. `NVIDIA-H200|NVIDIA-H100`.
pub const CARD_NAME_ANNOTATION: &str = "volcano.sh/card.name";

/// The MIG strategy whose resource naming MIG card types follow.
pub const MIG_STRATEGY: &str = "mixed";

/// The card type of a registered GPU model.
pub fn card_type(model: &str) -> String {
    let joined = model.split_whitespace().collect::<Vec<_>>().join("-");
    match joined.strip_prefix("NVIDIA-NVIDIA-") {
        Some(rest) => format!("NVIDIA-{rest}"),
        None => joined,
    }
}

/// The card type of a MIG instance of `profile` on a GPU of `model`.
pub fn mig_card_type(model: &str, profile: &str) -> String {
    format!("{}/mig-{profile}-{MIG_STRATEGY}", card_type(model))
}

/// Whether `key` covers card type `card` (see the module documentation).
pub fn key_matches(key: &str, card: &str) -> bool {
    let (key_base, key_kind) = split_kind(key);
    let (card_base, card_kind) = split_kind(card);
    key_kind == card_kind
        && card_base
            .strip_prefix(key_base)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// `NVIDIA-H200/mig-1g.18gb-mixed` → (`NVIDIA-H200`, `Some("mig-1g.18gb-mixed")`).
fn split_kind(name: &str) -> (&str, Option<&str>) {
    match name.split_once('/') {
        Some((base, kind)) => (base, Some(kind)),
        None => (name, None),
    }
}

/// The card types a pod names with `volcano.sh/card.name`, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CardNames(Vec<String>);

impl CardNames {
    /// Reads `volcano.sh/card.name` (empty entries are dropped).
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Self {
        Self(
            annotations
                .get(CARD_NAME_ANNOTATION)
                .map(|v| {
                    v.split('|')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
        )
    }

    /// True when the pod names no card type (it may run on any).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names, in the order given.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// The first name covering card type `card`, if any.
    pub fn covering(&self, card: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|n| key_matches(n, card))
            .map(String::as_str)
    }

    /// Whether the pod may run on card type `card` (any, when it names none).
    pub fn allows(&self, card: &str) -> bool {
        self.is_empty() || self.covering(card).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_card_types_follow_the_mixed_strategy_naming() {
        assert_eq!(
            mig_card_type("NVIDIA H200", "1g.18gb"),
            "NVIDIA-H200/mig-1g.18gb-mixed"
        );
        assert_eq!(
            mig_card_type("NVIDIA-NVIDIA H100 80GB HBM3", "3g.40gb"),
            "NVIDIA-H100-80GB-HBM3/mig-3g.40gb-mixed"
        );
    }

    #[test]
    fn whole_and_mig_names_cover_only_their_kind() {
        let h200_1g = "NVIDIA-H200-141GB-HBM3/mig-1g.18gb-mixed";
        assert!(key_matches("NVIDIA-H200/mig-1g.18gb-mixed", h200_1g));
        assert!(key_matches(h200_1g, h200_1g));
        assert!(
            !key_matches("NVIDIA-H200", h200_1g),
            "a whole card is not a slice"
        );
        assert!(!key_matches("NVIDIA-H200/mig-2g.35gb-mixed", h200_1g));
        assert!(!key_matches("NVIDIA-H20/mig-1g.18gb-mixed", h200_1g));
        assert!(
            !key_matches("NVIDIA-H200/mig-1g.18gb-mixed", "NVIDIA-H200-141GB-HBM3"),
            "a slice is not a whole card"
        );
        assert!(key_matches("NVIDIA-H200", "NVIDIA-H200-141GB-HBM3"));
    }

    #[test]
    fn card_names_are_alternatives_in_order() {
        let a = BTreeMap::from([(
            CARD_NAME_ANNOTATION.to_string(),
            " NVIDIA-A100 | | NVIDIA-H100/mig-1g.10gb-mixed|NVIDIA-H100".to_string(),
        )]);
        let names = CardNames::from_annotations(&a);
        assert_eq!(
            names.names(),
            [
                "NVIDIA-A100",
                "NVIDIA-H100/mig-1g.10gb-mixed",
                "NVIDIA-H100"
            ]
        );
        assert_eq!(
            names.covering("NVIDIA-H100-80GB-HBM3/mig-1g.10gb-mixed"),
            Some("NVIDIA-H100/mig-1g.10gb-mixed")
        );
        assert_eq!(names.covering("NVIDIA-H100-80GB-HBM3"), Some("NVIDIA-H100"));
        assert!(!names.allows("NVIDIA-L4"));
        assert!(CardNames::default().allows("NVIDIA-L4"));
    }
}
