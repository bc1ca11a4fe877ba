//! [`ClusterApi`] over the Kubernetes API: merge patches with resourceVersion
//! preconditions, Bindings with the pod UID as precondition, Events with our
//! scheduler name as source.

use crate::cluster::api::{
    ApiError, BindingMetadata, ClusterApi, EventType, GateLift, MetadataPatch, SchedulerEvent,
    VolcanoObject,
};
use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, ApiResource, DynamicObject, EvictParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Client-side limit on API calls (HAMi's `--kube-qps` / `--kube-burst`), so a
/// gang release cannot flood the API server, sized so that hundreds of binds in a
/// burst are not throttled.
type Limiter = governor::DefaultDirectRateLimiter;

/// Event creates in flight at most; more are dropped rather than queued.
const EVENTS_IN_FLIGHT: usize = 256;

/// The API server's limit on an event's message when `eventTime` is set.
const EVENT_MESSAGE_MAX_BYTES: usize = 1024;

/// Writes and point reads against a live cluster.
pub struct KubeCluster {
    client: Client,
    scheduler_name: String,
    event_counter: AtomicU64,
    event_slots: Arc<tokio::sync::Semaphore>,
    limiter: Option<Arc<Limiter>>,
    /// Events draw on a budget of their own, as kube-scheduler's event client
    /// does: two events per pod would otherwise take a quarter of the calls a
    /// burst of binds needs.
    event_limiter: Option<Arc<Limiter>>,
    /// For evictions: a client that does not retry 429 (see [`no_retry`]).
    evictions: Option<Client>,
}

/// A client configuration that does not retry 429, 503 and 504 by itself. The
/// API server answers an eviction a PodDisruptionBudget does not allow with 429:
/// that is a decision, not congestion, and retrying it (kube's default, up to 15
/// times with backoff) would stall a planning cycle for minutes. The planner asks
/// again on a later cycle instead.
pub fn no_retry(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

fn api_error(e: kube::Error, kind: &'static str, name: &str) -> ApiError {
    match e {
        kube::Error::Api(status) if status.code == 404 => ApiError::NotFound {
            kind,
            name: name.to_string(),
        },
        kube::Error::Api(status) if status.code == 409 => ApiError::Conflict(status.message),
        kube::Error::Api(status) if status.code == 429 => ApiError::Refused(status.message),
        other => ApiError::Other(other.to_string()),
    }
}

fn changes(map: &BTreeMap<String, Option<String>>) -> Value {
    let mut m = Map::new();
    for (k, v) in map {
        m.insert(k.clone(), v.clone().map_or(Value::Null, Value::String));
    }
    Value::Object(m)
}

/// A merge patch's `metadata` carrying `patch`'s annotation and label changes.
fn metadata_changes(patch: &MetadataPatch) -> Value {
    let mut metadata = Map::new();
    if !patch.annotations.is_empty() {
        metadata.insert("annotations".into(), changes(&patch.annotations));
    }
    if !patch.labels.is_empty() {
        metadata.insert("labels".into(), changes(&patch.labels));
    }
    Value::Object(metadata)
}

/// The core/v1 Event for `event`, the `n`th this process records. The API server
/// refuses a message over 1 KiB when `eventTime` is set, and a name over 253
/// characters: both are cut to fit.
fn event_object(event: &SchedulerEvent, scheduler_name: &str, n: u64) -> Event {
    let now = event.time;
    let stamp = k8s_openapi::jiff::Timestamp::from_microsecond(now.timestamp_micros())
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now());
    let suffix = format!(".{:x}{:04x}", now.timestamp_micros(), n % 0x10000);
    let stem = truncate_at_char(&event.pod, 253 - suffix.len()).trim_end_matches(['-', '.']);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{stem}{suffix}")),
            namespace: Some(event.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(event.pod.clone()),
            namespace: Some(event.namespace.clone()),
            uid: Some(event.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        },
        reason: Some(event.reason.clone()),
        message: Some(event_message(&event.message)),
        type_: Some(match event.event_type {
            EventType::Normal => "Normal".into(),
            EventType::Warning => "Warning".into(),
        }),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: Some(scheduler_name.to_string()),
            host: None,
        }),
        reporting_component: Some(scheduler_name.to_string()),
        reporting_instance: Some(scheduler_name.to_string()),
        action: Some(if event.reason.starts_with("Binding") {
            "Binding".into()
        } else {
            "Scheduling".into()
        }),
        first_timestamp: Some(Time(stamp)),
        last_timestamp: Some(Time(stamp)),
        event_time: Some(MicroTime(stamp)),
        count: Some(1),
        ..Default::default()
    }
}

