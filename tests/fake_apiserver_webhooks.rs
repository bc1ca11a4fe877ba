//! The fake API server calls mutating admission webhooks as the real one does:
//! which webhooks a write is sent to (rules, scope, selectors), in which order,
//! with which AdmissionReview, what their patches and denials become, and what
//! `failurePolicy`, `timeoutSeconds` and `reinvocationPolicy` change. The
//! webhooks are a scripted HTTPS server in this file that records every review.

mod fake_apiserver;

use axum::Router;
use axum::extract::{Path, State};
use base64::Engine;
use fake_apiserver::FakeApiServer;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Every review received: the script path and the review.
type Calls = Arc<Mutex<Vec<(String, Value)>>>;

/// A scripted webhook server: `/annotate/<key>` allows and adds annotation
/// `<key>` set to how many times that path was called, `/deny/<code>` refuses
/// with that code, `/hang` never answers, `/wrong-uid` answers another uid.
struct Hooks {
    address: SocketAddr,
    ca_bundle: String,
    calls: Calls,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn answer(State(calls): State<Calls>, Path(script): Path<String>, body: String) -> String {
    let review: Value = serde_json::from_str(&body).expect("review is JSON");
    let uid = review["request"]["uid"].clone();
    let times = {
        let mut calls = calls.lock();
        calls.push((script.clone(), review));
        calls.iter().filter(|(s, _)| *s == script).count()
    };
    let response = match script.split_once('/').unwrap_or((script.as_str(), "")) {
        ("annotate", key) => {
            let patch = json!([{"op": "add", "path": format!("/metadata/annotations/{key}"), "value": times.to_string()}]);
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": b64(patch.to_string().as_bytes())})
        }
        ("deny", code) => json!({"uid": uid, "allowed": false, "status": {
            "code": code.parse::<u16>().expect("code"), "reason": "Conflict", "message": "no"
        }}),
        ("hang", _) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            json!({"uid": uid, "allowed": true})
        }
        _ => json!({"uid": "someone-else", "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
        .to_string()
}

impl Hooks {
    async fn start() -> Hooks {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certified = rcgen::generate_simple_self_signed(vec![
            "127.0.0.1".to_string(),
            "scripted.hooks.svc".to_string(),
        ])
        .expect("certificate");
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let mut tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .expect("TLS config");
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let calls = Calls::default();
        let app = Router::new()
            .route("/{*script}", axum::routing::post(answer))
            .with_state(calls.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                });
            }
        });
        Hooks {
            address,
            ca_bundle: b64(certified.cert.pem().as_bytes()),
            calls,
        }
    }

    /// A webhook named `name` calling `script` by URL, for pod creates unless
    /// `extra` (merged in) says otherwise.
    fn hook(&self, name: &str, script: &str, extra: Value) -> Value {
        let mut hook = json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {
                "url": format!("https://{}/{script}", self.address),
                "caBundle": self.ca_bundle,
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        });
        if let (Some(hook), Some(extra)) = (hook.as_object_mut(), extra.as_object()) {
            hook.extend(extra.clone());
        }
        hook
    }

    /// The script paths called so far, in order.
    fn called(&self) -> Vec<String> {
        self.calls.lock().iter().map(|(s, _)| s.clone()).collect()
    }

    fn review(&self, index: usize) -> Value {
        self.calls.lock()[index].1.clone()
    }
}

/// A fake API server and the scripted webhooks it may call.
async fn start() -> (FakeApiServer, Hooks) {
    (FakeApiServer::start().await, Hooks::start().await)
}

fn config(name: &str, hooks: Vec<Value>) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": hooks,
    })
}

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    })
}

async fn send(
    api: &FakeApiServer,
    method: &str,
    path: &str,
    ty: &str,
    body: &Value,
) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .request(
            method.parse().expect("method"),
            format!("{}{path}", api.url()),
        )
        .bearer_auth(api.token())
        .header("content-type", ty)
        .body(body.to_string())
        .send()
        .await
        .expect("request");
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

async fn create_pod(api: &FakeApiServer, ns: &str, pod: &Value) -> (u16, Value) {
    send(
        api,
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods"),
        "application/json",
        pod,
    )
    .await
}

/// Creates the MutatingWebhookConfiguration `name` with `hooks` over the API.
async fn install(api: &FakeApiServer, name: &str, hooks: Vec<Value>) {
    let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    let (code, answer) = send(api, "POST", path, "application/json", &config(name, hooks)).await;
    assert_eq!(code, 201, "{answer}");
}

