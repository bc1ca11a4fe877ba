//! stand-in
use crate::device::model::GpuDevice;
use std::collections::BTreeMap;
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PairScoreError(String);
pub fn decode_pair_scores(value: &str) -> Result<BTreeMap<String, BTreeMap<String, i64>>, PairScoreError> {
    #[derive(serde::Deserialize)]
    struct E { uuid: String, score: BTreeMap<String, i64> }
    let v: Vec<E> = serde_json::from_str(value).map_err(|e| PairScoreError(e.to_string()))?;
    Ok(v.into_iter().map(|e| (e.uuid, e.score)).collect())
}
pub fn attach_pair_scores(devices: &mut [GpuDevice], scores: &BTreeMap<String, BTreeMap<String, i64>>) {
    for d in devices { if let Some(s) = scores.get(&d.id) { d.pair_scores = s.clone(); } }
}
