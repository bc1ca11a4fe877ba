//! Codec for the node annotation `hami.io/node-nvidia-score`, in which HAMi's device
//! plugin publishes how well each pair of GPUs on a node is interconnected (NVLink /
//! P2P level). Only the `topology-aware` GPU policy uses these scores.
//!
//! Format: `[{"uuid":"GPU-0","score":{"GPU-1":50,"GPU-2":20}}]`; higher is better.

use crate::device::model::GpuDevice;
use serde::Deserialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// Pair scores of one node: GPU UUID => (other GPU UUID => score).
pub type PairScores = BTreeMap<String, BTreeMap<String, i64>>;

/// Why a pair-score annotation could not be decoded. HAMi treats a malformed value
/// as a reason not to register the node's NVIDIA devices.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PairScoreError {
    /// The value is not a JSON array of `{"uuid":..,"score":{..}}` objects.
    #[error("invalid node pair score annotation: {0}")]
    Json(String),
    /// An entry has no (or an empty) `uuid`, so it cannot be attached to any GPU.
    #[error("pair score entry without uuid in node annotation")]
    MissingUuid,
    /// Two entries describe the same GPU; which one is right cannot be told.
    #[error("duplicate pair score entry for gpu {0} in node annotation")]
    DuplicateUuid(String),
}

/// One array element. `score` may be missing or `null` (no scores for that GPU).
#[derive(Debug, Deserialize)]
struct RawEntry {
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    score: Option<BTreeMap<String, i64>>,
}

/// Decodes a `hami.io/node-nvidia-score` value into scores keyed by GPU UUID.
///
/// A JSON `null` decodes to no scores (as in HAMi's Go decoder). Entries without a
/// uuid and repeated uuids are rejected rather than silently merged, because they
/// indicate a broken device plugin.
pub fn decode_pair_scores(value: &str) -> Result<PairScores, PairScoreError> {
    let raw: Option<Vec<RawEntry>> =
        serde_json::from_str(value).map_err(|e| PairScoreError::Json(e.to_string()))?;
    let mut scores = PairScores::new();
    for entry in raw.unwrap_or_default() {
        let uuid = match entry.uuid {
            Some(uuid) if !uuid.is_empty() => uuid,
            _ => return Err(PairScoreError::MissingUuid),
        };
        if scores.contains_key(&uuid) {
            return Err(PairScoreError::DuplicateUuid(uuid));
        }
        scores.insert(uuid, entry.score.unwrap_or_default());
    }
    Ok(scores)
}

/// Sets every device's `pair_scores` from `scores` by UUID. A device without an
/// entry gets an empty map, so scores from an older annotation never linger.
pub fn attach_pair_scores(devices: &mut [GpuDevice], scores: &PairScores) {
    for device in devices {
        device.pair_scores = scores.get(&*device.id).cloned().unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn gpu(id: &str) -> GpuDevice {
        GpuDevice {
            id: id.into(),
            index: 0,
            count: 10,
            devmem: 8192,
            devcore: 100,
            model: "NVIDIA-A100".to_owned(),
            numa: 0,
            health: true,
            mode: "hami-core".to_owned(),
            pair_scores: BTreeMap::new(),
            mig_profiles: Vec::new(),
        }
    }

    #[test]
    fn decodes_hami_example() {
        let scores =
            decode_pair_scores(r#"[{"uuid":"GPU-0","score":{"GPU-1":50,"GPU-2":20}}]"#).unwrap();
        let expected: PairScores = [(
            "GPU-0".to_owned(),
            [("GPU-1".to_owned(), 50), ("GPU-2".to_owned(), 20)]
                .into_iter()
                .collect(),
        )]
        .into_iter()
        .collect();
        assert_eq!(scores, expected);
    }

    #[test]
    fn decodes_empty_and_null_forms() {
        assert!(decode_pair_scores("[]").unwrap().is_empty());
        assert!(decode_pair_scores("null").unwrap().is_empty());
        let scores =
            decode_pair_scores(r#"[{"uuid":"GPU-0"},{"uuid":"GPU-1","score":null}]"#).unwrap();
        assert_eq!(scores.len(), 2);
        assert!(scores["GPU-0"].is_empty());
        assert!(scores["GPU-1"].is_empty());
    }

    #[test]
    fn ignores_unknown_keys() {
        let scores =
            decode_pair_scores(r#"[{"uuid":"GPU-0","score":{"GPU-1":7},"links":[1,2]}]"#).unwrap();
        assert_eq!(scores["GPU-0"]["GPU-1"], 7);
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in [
            "",
            "   ",
            "{",
            r#"{"uuid":"GPU-0"}"#,
            r#"[{"uuid":"GPU-0","score":{"GPU-1":"high"}}]"#,
            r#"[{"uuid":"GPU-0","score":{"GPU-1":1.5}}]"#,
            r#"[{"uuid":"GPU-0","score":[50]}]"#,
            r#"[{"uuid":7}]"#,
            "[1]",
        ] {
            assert!(
                matches!(decode_pair_scores(bad), Err(PairScoreError::Json(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            decode_pair_scores(r#"[{"score":{"GPU-1":1}}]"#),
            Err(PairScoreError::MissingUuid)
        );
        assert_eq!(
            decode_pair_scores(r#"[{"uuid":"","score":{}}]"#),
            Err(PairScoreError::MissingUuid)
        );
        assert_eq!(
            decode_pair_scores(r#"[{"uuid":"GPU-0"},{"uuid":"GPU-0"}]"#)
                .unwrap_err()
                .to_string(),
            "duplicate pair score entry for gpu GPU-0 in node annotation"
        );
    }

    #[test]
    fn attaches_by_uuid_and_clears_missing() {
        let mut devices = vec![gpu("GPU-0"), gpu("GPU-1"), gpu("GPU-9")];
        devices[2].pair_scores.insert("GPU-0".to_owned(), 3);
        let scores = decode_pair_scores(
            r#"[{"uuid":"GPU-1","score":{"GPU-0":50}},{"uuid":"GPU-0","score":{"GPU-1":50}},{"uuid":"GPU-7","score":{"GPU-0":1}}]"#,
        )
        .unwrap();
        attach_pair_scores(&mut devices, &scores);
        assert_eq!(devices[0].pair_scores["GPU-1"], 50);
        assert_eq!(devices[1].pair_scores["GPU-0"], 50);
        assert!(devices[2].pair_scores.is_empty());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(s in any::<String>()) {
            let _ = decode_pair_scores(&s);
        }

        #[test]
        fn serde_round_trip(scores in prop::collection::btree_map(
            "GPU-[a-z0-9-]{1,12}",
            prop::collection::btree_map("GPU-[a-z0-9-]{1,12}", any::<i64>(), 0..4),
            0..4,
        )) {
            let entries: Vec<serde_json::Value> = scores
                .iter()
                .map(|(uuid, score)| serde_json::json!({"uuid": uuid, "score": score}))
                .collect();
            let text = serde_json::Value::Array(entries).to_string();
            prop_assert_eq!(decode_pair_scores(&text), Ok(scores));
        }
    }
}
