//! A stand-in for kube-scheduler in the end-to-end run, with its shape: one pod's
//! scheduling cycle at a time, the bind of each pod asynchronous (the next cycle
//! does not wait for it), a pod whose bind or filter failed back in the queue
//! after kube-scheduler's initial backoff, and its own count of each node's
//! `nvidia.com/gpu` (extended resource) so that a full node is not a candidate.
//! Extender calls give up after kube-scheduler's default `httpTimeout` (30 s).
//!
//! With an extender, each cycle asks `/filter` with the candidate names and binds
//! through `/bind`. Without one, it picks the least allocated node itself
//! (kube-scheduler's default scoring) and creates the Binding, through a client
//! limited like kube-scheduler's (`clientConnection.qps` 50, `burst` 100 by
//! default): that limit is what bounds kube-scheduler alone.

use super::go_http2_clients::GoHttp2Clients;
use super::post;
use super::scheduled_events::ScheduledEvents;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// kube-scheduler's `podInitialBackoffSeconds`.
const BACKOFF: Duration = Duration::from_secs(1);

/// kube-scheduler's default extender `httpTimeout`: a `/filter` or `/bind` not
/// answered by then fails (the connection is dropped) and the pod goes back to
/// the queue.
const EXTENDER_HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// `post` on a stream of kube-scheduler's connections, cut off at its extender
/// timeout.
async fn call_extender(clients: &GoHttp2Clients, url: &str, body: String) -> Result<Value, String> {
    let stream = clients.stream()?;
    match tokio::time::timeout(EXTENDER_HTTP_TIMEOUT, post(&stream.client, url, body)).await {
        Ok(Ok((_, _, version))) if version != reqwest::Version::HTTP_2 => Err(format!(
            "POST {url}: answered over {version:?}, not HTTP/2 as kube-scheduler's client speaks"
        )),
        Ok(answer) => answer.map(|(answer, _, _)| answer),
        Err(_) => Err(format!(
            "POST {url}: no answer within {EXTENDER_HTTP_TIMEOUT:?} (httpTimeout)"
        )),
    }
}

/// One pod of the burst.
pub struct BurstPod {
    /// Name (namespace: the load namespace).
    pub name: String,
    /// UID the API server gave it.
    pub uid: String,
    /// The pod as kube-scheduler's cache has it (as created).
    pub object: Value,
    /// When its create returned.
    pub created: Instant,
}

/// Who binds.
pub enum Binder {
    /// The extender's `/filter` and `/bind`.
    Extender {
        clients: GoHttp2Clients,
        filter_url: String,
        bind_url: String,
    },
    /// kube-scheduler itself: the Binding through its rate-limited client.
    ApiServer {
        client: reqwest::Client,
        base: String,
        token: String,
        limiter: Arc<governor::DefaultDirectRateLimiter>,
    },
}

/// How the burst went.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Per pod, create to bound (`None`: not bound in time).
    pub bound_after: Vec<Option<Duration>>,
    /// When the last pod was bound.
    pub last_bound: Option<Instant>,
    /// Binds answered with an error (each retried after the backoff).
    pub bind_errors: u64,
    /// Filters answered with an error or no node (each retried after the backoff).
    pub filter_errors: u64,
    /// The first few errors, for the report.
    pub notes: Vec<String>,
}

impl Outcome {
    fn note(&mut self, message: String) {
        if self.notes.len() < 5 {
            eprintln!("loadgen: {message}");
            self.notes.push(message);
        }
    }
}

/// A limiter like kube-scheduler's client: `qps` calls a second, bursts of `burst`.
pub fn client_limiter(qps: u32, burst: u32) -> Arc<governor::DefaultDirectRateLimiter> {
    let qps = std::num::NonZeroU32::new(qps.max(1)).unwrap_or(std::num::NonZeroU32::MIN);
    let burst = std::num::NonZeroU32::new(burst.max(qps.get())).unwrap_or(qps);
    Arc::new(governor::RateLimiter::direct(
        governor::Quota::per_second(qps).allow_burst(burst),
    ))
}

