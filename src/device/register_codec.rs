//! stand-in
use crate::device::model::GpuDevice;
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RegisterError(String);
pub fn decode_register_annotation(value: &str) -> Result<Vec<GpuDevice>, RegisterError> {
    #[derive(serde::Deserialize)]
    struct D { id: String, #[serde(default)] count: u32, #[serde(default)] devmem: u64, #[serde(default)] devcore: u32, #[serde(default, rename="type")] t: String, #[serde(default)] numa: i32, #[serde(default)] health: bool, #[serde(default)] index: u32, #[serde(default)] mode: String }
    let v: Vec<D> = serde_json::from_str(value).map_err(|e| RegisterError(e.to_string()))?;
    if v.is_empty() { return Err(RegisterError("no gpu found on node".into())); }
    Ok(v.into_iter().map(|d| GpuDevice { id: d.id, index: d.index, count: d.count, devmem: d.devmem, devcore: d.devcore, model: d.t, numa: d.numa, health: d.health, mode: if d.mode.is_empty() {"hami-core".into()} else {d.mode}, pair_scores: Default::default() }).collect())
}
pub fn encode_register_annotation(devices: &[GpuDevice]) -> String {
    let v: Vec<serde_json::Value> = devices.iter().map(|d| serde_json::json!({"id": d.id, "count": d.count, "devmem": d.devmem, "devcore": d.devcore, "type": d.model, "numa": d.numa, "health": d.health, "index": d.index, "mode": d.mode})).collect();
    serde_json::to_string(&v).unwrap_or_default()
}
