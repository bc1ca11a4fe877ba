//! kube-scheduler's `Scheduled` event, one per bound pod, as the end-to-end
//! run's kube-scheduler stand-in posts it: an `events.k8s.io/v1` Event, each
//! sent on a task of its own (client-go's `events` broadcaster records every
//! event in a goroutine of its own) through a client limited like
//! kube-scheduler's event client (its own limiter, with the same QPS and burst
//! as its main client). Binds do not wait for their event; the API server pays
//! for it all the same.

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::mpsc;

/// A pod bound to a node, for its event.
struct Scheduled {
    namespace: String,
    pod: String,
    uid: String,
    node: String,
}

/// The running sender; stops when dropped.
pub struct ScheduledEvents {
    queue: mpsc::UnboundedSender<Scheduled>,
    /// Events sent (answered, whether accepted or not).
    sent: Arc<AtomicU64>,
    /// Of those, refused by the API server or not answered.
    pub failed: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScheduledEvents {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScheduledEvents {
    /// Starts the sender against the API server at `base`.
    pub fn start(
        client: reqwest::Client,
        base: String,
        token: String,
        limiter: Arc<governor::DefaultDirectRateLimiter>,
    ) -> Self {
        let (queue, mut pending) = mpsc::unbounded_channel::<Scheduled>();
        let sent = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let (sent_by_task, failed_by_task) = (sent.clone(), failed.clone());
        let task = tokio::spawn(async move {
            // Dropped with the task: no event outlives the sender.
            let mut in_flight = tokio::task::JoinSet::new();
            while let Some(event) = pending.recv().await {
                limiter.until_ready().await;
                let url = format!(
                    "{base}/apis/events.k8s.io/v1/namespaces/{}/events",
                    event.namespace
                );
                let post = client
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&event_object(&event))
                    .send();
                let (sent, failed) = (sent_by_task.clone(), failed_by_task.clone());
                in_flight.spawn(async move {
                    if !post.await.is_ok_and(|r| r.status().is_success()) {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                });
                while in_flight.try_join_next().is_some() {}
            }
            while in_flight.join_next().await.is_some() {}
        });
        Self {
            queue,
            sent,
            failed,
            task,
        }
    }

    /// Queues the event of `pod` (uid `uid`) bound to `node`.
    pub fn scheduled(&self, namespace: &str, pod: &str, uid: &str, node: &str) {
        // The task lives as long as `self`: the send cannot fail.
        let _ = self.queue.send(Scheduled {
            namespace: namespace.into(),
            pod: pod.into(),
            uid: uid.into(),
            node: node.into(),
        });
    }

    /// Events sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

fn event_object(e: &Scheduled) -> serde_json::Value {
    let now = chrono::Utc::now();
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{}.{:x}", e.pod, now.timestamp_nanos_opt().unwrap_or_default()),
            "namespace": e.namespace,
        },
        "eventTime": now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-loadgen",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "regarding": {
            "apiVersion": "v1", "kind": "Pod",
            "namespace": e.namespace, "name": e.pod, "uid": e.uid,
        },
        "note": format!("Successfully assigned {}/{} to {}", e.namespace, e.pod, e.node),
    })
}
