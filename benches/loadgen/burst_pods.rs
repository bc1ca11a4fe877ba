//! The end-to-end burst's pods, created through the API server as a client
//! creating them all at once does (many requests in flight), so that their
//! creates cost what the API server charges for a write, as they do on a real
//! control plane.

use super::kube_scheduler::BurstPod;
use serde_json::Value;

/// Creates in flight at once.
const CREATES_IN_FLIGHT: usize = 64;

/// Creates `objects` (pods of `namespace`) in order, returning each as created.
pub async fn create(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    namespace: &str,
    objects: Vec<Value>,
) -> Result<Vec<BurstPod>, String> {
    use futures::StreamExt;
    let url = format!("{base}/api/v1/namespaces/{namespace}/pods");
    futures::stream::iter(objects)
        .map(|object| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let response = client
                    .post(&url)
                    .bearer_auth(token)
                    .json(&object)
                    .send()
                    .await
                    .map_err(|e| format!("POST {url}: {e}"))?;
                let status = response.status();
                let created: Value = response
                    .json()
                    .await
                    .map_err(|e| format!("POST {url}: HTTP {status}: {e}"))?;
                if !status.is_success() {
                    return Err(format!("POST {url}: HTTP {status}: {created}"));
                }
                let text = |pointer: &str| {
                    created
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                Ok(BurstPod {
                    name: text("/metadata/name"),
                    uid: text("/metadata/uid"),
                    object: created,
                    created: std::time::Instant::now(),
                })
            }
        })
        .buffered(CREATES_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}