/// Schedules every pod of the burst, in creation order, until all are bound or
/// `time_limit` passes, with a `Scheduled` event for each pod bound.
pub async fn schedule_burst(
    pods: Vec<BurstPod>,
    namespace: &str,
    nodes: &[String],
    gpus_per_node: u64,
    binder: Arc<Binder>,
    events: &ScheduledEvents,
    time_limit: Duration,
) -> Outcome {
    let deadline = Instant::now() + time_limit;
    let pods = Arc::new(pods);
    let mut outcome = Outcome {
        bound_after: vec![None; pods.len()],
        ..Outcome::default()
    };
    // kube-scheduler's cache: extended resource in use per node, and where each
    // pod is assumed.
    let mut in_use = vec![0u64; nodes.len()];
    let mut assumed: Vec<Option<usize>> = vec![None; pods.len()];
    let mut active: VecDeque<usize> = (0..pods.len()).collect();
    let (retry_tx, mut retry_rx) = mpsc::unbounded_channel::<usize>();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(usize, Result<Instant, String>)>();
    let mut unbound = pods.len();
    let back_off = |i: usize| {
        let retry_tx = retry_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(BACKOFF).await;
            let _ = retry_tx.send(i);
        });
    };
    while unbound > 0 && Instant::now() < deadline {
        // Bind answers and pods back from their backoff.
        while let Ok((i, result)) = done_rx.try_recv() {
            match result {
                Ok(at) => {
                    if let Some(n) = assumed[i] {
                        events.scheduled(namespace, &pods[i].name, &pods[i].uid, &nodes[n]);
                    }
                    outcome.bound_after[i] = Some(at.saturating_duration_since(pods[i].created));
                    outcome.last_bound = Some(outcome.last_bound.map_or(at, |t| t.max(at)));
                    unbound -= 1;
                }
                Err(e) => {
                    outcome.bind_errors += 1;
                    outcome.note(format!("bind {}: {e}", pods[i].name));
                    if let Some(n) = assumed[i].take() {
                        in_use[n] -= 1;
                    }
                    back_off(i);
                }
            }
        }
        if unbound == 0 {
            break;
        }
        while let Ok(i) = retry_rx.try_recv() {
            active.push_back(i);
        }
        let Some(i) = active.pop_front() else {
            // Nothing to schedule until a bind answers or a backoff ends.
            tokio::select! {
                Some(done) = done_rx.recv() => {
                    // Handled at the top of the loop.
                    let _ = done_tx.send(done);
                }
                Some(i) = retry_rx.recv() => active.push_back(i),
                () = tokio::time::sleep_until(deadline.into()) => {}
            }
            continue;
        };
        let fits: Vec<usize> = (0..nodes.len())
            .filter(|&n| in_use[n] < gpus_per_node)
            .collect();
        let chosen = match &*binder {
            Binder::Extender {
                clients,
                filter_url,
                ..
            } => {
                let names: Vec<&str> = fits.iter().map(|&n| nodes[n].as_str()).collect();
                let args = json!({"Pod": pods[i].object, "Nodes": null, "NodeNames": names});
                match call_extender(clients, filter_url, args.to_string()).await {
                    Ok(answer) => answer
                        .pointer("/NodeNames/0")
                        .and_then(Value::as_str)
                        .and_then(|name| nodes.iter().position(|n| n == name))
                        .ok_or_else(|| format!("no node: {answer}")),
                    Err(e) => Err(e),
                }
            }
            // kube-scheduler's default scoring: the least allocated node.
            Binder::ApiServer { .. } => fits
                .iter()
                .copied()
                .min_by_key(|&n| (in_use[n], n))
                .ok_or_else(|| "no node has room".to_string()),
        };
        let node = match chosen {
            Ok(node) => node,
            Err(e) => {
                outcome.filter_errors += 1;
                outcome.note(format!("filter {}: {e}", pods[i].name));
                back_off(i);
                continue;
            }
        };
        in_use[node] += 1;
        assumed[i] = Some(node);
        let (binder, pods, done_tx) = (binder.clone(), pods.clone(), done_tx.clone());
        let (node, namespace) = (nodes[node].clone(), namespace.to_string());
        tokio::spawn(async move {
            let result = bind(&binder, &namespace, &pods[i], &node).await;
            let _ = done_tx.send((i, result.map(|()| Instant::now())));
        });
    }
    outcome
}

async fn bind(binder: &Binder, namespace: &str, pod: &BurstPod, node: &str) -> Result<(), String> {
    match binder {
        Binder::Extender {
            clients, bind_url, ..
        } => {
            let args = json!({"PodName": pod.name, "PodNamespace": namespace,
                              "PodUID": pod.uid, "Node": node});
            let answer = call_extender(clients, bind_url, args.to_string()).await?;
            match answer.get("Error").and_then(Value::as_str) {
                Some(e) if !e.is_empty() => Err(e.to_string()),
                _ => Ok(()),
            }
        }
        Binder::ApiServer {
            client,
            base,
            token,
            limiter,
        } => {
            limiter.until_ready().await;
            let url = format!(
                "{base}/api/v1/namespaces/{namespace}/pods/{}/binding",
                pod.name
            );
            let binding = json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": namespace, "uid": pod.uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            });
            let response = client
                .post(&url)
                .bearer_auth(token)
                .json(&binding)
                .send()
                .await
                .map_err(|e| format!("POST binding: {e}"))?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                let body = response.text().await.unwrap_or_default();
                Err(format!("POST binding: HTTP {status}: {body}"))
            }
        }
    }
}
