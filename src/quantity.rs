//! Temporary stand-in (replaced by the real quantity parser).
#[derive(Debug, thiserror::Error)]
#[error("invalid quantity {0:?}")]
pub struct QuantityError(String);
pub fn quantity_to_count(v: &str) -> Result<u64, QuantityError> { v.parse().map_err(|_| QuantityError(v.into())) }
pub fn quantity_to_percent(v: &str) -> Result<i64, QuantityError> { v.parse().map_err(|_| QuantityError(v.into())) }
pub fn quantity_to_mib(v: &str) -> Result<u64, QuantityError> {
    if let Some(g) = v.strip_suffix("Gi") { return g.parse::<u64>().map(|g| g * 1024).map_err(|_| QuantityError(v.into())); }
    v.parse().map_err(|_| QuantityError(v.into()))
}
