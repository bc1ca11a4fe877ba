//! stand-in
use chrono::{DateTime, Utc};
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOwner { pub namespace: String, pub pod: String }
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockValue { pub time: DateTime<Utc>, pub owner: Option<LockOwner> }
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LockValueError(String);
pub fn parse_lock_value(value: &str) -> Result<LockValue, LockValueError> {
    let p: Vec<&str> = value.split(',').collect();
    let t = DateTime::parse_from_rfc3339(p[0]).map_err(|e| LockValueError(e.to_string()))?.with_timezone(&Utc);
    if p.len() == 1 { return Ok(LockValue { time: t, owner: None }); }
    if p.len() != 3 { return Err(LockValueError(format!("malformed lock annotation: expected 3 parts, got {} from {value}", p.len()))); }
    Ok(LockValue { time: t, owner: Some(LockOwner { namespace: p[1].into(), pod: p[2].into() }) })
}
pub fn format_lock_value(time: DateTime<Utc>, namespace: &str, pod: &str) -> String {
    format!("{},{namespace},{pod}", time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}
impl LockValue {
    pub fn is_expired(&self, now: DateTime<Utc>, timeout: std::time::Duration) -> bool { (now - self.time).to_std().map(|d| d > timeout).unwrap_or(false) }
    pub fn is_held_by(&self, namespace: &str, pod: &str) -> bool { self.owner.as_ref().is_some_and(|o| o.namespace == namespace && o.pod == pod) }
}
