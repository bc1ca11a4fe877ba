//! Black-box tests of what clients can make the server hold in memory: request
//! bodies in flight (one budget over all connections, small caps refused before
//! the body is read) and pods a cluster file learns from requests. Memory is read
//! from the server process's /proc status.

mod support;

use axum::body::Bytes;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Growth of the server's resident set that 64 concurrent near-cap bodies may
/// cause with the default flags: the 64 MiB body budget, each admitted body held
/// about three times while it is read and decoded, plus the HTTP/2 windows of the
/// waiting connections (README, flag `--max-request-bodies-in-flight`).
const BODY_STORM_BOUND_MIB: f64 = 320.0;

fn one_gpu_node(name: &str) -> Value {
    node(name, &[h100(&gpu_uuid(name, 0), 0)], &[])
}

/// A `/filter` body of about `size` bytes that decodes (its padding is a field
/// the extender ignores) and is answered with an error: it has no pod.
fn padded_filter_body(size: usize) -> Bytes {
    let mut body = br#"{"NodeNames":["gpu-a"],"Padding":""#.to_vec();
    body.resize(size.saturating_sub(2), b'x');
    body.extend_from_slice(br#""}"#);
    Bytes::from(body)
}

/// Samples the server's RSS until `done` is set; returns the peak.
fn sample_peak(server: &Server, done: &AtomicBool) -> f64 {
    let mut peak = server.rss_mib();
    while !done.load(Ordering::Relaxed) {
        peak = peak.max(server.rss_mib());
        std::thread::sleep(Duration::from_millis(10));
    }
    peak.max(server.rss_mib())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_near_cap_bodies_stay_within_the_body_budget() {
    let server = Arc::new(Server::start(vec![one_gpu_node("gpu-a")], &[]).await);
    let before = server.rss_mib();
    let body = padded_filter_body(31 << 20);
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (server, done) = (Arc::clone(&server), Arc::clone(&done));
        std::thread::spawn(move || sample_peak(&server, &done))
    };
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..64 {
        // One client each: 64 connections, as 64 separate peers would open.
        let client = https_client(&server.root_pem, None);
        let (url, body) = (server.url("/filter"), body.clone());
        requests.spawn(async move {
            let answer = client.post(url).body(body).send().await.ok()?;
            answer.json::<Value>().await.ok()
        });
    }
    let mut answered = 0;
    while let Some(outcome) = requests.join_next().await {
        // A refused upload may also end as a reset stream, its body unread.
        if let Some(answer) = outcome.expect("request task") {
            let error = answer["Error"].as_str().unwrap_or_default();
            assert!(
                error == "extender args missing pod" || error.contains("in flight"),
                "{answer}"
            );
            answered += 1;
        }
    }
    done.store(true, Ordering::Relaxed);
    let peak = sampler.join().expect("sampler");
    assert!(answered > 0, "some bodies were read and answered");
    assert!(
        peak - before < BODY_STORM_BOUND_MIB,
        "RSS grew from {before:.0} to {peak:.0} MiB"
    );
    // The server still schedules.
    let p = pod("default", "after-the-storm").gpus(1, 1000, 10).build();
    assert_eq!(chosen_node(&server.filter(&p, &["gpu-a"]).await), "gpu-a");
}

/// Sends a request head declaring `length` bytes of body and no body, over a raw
/// TLS connection; returns the answer's body, or `None` when none came in time.
async fn answer_to_head_only(server: &Server, path: &str, length: usize) -> Option<String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(server.root_pem.as_bytes()) {
        roots
            .add(cert.expect("server certificate"))
            .expect("trusted");
    }
    let config = rustls::ClientConfig::builder_with_provider(
        rustls::crypto::ring::default_provider().into(),
    )
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let address = server.base.trim_start_matches("https://");
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.expect("send head");
    let mut response = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut chunk = [0u8; 4096];
        loop {
            let n = tls.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            response.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&response);
            if let Some((_, body)) = text.split_once("\r\n\r\n")
                && serde_json::from_str::<Value>(body).is_ok()
            {
                break;
            }
        }
    })
    .await;
    read.ok()?;
    let text = String::from_utf8_lossy(&response).into_owned();
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

