//! stand-in
use crate::device::device_config::NvidiaConfig;
pub struct WebhookConfig {
    pub scheduler_name: String,
    pub force_overwrite_default_scheduler: bool,
    pub nvidia: NvidiaConfig,
}
pub fn review(_body: &[u8], _config: &WebhookConfig) -> serde_json::Value {
    serde_json::Value::Null
}
