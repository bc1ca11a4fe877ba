//! Black-box tests of what slow, stalled or oversized request bodies can do to
//! other callers: bodies are charged as their bytes arrive, a body that stalls is
//! cut, the webhook's bodies and kube-scheduler's have budgets of their own, and
//! every refusal is answered in the route's own shape.

mod support;

use axum::body::Bytes;
use hyper::body::Frame;
use rcgen::ExtendedKeyUsagePurpose;
use serde_json::Value;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use support::*;

/// How long a call may take while others stall: well under the 5 s a request
/// waited for the body budget before it was refused.
const PROMPT: Duration = Duration::from_secs(3);

/// A request body without a declared length (chunked on HTTP/1, no
/// `content-length` on HTTP/2) that sends its chunks and then nothing, forever.
struct StallingBody {
    chunks: VecDeque<Bytes>,
}

impl StallingBody {
    fn after(chunks: Vec<Bytes>) -> reqwest::Body {
        reqwest::Body::wrap(Self {
            chunks: chunks.into(),
        })
    }

    fn silent() -> reqwest::Body {
        Self::after(Vec::new())
    }
}

impl hyper::body::Body for StallingBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.chunks.pop_front() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None => Poll::Pending,
        }
    }
}

fn one_gpu_node(name: &str) -> Value {
    node(name, &[h100(&gpu_uuid(name, 0), 0)], &[])
}

/// Starts a POST of `body` to `path` on `client` in a task of its own; the task
/// ends with the answer's status and body, or `None` if the connection failed.
fn post_in_background(
    client: &reqwest::Client,
    url: String,
    body: reqwest::Body,
) -> tokio::task::JoinHandle<Option<(u16, String)>> {
    let request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    tokio::spawn(async move {
        let answer = request.send().await.ok()?;
        let status = answer.status().as_u16();
        Some((status, answer.text().await.ok()?))
    })
}

/// A `/filter` of a fresh pod named `name` by `client` is answered with `gpu-a`
/// well within [`PROMPT`].
async fn filter_promptly(server: &Server, client: &reqwest::Client, name: &str) {
    let p = pod("default", name).gpus(1, 1000, 10).build();
    let filter = client
        .post(server.url("/filter"))
        .json(&filter_args(&p, &["gpu-a"]))
        .send();
    let answer: Value = tokio::time::timeout(PROMPT, async { filter.await.expect("filter") })
        .await
        .unwrap_or_else(|_| panic!("/filter of {name} answered while others stall"))
        .json()
        .await
        .expect("filter JSON");
    assert_eq!(chosen_node(&answer), "gpu-a", "{answer}");
}

/// A `/filter` for a fresh pod and a `/mutate` of another, each on a connection
/// of its own, must both be answered well within [`PROMPT`].
async fn filter_and_mutate_answer_promptly(server: &Server, client: &reqwest::Client, tag: &str) {
    filter_promptly(server, client, &format!("prompt-{tag}")).await;

    let q = pod("default", &format!("admitted-{tag}"))
        .gpus(1, 1000, 10)
        .build();
    let review = server
        .client
        .post(server.url("/mutate"))
        .json(&admission_review_for(&q))
        .send();
    let review: Value = tokio::time::timeout(PROMPT, async { review.await.expect("mutate") })
        .await
        .expect("/mutate answered while others stall")
        .json()
        .await
        .expect("review JSON");
    assert_eq!(review["response"]["allowed"], true, "{review}");
}