/// `message` cut to the API server's limit, marked with an ellipsis when cut.
fn event_message(message: &str) -> String {
    if message.len() <= EVENT_MESSAGE_MAX_BYTES {
        return message.to_string();
    }
    const MORE: &str = "...";
    let mut cut = truncate_at_char(message, EVENT_MESSAGE_MAX_BYTES - MORE.len()).to_string();
    cut.push_str(MORE);
    cut
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character.
fn truncate_at_char(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl KubeCluster {
    /// A cluster client making at most `qps` calls per second with bursts of `burst`
    /// (`qps == 0`: no limit).
    pub fn new(client: Client, scheduler_name: String, qps: u32, burst: u32) -> Self {
        let new_limiter = || {
            std::num::NonZeroU32::new(qps).map(|qps| {
                let burst = std::num::NonZeroU32::new(burst.max(qps.get())).unwrap_or(qps);
                Arc::new(governor::RateLimiter::direct(
                    governor::Quota::per_second(qps).allow_burst(burst),
                ))
            })
        };
        let (limiter, event_limiter) = (new_limiter(), new_limiter());
        Self {
            client,
            scheduler_name,
            event_counter: AtomicU64::new(0),
            event_slots: Arc::new(tokio::sync::Semaphore::new(EVENTS_IN_FLIGHT)),
            limiter,
            event_limiter,
            evictions: None,
        }
    }

    /// Evicts through `client`, which must not retry 429 (see [`no_retry`]).
    pub fn with_eviction_client(mut self, client: Client) -> Self {
        self.evictions = Some(client);
        self
    }

    async fn admit(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.until_ready().await;
        }
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends a write whose answer nothing here reads: the API server answers
    /// with the whole object written (a Node's is kilobytes of registration
    /// annotations), which is not decoded; a refusal still comes back as an
    /// error.
    async fn send_ignoring_answer(
        &self,
        request: Result<axum::http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<(), kube::Error> {
        let request = request.map_err(kube::Error::BuildRequest)?;
        self.client.request_text(request).await.map(drop)
    }
}

#[async_trait]
impl ClusterApi for KubeCluster {
    async fn remember_pod(&self, _pod: &Pod) {}

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError> {
        self.admit().await;
        // The API, not the watch cache: bind must see the latest UID and nodeName.
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map_err(|e| api_error(e, "pod", &format!("{namespace}/{name}")))
    }

    async fn patch_pod_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: &MetadataPatch,
    ) -> Result<(), ApiError> {
        self.admit().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let body = json!({ "metadata": metadata_changes(patch) });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map(|_| ())
            .map_err(|e| api_error(e, "pod", &format!("{namespace}/{name}")))
    }

    async fn bind_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        metadata: &BindingMetadata,
    ) -> Result<(), ApiError> {
        self.admit().await;
        let mut binding_metadata = json!({"name": name, "namespace": namespace, "uid": uid});
        if !metadata.annotations.is_empty() {
            binding_metadata["annotations"] = json!(metadata.annotations);
        }
        if !metadata.labels.is_empty() {
            binding_metadata["labels"] = json!(metadata.labels);
        }
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": binding_metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}
        });
        let described = || format!("{namespace}/{name}");
        let body = serde_json::to_vec(&binding)
            .map_err(|e| api_error(kube::Error::SerdeError(e), "pod", &described()))?;
        let request = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
            .create_subresource("binding", name, &PostParams::default(), body);
        self.send_ignoring_answer(request)
            .await
            .map_err(|e| api_error(e, "pod", &described()))
    }

    async fn get_node(&self, name: &str) -> Result<Option<Node>, ApiError> {
        self.admit().await;
        let api: Api<Node> = Api::all(self.client.clone());
        api.get_opt(name)
            .await
            .map_err(|e| api_error(e, "node", name))
    }

    async fn patch_node_annotations(
        &self,
        name: &str,
        annotations: &BTreeMap<String, Option<String>>,
        resource_version: Option<&str>,
    ) -> Result<(), ApiError> {
        self.admit().await;
        let mut metadata = Map::new();
        metadata.insert("annotations".into(), changes(annotations));
        if let Some(rv) = resource_version {
            // A resourceVersion in a merge patch makes the API server refuse the
            // write with 409 when the node changed since we read it.
            metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let body = json!({ "metadata": metadata });
        let request = kube::core::Request::new(Node::url_path(&(), None)).patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&body),
        );
        self.send_ignoring_answer(request)
            .await
            .map_err(|e| api_error(e, "node", name))
    }

    async fn record_event(&self, event: SchedulerEvent) {
        // Filters and binds do not wait for their events: an event costs an API
        // call (and a turn of the client's rate limit) that kube-scheduler would
        // otherwise wait for. Past a bound of creates in flight, events are dropped.
        let Ok(slot) = self.event_slots.clone().try_acquire_owned() else {
            tracing::debug!(reason = %event.reason, pod = %event.pod, "too many events in flight; dropping one");
            return;
        };
        let n = self.event_counter.fetch_add(1, Ordering::Relaxed);
        let object = event_object(&event, &self.scheduler_name, n);
        let api: Api<Event> = Api::namespaced(self.client.clone(), &event.namespace);
        let limiter = self.event_limiter.clone();
        tokio::spawn(async move {
            if let Some(limiter) = &limiter {
                limiter.until_ready().await;
            }
            if let Err(e) = api.create(&PostParams::default(), &object).await {
                tracing::debug!(error = %e, reason = %event.reason, "could not record event");
            }
            drop(slot);
        });
    }

    async fn remove_scheduling_gate(
        &self,
        namespace: &str,
        name: &str,
        lift: &GateLift<'_>,
    ) -> Result<(), ApiError> {
        let GateLift {
            gate,
            pin,
            metadata,
            seen,
        } = *lift;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let shown = format!("{namespace}/{name}");
        // Gates can only be removed, and a merge patch replaces the whole list: send
        // the remaining gates with the resourceVersion they were read at (first as
        // the watch showed them), and read again when someone else changed the pod
        // in between.
        let mut seen = seen.cloned();
        for _ in 0..5 {
            let pod = match seen.take() {
                Some(pod) => pod,
                None => {
                    self.admit().await;
                    let read = api
                        .get_opt(name)
                        .await
                        .map_err(|e| api_error(e, "pod", &shown))?;
                    let Some(pod) = read else {
                        return Err(ApiError::NotFound {
                            kind: "pod",
                            name: shown,
                        });
                    };
                    pod
                }
            };
            let gates = pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.clone())
                .unwrap_or_default();
            if !gates.iter().any(|g| g.name == gate) {
                if metadata.annotations.is_empty() && metadata.labels.is_empty() {
                    return Ok(());
                }
                return self.patch_pod_metadata(namespace, name, metadata).await;
            }
            let remaining: Vec<Value> = gates
                .iter()
                .filter(|g| g.name != gate)
                .map(|g| json!({ "name": g.name }))
                .collect();
            let mut body = json!({
                "metadata": { "resourceVersion": pod.metadata.resource_version },
                "spec": { "schedulingGates": if remaining.is_empty() { Value::Null } else { Value::Array(remaining) } }
            });
            if let (Value::Object(m), Value::Object(changed)) =
                (&mut body["metadata"], metadata_changes(metadata))
            {
                m.extend(changed);
            }
            // The terms list is replaced whole by a merge patch: send it narrowed
            // from the version read, which the resourceVersion guards.
            if let (Some(node), Some(spec)) = (pin, pod.spec.as_ref()) {
                let selector = crate::gang::pin::pinned_selector(spec, node);
                body["spec"]["affinity"] = json!({ "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": selector
                }});
            }
            self.admit().await;
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map_err(|e| api_error(e, "pod", &shown))
            {
                Ok(_) => return Ok(()),
                Err(ApiError::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::Conflict(format!(
            "pod {shown} kept changing while its scheduling gate was removed"
        )))
    }

    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        self.admit().await;
        let client = self.evictions.as_ref().unwrap_or(&self.client).clone();
        let api: Api<Pod> = Api::namespaced(client, namespace);
        api.evict(name, &EvictParams::default())
            .await
            .map(|_| ())
            .map_err(|e| api_error(e, "pod", &format!("{namespace}/{name}")))
    }

    async fn patch_volcano_status(
        &self,
        object: &VolcanoObject,
        status: &Value,
    ) -> Result<(), ApiError> {
        self.admit().await;
        let (kind, plural) = match object {
            VolcanoObject::PodGroup { .. } => ("PodGroup", "podgroups"),
            VolcanoObject::Queue { .. } => ("Queue", "queues"),
        };
        let resource = ApiResource {
            group: "scheduling.volcano.sh".into(),
            version: "v1beta1".into(),
            api_version: "scheduling.volcano.sh/v1beta1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let (api, name): (Api<DynamicObject>, &str) = match object {
            VolcanoObject::PodGroup { namespace, name } => (
                Api::namespaced_with(self.client.clone(), namespace, &resource),
                name,
            ),
            VolcanoObject::Queue { name } => (Api::all_with(self.client.clone(), &resource), name),
        };
        let body = json!({ "status": status });
        let params = PatchParams::default();
        // Volcano's Queue CRD has a status subresource; its PodGroup CRD does not,
        // so a PodGroup's status is written through the object itself.
        let result = match object {
            VolcanoObject::PodGroup { .. } => api.patch(name, &params, &Patch::Merge(&body)).await,
            VolcanoObject::Queue { .. } => {
                api.patch_status(name, &params, &Patch::Merge(&body)).await
            }
        };
        result
            .map(|_| ())
            .map_err(|e| api_error(e, "volcano object", &object.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(pod: &str, message: String) -> SchedulerEvent {
        SchedulerEvent {
            namespace: "research".into(),
            pod: pod.into(),
            uid: "4f1c-uid".into(),
            event_type: EventType::Warning,
            reason: "FilteringFailed".into(),
            message,
            time: chrono::Utc::now(),
        }
    }

    #[test]
    fn events_name_the_pod_by_uid_so_describe_finds_them() {
        let object = event_object(&event("trainer-0", "no fit".into()), "vgpu-scheduler", 7);
        let involved = &object.involved_object;
        assert_eq!(involved.uid.as_deref(), Some("4f1c-uid"));
        assert_eq!(involved.name.as_deref(), Some("trainer-0"));
        assert_eq!(involved.kind.as_deref(), Some("Pod"));
        assert_eq!(
            object.reporting_component.as_deref(),
            Some("vgpu-scheduler")
        );
        assert!(
            object
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("trainer-0."))
        );
        let no_uid = event_object(
            &SchedulerEvent {
                uid: String::new(),
                ..event("p", "m".into())
            },
            "vgpu-scheduler",
            0,
        );
        assert_eq!(no_uid.involved_object.uid, None);
    }

    #[test]
    fn long_messages_and_names_are_cut_to_what_the_api_server_takes() {
        let nodes: Vec<String> = (0..400).map(|i| format!("gpu-node-{i:04}")).collect();
        let message = format!(
            "no available node; 400 nodes CardInsufficientMemory({})",
            nodes.join(",")
        );
        let object = event_object(&event("p", message.clone()), "vgpu-scheduler", 1);
        let cut = object.message.as_deref().unwrap_or_default();
        assert_eq!(cut.len(), EVENT_MESSAGE_MAX_BYTES);
        assert!(cut.ends_with("...") && message.starts_with(&cut[..cut.len() - 3]));
        // A multi-byte character at the limit is not split.
        let wide = "é".repeat(EVENT_MESSAGE_MAX_BYTES);
        let cut = event_message(&wide);
        assert!(
            cut.len() <= EVENT_MESSAGE_MAX_BYTES && cut.ends_with("..."),
            "{}",
            cut.len()
        );
        assert_eq!(event_message("short"), "short");

        let long_pod = format!("{}-x", "a".repeat(250));
        let object = event_object(&event(&long_pod, "m".into()), "vgpu-scheduler", 2);
        let name = object.metadata.name.unwrap_or_default();
        assert!(name.len() <= 253, "{}", name.len());
        let stem = name.split('.').next().unwrap_or_default();
        assert!(
            stem.ends_with(|c: char| c.is_ascii_alphanumeric()),
            "{name}"
        );
        assert_eq!(
            object.involved_object.name.as_deref(),
            Some(long_pod.as_str())
        );
    }
}