fn annotations(pod: &Value) -> Value {
    pod["metadata"]["annotations"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_called_in_name_order_with_the_review_and_their_patches_stack() {
    let (api, hooks) = start().await;
    install(
        &api,
        "b",
        vec![hooks.hook("b.hooks.test", "annotate/b", json!({}))],
    )
    .await;
    install(
        &api,
        "a",
        vec![
            hooks.hook("a1.hooks.test", "annotate/a1", json!({})),
            hooks.hook("a2.hooks.test", "annotate/a2", json!({})),
        ],
    )
    .await;
    let mut generated = pod("");
    generated["metadata"] = json!({"generateName": "p-", "annotations": {}});
    let (code, stored) = create_pod(&api, "default", &generated).await;
    assert_eq!(code, 201, "{stored}");
    assert_eq!(hooks.called(), ["annotate/a1", "annotate/a2", "annotate/b"]);
    assert_eq!(
        annotations(&stored),
        json!({"a1": "1", "a2": "1", "b": "1"})
    );
    // Each webhook sees what the ones before it did.
    assert_eq!(
        annotations(&hooks.review(1)["request"]["object"]),
        json!({"a1": "1"})
    );

    let review = hooks.review(0);
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let request = &review["request"];
    let uid = request["uid"].as_str().expect("uid");
    assert!(!uid.is_empty());
    assert_eq!(
        hooks.review(2)["request"]["uid"],
        uid,
        "one uid per request"
    );
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "Pod"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["namespace"], "default");
    assert!(request.get("name").is_none(), "{request}");
    assert_eq!(request["userInfo"]["username"], "kubernetes-admin");
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"]["kind"], "CreateOptions");
    assert!(request.get("oldObject").is_none());
    let object = &request["object"];
    assert_eq!(object["metadata"]["generateName"], "p-");
    assert!(object["metadata"].get("uid").is_none());
    assert_eq!(object["spec"]["schedulerName"], "default-scheduler");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_scope_and_selectors_pick_the_webhooks() {
    let (api, hooks) = start().await;
    api.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "ml"}}}));
    api.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}));
    let update = |resources: Value| json!({"rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}]});
    install(&api, "all",
            vec![
                hooks.hook("main.hooks.test", "annotate/main", update(json!(["pods"]))),
                hooks.hook("status.hooks.test", "annotate/status", update(json!(["pods/status"]))),
                hooks.hook("subs.hooks.test", "annotate/subs", update(json!(["pods/*"]))),
                hooks.hook(
                    "cluster.hooks.test",
                    "annotate/cluster",
                    json!({"rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "scope": "Cluster"}]}),
                ),
                hooks.hook("ns.hooks.test", "annotate/ns", json!({"namespaceSelector": {"matchLabels": {"team": "ml"}}})),
                hooks.hook("obj.hooks.test", "annotate/obj", json!({"objectSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}})),
            ],
    )
    .await;
    let mut gpu = pod("gpu");
    gpu["metadata"]["labels"] = json!({"tier": "gpu"});
    assert_eq!(create_pod(&api, "ml", &gpu).await.0, 201);
    assert_eq!(hooks.called(), ["annotate/ns", "annotate/obj"]);
    assert_eq!(create_pod(&api, "web", &pod("plain")).await.0, 201);
    assert_eq!(hooks.called().len(), 2, "{:?}", hooks.called());

    let merge = "application/merge-patch+json";
    let path = "/api/v1/namespaces/ml/pods/gpu";
    let (code, patched) = send(
        &api,
        "PATCH",
        path,
        merge,
        &json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(hooks.called()[2..], ["annotate/main"]);
    assert_eq!(annotations(&patched)["main"], "1");
    let request = hooks.review(2)["request"].clone();
    assert_eq!(request["operation"], "UPDATE");
    assert_eq!(request["name"], "gpu");
    assert_eq!(request["options"]["kind"], "PatchOptions");
    assert_eq!(request["object"]["metadata"]["labels"]["x"], "y");
    assert!(
        request["oldObject"]["metadata"]["labels"]
            .get("x")
            .is_none()
    );

    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    let (code, answer) = send(&api, "PATCH", &format!("{path}/status"), merge, &status).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(hooks.called()[3..], ["annotate/status", "annotate/subs"]);
    assert_eq!(hooks.review(3)["request"]["subResource"], "status");
    let stored = api.get("Pod", Some("ml"), "gpu").expect("pod");
    assert_eq!(annotations(&stored)["status"], "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_answers_with_the_webhooks_code_reason_and_message() {
    let (api, hooks) = start().await;
    install(
        &api,
        "deny",
        vec![hooks.hook("deny.hooks.test", "deny/409", json!({}))],
    )
    .await;
    let (code, status) = create_pod(&api, "default", &pod("p")).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "admission webhook \"deny.hooks.test\" denied the request: no"
    );
    assert!(api.get("Pod", Some("default"), "p").is_none());

    // A code below 400 still refuses, as 400.
    install(
        &api,
        "deny-ok",
        vec![hooks.hook("ok.hooks.test", "deny/200", json!({}))],
    )
    .await;
    let (code, status) = create_pod(&api, "default", &pod("q")).await;
    assert_eq!(
        code, 409,
        "the first configuration by name answers first: {status}"
    );
    send(
        &api,
        "DELETE",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/deny",
        "application/json",
        &json!({}),
    )
    .await;
    let (code, status) = create_pod(&api, "default", &pod("q")).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"ok.hooks.test\" denied the request: no"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_calls_follow_the_failure_policy_and_the_timeout() {
    let (api, hooks) = start().await;
    let hang = json!({"timeoutSeconds": 1});
    install(
        &api,
        "hang",
        vec![hooks.hook("hang.hooks.test", "hang", hang)],
    )
    .await;
    let (code, status) = create_pod(&api, "default", &pod("p")).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["reason"], "InternalError");
    let message = status["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"hang.hooks.test\": failed to call webhook: Post \"https://{}/hang?timeout=1s\": context deadline exceeded",
            hooks.address
        )),
        "{message}"
    );
    assert!(api.get("Pod", Some("default"), "p").is_none());

    let ignore = json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"});
    let mut hang_ignored = config("hang", vec![hooks.hook("hang.hooks.test", "hang", ignore)]);
    let current = api
        .get("MutatingWebhookConfiguration", None, "hang")
        .expect("config");
    hang_ignored["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/hang";
    assert_eq!(
        send(&api, "PUT", path, "application/json", &hang_ignored)
            .await
            .0,
        200
    );
    assert_eq!(create_pod(&api, "default", &pod("p")).await.0, 201);

    // An answer for another request is a failed call too.
    install(
        &api,
        "uid",
        vec![hooks.hook("uid.hooks.test", "wrong-uid", json!({}))],
    )
    .await;
    let (code, status) = create_pod(&api, "default", &pod("q")).await;
    assert_eq!(code, 500, "{status}");
    let message = status["message"].as_str().unwrap_or("");
    assert!(message.contains("expected response.uid="), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_is_reached_where_the_test_routes_it_and_verified_by_its_dns_name() {
    let (api, hooks) = start().await;
    let mut hook = hooks.hook("svc.hooks.test", "", json!({}));
    hook["clientConfig"] = json!({
        "service": {"namespace": "hooks", "name": "scripted", "path": "/annotate/svc"},
        "caBundle": hooks.ca_bundle,
    });
    install(&api, "svc", vec![hook.clone()]).await;
    let (code, status) = create_pod(&api, "default", &pod("p")).await;
    assert_eq!(code, 500, "not routed yet: {status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("https://scripted.hooks.svc:443/annotate/svc?timeout=10s"),
        "{status}"
    );
    api.route_service("hooks", "scripted", 443, hooks.address);

    // Reached, but under a CA that did not sign its certificate: a failed call.
    let stranger = rcgen::generate_simple_self_signed(vec!["scripted.hooks.svc".to_string()])
        .expect("certificate");
    let mut untrusted = hook;
    untrusted["clientConfig"]["caBundle"] = json!(b64(stranger.cert.pem().as_bytes()));
    install(&api, "svc-untrusted", vec![untrusted]).await;
    let (code, status) = create_pod(&api, "default", &pod("p")).await;
    assert_eq!(code, 500, "{status}");
    let message = status["message"].as_str().unwrap_or("");
    assert!(message.contains("certificate"), "{message}");
    let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/svc-untrusted";
    send(&api, "DELETE", path, "application/json", &json!({})).await;

    let (code, stored) = create_pod(&api, "default", &pod("p")).await;
    assert_eq!(code, 201, "{stored}");
    // Its second call: the first one was for the pod the untrusted one refused.
    assert_eq!(annotations(&stored)["svc"], "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_needed_webhooks_are_called_again_after_a_later_change() {
    let (api, hooks) = start().await;
    let if_needed = json!({"reinvocationPolicy": "IfNeeded"});
    install(
        &api,
        "order",
        vec![
            hooks.hook("again.hooks.test", "annotate/again", if_needed),
            hooks.hook("once.hooks.test", "annotate/once", json!({})),
            hooks.hook("later.hooks.test", "annotate/later", json!({})),
        ],
    )
    .await;
    let (code, stored) = create_pod(&api, "default", &pod("p")).await;
    assert_eq!(code, 201, "{stored}");
    assert_eq!(
        hooks.called(),
        [
            "annotate/again",
            "annotate/once",
            "annotate/later",
            "annotate/again"
        ]
    );
    assert_eq!(
        annotations(&stored),
        json!({"again": "2", "once": "1", "later": "1"})
    );
}