/// Waits for a stalled request's answer and returns it as JSON.
async fn refusal_of(request: tokio::task::JoinHandle<Option<(u16, String)>>) -> (u16, Value) {
    let (status, text) = tokio::time::timeout(Duration::from_secs(20), request)
        .await
        .expect("a stalled body is cut")
        .expect("request task")
        .expect("an answer, not a broken connection");
    let answer = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("refusal is JSON ({e}): HTTP {status} {text}"));
    (status, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stalled_chunked_filters_hold_back_no_other_call_and_are_cut() {
    let server = Server::start(vec![one_gpu_node("gpu-a")], &[]).await;
    let stalled: Vec<_> = (0..2)
        .map(|_| {
            let client = https_client(&server.root_pem, None);
            post_in_background(&client, server.url("/filter"), StallingBody::silent())
        })
        .collect();
    // Let both heads arrive before the others call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let client = https_client(&server.root_pem, None);
    filter_and_mutate_answer_promptly(&server, &client, "h1").await;
    for request in stalled {
        let (status, answer) = refusal_of(request).await;
        assert_eq!(status, 200, "{answer}");
        let error = answer["Error"].as_str().unwrap_or_default();
        assert!(error.contains("stalled"), "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_header_only_http2_streams_hold_back_no_other_call() {
    let server = Server::start(vec![one_gpu_node("gpu-a")], &[]).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let multiplexed = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(server.root_pem.as_bytes()).expect("root PEM"),
        )
        .http2_prior_knowledge()
        .build()
        .expect("HTTP/2 client");
    let stalled: Vec<_> = (0..16)
        .map(|_| post_in_background(&multiplexed, server.url("/filter"), StallingBody::silent()))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let client = https_client(&server.root_pem, None);
    filter_and_mutate_answer_promptly(&server, &client, "h2").await;
    for request in stalled {
        request.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_bodies_from_anyone_never_starve_kube_schedulers_filter() {
    let ca = new_ca("vgpu-test-ca");
    let serving = issue(&ca, "vgpu-scheduler", ExtendedKeyUsagePurpose::ServerAuth);
    let server = Server::start_with(ServerOptions {
        cluster: vec![one_gpu_node("gpu-a")],
        tls: Some(CustomTls {
            root_pem: ca.pem(),
            cert_pem: serving.cert_pem,
            key_pem: serving.key_pem,
            client_ca_pem: Some(ca.pem()),
        }),
        ..Default::default()
    })
    .await;
    // Sixteen clients without a certificate each send /mutate all but the last
    // bytes of the largest review accepted, then hold the rest back.
    let nearly_whole = Bytes::from(vec![b' '; (4 << 20) - 4096]);
    let mut stalled = Vec::new();
    for _ in 0..16 {
        let anonymous = https_client(&server.root_pem, None);
        let body = StallingBody::after(vec![nearly_whole.clone()]);
        stalled.push(post_in_background(&anonymous, server.url("/mutate"), body));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let kube_scheduler = issue(&ca, "kube-scheduler", ExtendedKeyUsagePurpose::ClientAuth);
    let trusted = https_client(&server.root_pem, Some(&kube_scheduler.identity_pem()));
    filter_promptly(&server, &trusted, "authenticated").await;
    for request in stalled {
        request.abort();
    }
}

/// POSTs `body` to `/filter`; asserts the extender's refusal (HTTP 200,
/// `{"Error": ...}`) and returns the error.
async fn filter_refusal(server: &Server, body: reqwest::Body) -> String {
    let request = post_in_background(&server.client, server.url("/filter"), body);
    let (status, answer) = refusal_of(request).await;
    assert_eq!(status, 200, "{answer}");
    answer["Error"]
        .as_str()
        .unwrap_or_else(|| panic!("an Error: {answer}"))
        .to_owned()
}

/// POSTs `body` to `/mutate`; asserts the webhook's refusal (HTTP 200, an
/// AdmissionReview that denies) and returns the status code it carries.
async fn mutate_refusal(server: &Server, body: reqwest::Body) -> Value {
    let request = post_in_background(&server.client, server.url("/mutate"), body);
    let (status, review) = refusal_of(request).await;
    assert_eq!(status, 200, "{review}");
    assert_eq!(review["kind"], "AdmissionReview", "{review}");
    assert_eq!(review["response"]["allowed"], false, "{review}");
    review["response"]["status"]["code"].clone()
}

#[tokio::test]
async fn an_over_cap_chunked_body_is_refused_in_the_routes_shape() {
    let server = Server::start(vec![one_gpu_node("gpu-a")], &["--max-request-body", "1Mi"]).await;
    let over = StallingBody::after(vec![Bytes::from(vec![b' '; 3 << 20])]);
    let error = filter_refusal(&server, over).await;
    assert!(error.contains("over this route's limit"), "{error}");
    // /mutate's cap is 4 MiB: a chunked review past it gets an AdmissionReview.
    let past_admission_cap = StallingBody::after(vec![Bytes::from(vec![b' '; 5 << 20])]);
    assert_eq!(mutate_refusal(&server, past_admission_cap).await, 413);
}

#[tokio::test]
async fn a_request_past_its_time_limit_is_answered_in_the_routes_shape() {
    let server = Server::start(vec![one_gpu_node("gpu-a")], &["--request-timeout", "1s"]).await;
    let error = filter_refusal(&server, StallingBody::silent()).await;
    assert!(error.contains("timed out"), "{error}");
    assert_eq!(mutate_refusal(&server, StallingBody::silent()).await, 503);
}