#[tokio::test]
async fn a_declared_length_over_the_cap_is_refused_before_the_body_is_read() {
    let server = Server::start(vec![one_gpu_node("gpu-a")], &[]).await;
    // An AdmissionReview carries at most two objects the API server limited:
    // /mutate refuses 5 MiB at once, without waiting for the body.
    let answer = answer_to_head_only(&server, "/mutate", 5 << 20)
        .await
        .expect("an answer without the body");
    let review: Value = serde_json::from_str(&answer).expect("AdmissionReview");
    assert_eq!(review["kind"], "AdmissionReview", "{review}");
    assert_eq!(review["response"]["allowed"], false, "{review}");
    assert_eq!(review["response"]["status"]["code"], 413, "{review}");
    // The extender verbs refuse past --max-request-body the same way, in their shape.
    let answer = answer_to_head_only(&server, "/filter", 33 << 20)
        .await
        .expect("an answer without the body");
    let error: Value = serde_json::from_str(&answer).expect("JSON");
    assert!(
        error["Error"]
            .as_str()
            .is_some_and(|e| e.contains("over this route's limit")),
        "{error}"
    );
}

/// A cluster file keeps no pod it only heard of from `/filter` once it holds
/// nothing: 150 pods that do not fit, each with a 1 MiB annotation, leave the
/// server about where it was.
#[tokio::test]
async fn pods_that_never_fit_are_not_kept_in_cluster_file_mode() {
    let server = Server::start(vec![one_gpu_node("gpu-a")], &[]).await;
    let before = server.rss_mib();
    let padding = "x".repeat(1 << 20);
    for i in 0..150 {
        let p = pod("default", &format!("too-big-{i}"))
            .annotation("example.com/notes", &padding)
            .gpus(1, 900_000, 10)
            .build();
        let answer = server.filter(&p, &["gpu-a"]).await;
        assert!(answer["FailedNodes"]["gpu-a"].is_string(), "{answer}");
    }
    let after = server.rss_mib();
    assert!(
        after - before < 64.0,
        "RSS grew from {before:.0} to {after:.0} MiB"
    );
}

/// What `/filter` alone teaches a cluster file about gang and queue pods is kept
/// up to `--max-filter-only-pods`: 300 queue pods of distinct gangs that wait,
/// each named once, leave 40 known, the rest forgotten oldest first and counted.
/// The planner then sees only those 40 gangs.
#[tokio::test]
async fn queue_pods_known_only_from_filter_stay_within_the_limit() {
    const LIMIT: usize = 40;
    const NAMED: usize = 300;
    let server = Server::start(
        vec![one_gpu_node("gpu-a")],
        &["--max-filter-only-pods", &LIMIT.to_string()],
    )
    .await;
    for i in 0..NAMED {
        let p = pod("ml", &format!("queued-{i}"))
            .annotation("scheduling.volcano.sh/queue-name", "default")
            .gpus(1, 900_000, 10)
            .build();
        let answer = server.filter(&p, &["gpu-a"]).await;
        let reason = answer["FailedNodes"]["gpu-a"].as_str().unwrap_or_default();
        assert!(reason.starts_with("gang pod ml/queued-"), "{answer}");
    }
    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(
        metric_value(&metrics, "vgpu_scheduler_filter_only_pods"),
        LIMIT as u64,
        "{metrics}"
    );
    assert_eq!(
        metric_value(
            &metrics,
            "vgpu_scheduler_filter_only_pods_dropped_total{reason=\"over-limit\"}"
        ),
        (NAMED - LIMIT) as u64,
        "{metrics}"
    );
    // A planning cycle that started after the last /filter judges only the pods
    // still known: the 40 named last.
    let last = format!("ml/queued-{}", NAMED - 1);
    let mut gangs = Vec::new();
    for _ in 0..200 {
        let (_, text) = server.get("/debug/queues").await;
        let queues: Value = serde_json::from_str(&text).expect("JSON");
        gangs = queues["gangs"].as_array().cloned().unwrap_or_default();
        if gangs.iter().any(|g| g["gang"] == last.as_str()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(gangs.len(), LIMIT, "{gangs:#?}");
    let oldest_kept = format!("ml/queued-{}", NAMED - LIMIT);
    assert!(
        gangs.iter().any(|g| g["gang"] == oldest_kept.as_str()),
        "{gangs:#?}"
    );
}
