//! Live-mode harness: runs the real `vgpu-scheduler serve` binary against the fake
//! kube-apiserver in `tests/fake_apiserver/` (no `--cluster-file`), plays
//! kube-scheduler (`/filter`, `/bind`) and the kubelet / device plugin (pod phases,
//! `hami.io/bind-phase`) on the fake, and checks `/debug/state` and the fake's
//! objects.
//!
//! A test file declares `mod fake_apiserver; mod support; mod live_support;`.

#![allow(dead_code)]

/// The configuration text the unit tests build their sessions from.
#[path = "../../src/volcano/conf_fixture.rs"]
pub mod conf_fixture;

use crate::fake_apiserver::FakeApiServer;
use crate::support::{GpuState, State, Usage, h100, https_client, node, pod};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The scheduler name every live server runs with.
pub const SCHEDULER: &str = "vgpu-scheduler";
/// How long a live server may take to list the fake and answer `/readyz` 200.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// How to start a live server.
#[derive(Default, Clone)]
pub struct LiveOptions {
    /// Flags after the defaults (`serve --kubeconfig .. --http-bind .. --self-signed-dir ..
    /// --scheduler-name vgpu-scheduler`).
    pub args: Vec<String>,
    /// Extra environment (e.g. `POD_NAME`).
    pub env: Vec<(String, String)>,
    /// Do not wait for `/readyz` 200 (the test watches readiness itself).
    pub no_wait: bool,
}

impl LiveOptions {
    /// Options with these extra flags.
    pub fn args(args: &[&str]) -> Self {
        LiveOptions {
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// A running live-mode server; killed (SIGKILL) on drop.
pub struct LiveServer {
    child: Option<Child>,
    /// `https://127.0.0.1:<port>`.
    pub base: String,
    /// Keep-alive HTTPS client trusting the server's self-signed certificate.
    pub client: reqwest::Client,
    /// What `/readyz` answered while [`LiveServer::wait_ready`] polled, in order.
    pub readyz_seen: Vec<u16>,
    root_pem: Option<String>,
    /// Kubeconfig, certificate and log; removed on drop.
    dir: tempfile::TempDir,
    cert_dir: PathBuf,
    log_path: PathBuf,
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// A `--scheduler-config` file (Volcano's `volcano-scheduler.conf`), kept until
/// the value is dropped.
pub struct SchedulerConfFile {
    _dir: tempfile::TempDir,
    /// Where it is.
    pub path: PathBuf,
}

impl SchedulerConfFile {
    /// Writes `text` to a fresh file.
    pub fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("volcano-scheduler.conf");
        std::fs::write(&path, text).expect("write scheduler config");
        Self { _dir: dir, path }
    }
}

impl LiveServer {
    /// Starts a server planning every 200 ms with the scheduler configuration in
    /// `conf`.
    pub async fn start_planning(api: &FakeApiServer, conf: &SchedulerConfFile) -> LiveServer {
        LiveServer::start(
            api,
            &[
                "--schedule-period",
                "200ms",
                "--scheduler-config",
                conf.path.to_str().expect("utf-8 path"),
            ],
        )
        .await
    }

    /// Starts a server on `api` with extra flags and waits until it is ready.
    pub async fn start(api: &FakeApiServer, args: &[&str]) -> LiveServer {
        LiveServer::start_with(api, LiveOptions::args(args)).await
    }

    /// Starts a server; retries on another port if the process exits at once (port
    /// taken).
    pub async fn start_with(api: &FakeApiServer, options: LiveOptions) -> LiveServer {
        let mut last = String::new();
        for _ in 0..3 {
            let mut server = LiveServer::spawn(api, &options);
            if options.no_wait {
                return server;
            }
            match server.wait_ready(READY_TIMEOUT).await {
                Ok(()) => return server,
                Err(e) => last = e,
            }
        }
        panic!("live vgpu-scheduler did not become ready: {last}");
    }

    fn spawn(api: &FakeApiServer, options: &LiveOptions) -> LiveServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = api.write_kubeconfig(dir.path());
        let cert_dir = dir.path().join("tls");
        let port = free_port();
        let log_path = dir.path().join("server.log");
        let log = File::create(&log_path).expect("log file");
        let log_err = log.try_clone().expect("log file clone");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"));
        cmd.arg("serve")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--http-bind")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--self-signed-dir")
            .arg(&cert_dir)
            .arg("--scheduler-name")
            .arg(SCHEDULER)
            .args(&options.args)
            .env("RUST_LOG", "info")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        for (k, v) in &options.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn vgpu-scheduler");
        LiveServer {
            child: Some(child),
            base: format!("https://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            readyz_seen: Vec::new(),
            root_pem: None,
            dir,
            cert_dir,
            log_path,
        }
    }

    /// Polls `/readyz` every 25 ms until it answers 200, recording every answer in
    /// [`LiveServer::readyz_seen`].
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "exited with {status} before becoming ready; log:\n{}",
                    self.log()
                ));
            }
            if started.elapsed() > timeout {
                return Err(format!("not ready after {timeout:?}; log:\n{}", self.log()));
            }
            if self.ensure_client()
                && let Ok(resp) = self.client.get(self.url("/readyz")).send().await
            {
                let code = resp.status().as_u16();
                self.readyz_seen.push(code);
                if code == 200 {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Builds the HTTPS client once the self-signed certificate exists.
    pub fn ensure_client(&mut self) -> bool {
        if self.root_pem.is_none() {
            match std::fs::read_to_string(self.cert_dir.join("cert.pem")) {
                Ok(pem) if pem.contains("END CERTIFICATE") => {
                    self.client = https_client(&pem, None);
                    self.root_pem = Some(pem);
                }
                _ => return false,
            }
        }
        true
    }

    /// Kills the process (SIGKILL, no graceful shutdown) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// The self-signed serving certificate (PEM): what a webhook
    /// configuration's `caBundle` trusts.
    pub fn certificate_pem(&self) -> &str {
        self.root_pem
            .as_deref()
            .expect("the server is ready, so its certificate was read")
    }

    /// `127.0.0.1:<port>` the server listens on.
    pub fn address(&self) -> std::net::SocketAddr {
        self.base
            .trim_start_matches("https://")
            .parse()
            .expect("base is https://127.0.0.1:<port>")
    }

    /// Full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET; status and body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let resp = self
            .client
            .get(self.url(path))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.text().await.expect("response body"))
    }

    /// POSTs JSON; status and the decoded answer (`Null` if not JSON).
    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        send_json(self.client.post(self.url(path)), path, JSON, body).await
    }

    /// `/filter` as kube-scheduler sends it (`Nodes: null`, `NodeNames`); asserts 200.
    pub async fn filter(&self, pod: &Value, nodes: &[&str]) -> Value {
        let args = json!({"Pod": pod, "Nodes": null, "NodeNames": nodes});
        let (status, answer) = self.post_json("/filter", &args).await;
        assert_eq!(status, 200, "/filter answered HTTP {status}: {answer}");
        answer
    }

    /// `/bind` for `ns/name` (UID `uid`) to `node`; asserts 200 and returns the
    /// answer's `Error` ("" on success).
    pub async fn bind(&self, ns: &str, name: &str, uid: &str, node: &str) -> String {
        let args = json!({"PodName": name, "PodNamespace": ns, "PodUID": uid, "Node": node});
        let (status, answer) = self.post_json("/bind", &args).await;
        assert_eq!(status, 200, "/bind answered HTTP {status}: {answer}");
        answer["Error"].as_str().unwrap_or("").to_string()
    }

    /// `/debug/state`.
    pub async fn state(&self) -> State {
        let (status, text) = self.get("/debug/state").await;
        assert_eq!(status, 200, "/debug/state: HTTP {status}: {text}");
        State(serde_json::from_str(&text).expect("/debug/state is JSON"))
    }

    /// Polls `/debug/state` until `pred` holds; returns the last state and whether
    /// it held.
    pub async fn wait_state(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&State) -> bool,
    ) -> (State, bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.state().await;
            if pred(&s) {
                return (s, true);
            }
            if Instant::now() >= deadline {
                return (s, false);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The value of one `/metrics` sample, named as rendered (for example
    /// `vgpu_scheduler_resyncs_total{outcome="ok"}`); 0 before a labelled
    /// counter's first increment.
    pub async fn metric(&self, sample: &str) -> u64 {
        let (status, text) = self.get("/metrics").await;
        assert_eq!(status, 200, "/metrics: HTTP {status}: {text}");
        crate::support::metric_value(&text, sample)
    }

    /// Polls `/metrics` until `sample` reaches `at_least`; returns its value.
    /// Panics with the log's tail after `timeout`.
    pub async fn wait_metric(&self, sample: &str, at_least: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.metric(sample).await;
            if value >= at_least {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{sample} is {value}, not {at_least}, after {timeout:?}; log:\n{}",
                self.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Periodic resyncs the server has finished, applied or failed.
    pub async fn resyncs(&self) -> u64 {
        self.metric(r#"vgpu_scheduler_resyncs_total{outcome="ok"}"#)
            .await
            + self
                .metric(r#"vgpu_scheduler_resyncs_total{outcome="failed"}"#)
                .await
    }

    /// How many lines of the log contain `text`.
    pub fn log_count(&self, text: &str) -> usize {
        self.log().lines().filter(|l| l.contains(text)).count()
    }

    /// Polls the log until `n` of its lines contain `text` (a line is written
    /// out within 200 ms of being logged). Panics with the log's tail after
    /// `timeout`.
    pub async fn wait_log_count(&self, text: &str, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.log_count(text) < n {
            assert!(
                Instant::now() < deadline,
                "fewer than {n} log lines with {text:?} after {timeout:?}; log:\n{}",
                self.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// `/filter` of the stored pod on `nodes`, expecting one node; returns it.
    pub async fn filter_one(
        &self,
        api: &FakeApiServer,
        ns: &str,
        name: &str,
        nodes: &[&str],
    ) -> String {
        let stored = api_pod(api, ns, name);
        let answer = self.filter(&stored, nodes).await;
        let names = answer["NodeNames"]
            .as_array()
            .unwrap_or_else(|| panic!("/filter of {ns}/{name} chose no node: {answer}"));
        assert_eq!(names.len(), 1, "one node expected: {answer}");
        names[0].as_str().expect("node name").to_string()
    }

    /// `/filter` then `/bind` of the stored pod; asserts both succeed. Returns the node.
    pub async fn schedule(
        &self,
        api: &FakeApiServer,
        ns: &str,
        name: &str,
        nodes: &[&str],
    ) -> String {
        let node = self.filter_one(api, ns, name, nodes).await;
        let uid = uid_of(&api_pod(api, ns, name));
        let error = self.bind(ns, name, &uid, &node).await;
        assert_eq!(error, "", "/bind of {ns}/{name} to {node} failed");
        node
    }
}

// ---------------------------------------------------------------------------
// Ordering barrier
// ---------------------------------------------------------------------------

/// Node the barrier's marker pods claim a GPU on; no test registers it.
const BARRIER_NODE: &str = "watch-barrier";

/// Returns once `server` has applied every pod watch event the fake emitted
/// before the call, so that a test may then assert that such an event did NOT
/// change the ledger.
///
/// Pod events reach the server on one watch, in resourceVersion order: a marker
/// pod created now is delivered after all of them, so once `/debug/state` shows
/// the marker, everything before it was processed. The marker is then deleted and
/// waited out, leaving the ledger as it was.
pub async fn watch_barrier(api: &FakeApiServer, server: &LiveServer) {
    let marker = BarrierMarker::create(api);
    let (state, seen) = server
        .wait_state(Duration::from_secs(10), |s| marker.seen_in(s))
        .await;
    assert!(
        seen,
        "barrier pod {} never tracked: {}\nlog:\n{}",
        marker.name,
        state.0,
        server.log_tail(20)
    );
    marker.remove(api, server).await;
}

/// The marker pod of [`watch_barrier`], for tests that keep sampling
/// `/debug/state` while they wait for it. It holds a GPU on a node that is not
/// registered, which the ledger books without a capacity check and which no GPU
/// of a registered node counts.
pub struct BarrierMarker {
    /// Pod name (in `default`).
    pub name: String,
    uid: String,
}

impl BarrierMarker {
    /// Creates the marker pod (ADDED, after every event so far).
    pub fn create(api: &FakeApiServer) -> BarrierMarker {
        static MARKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MARKERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("watch-barrier-{n}");
        let devices = format!("{},NVIDIA,1,0:;", gpu_id(BARRIER_NODE, 0));
        let marker = create_pod(
            api,
            running_pod("default", &name, BARRIER_NODE, &devices, 1),
        );
        BarrierMarker {
            uid: uid_of(&marker),
            name,
        }
    }

    /// Whether the server has applied the marker's creation.
    pub fn seen_in(&self, state: &State) -> bool {
        state.pod(&self.uid).is_some()
    }

    /// Deletes the marker and waits until the server has forgotten it.
    pub async fn remove(self, api: &FakeApiServer, server: &LiveServer) {
        api.delete("Pod", Some("default"), &self.name);
        let (state, gone) = server
            .wait_state(Duration::from_secs(10), |s| !self.seen_in(s))
            .await;
        assert!(gone, "barrier pod {} still tracked: {}", self.name, state.0);
    }
}

// ---------------------------------------------------------------------------
// Objects in the fake
// ---------------------------------------------------------------------------

/// GPU UUIDs in NVIDIA's format, fixed per (node, index).
pub fn gpu_id(node: &str, index: u32) -> String {
    crate::support::gpu_uuid(node, index)
}

/// A HAMi-registered node with `gpus` H100s of `count` slots each (81559 MiB, 100
/// cores) and `status.allocatable["nvidia.com/gpu"]` > 0.
pub fn gpu_node(name: &str, gpus: u32, count: u32) -> Value {
    let devices: Vec<_> = (0..gpus)
        .map(|i| h100(&gpu_id(name, i), i).count(count))
        .collect();
    let mut n = node(name, &devices, &[]);
    // Let the fake assign the uid, as the API server would.
    n["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("uid");
    n
}

/// Creates the node in the fake.
pub fn add_node(api: &FakeApiServer, name: &str, gpus: u32, count: u32) -> Value {
    api.create(gpu_node(name, gpus, count))
}

/// A pending pod (as a controller would create it) asking for `n` GPUs of `mem` MiB
/// and `cores` percent each (`mem`/`cores` 0: not set).
pub fn gpu_pod(ns: &str, name: &str, n: u32, mem: u64, cores: u32) -> Value {
    let mut limits = vec![("nvidia.com/gpu".to_string(), n.to_string())];
    if mem > 0 {
        limits.push(("nvidia.com/gpumem".into(), mem.to_string()));
    }
    if cores > 0 {
        limits.push(("nvidia.com/gpucores".into(), cores.to_string()));
    }
    let refs: Vec<(&str, &str)> = limits
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let p = pod(ns, name)
        .container(crate::support::container("cuda", &refs))
        .build();
    for_create(p)
}

/// Strips what the API server sets itself (uid, resourceVersion, creation time,
/// status) from a built pod.
pub fn for_create(mut p: Value) -> Value {
    let meta = p["metadata"].as_object_mut().expect("metadata");
    for k in ["uid", "resourceVersion", "creationTimestamp"] {
        meta.remove(k);
    }
    p.as_object_mut().expect("pod").remove("status");
    p
}

/// A pod already running on `node` with `devices` (HAMi annotation format), as
/// another scheduler instance left it.
pub fn running_pod(ns: &str, name: &str, node_name: &str, devices: &str, n: u32) -> Value {
    let p = pod(ns, name)
        .container(crate::support::container(
            "cuda",
            &[("nvidia.com/gpu", &n.to_string())],
        ))
        .holding(node_name, devices)
        .build();
    let mut p = for_create(p);
    p["status"] = json!({"phase": "Running"});
    p
}

/// The scheduling gate the webhook puts on gang members until the planner
/// places their gang.
pub const GANG_GATE: &str = "vgpu-scheduler.io/gang";

/// Whether the pod exists and still carries the gang gate.
/// A PodGroup of `min` members in the default queue.
pub fn gang_podgroup(ns: &str, name: &str, min: u32) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min, "queue": "default"}
    })
}

/// A one-GPU gang member as the webhook leaves it: our scheduler, our gate, the
/// group annotation.
pub fn gated_member(ns: &str, name: &str, group: &str) -> Value {
    let mut p = gpu_pod(ns, name, 1, 80000, 0);
    p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": group});
    p["spec"]["schedulerName"] = json!(SCHEDULER);
    p["spec"]["schedulingGates"] = json!([{"name": GANG_GATE}]);
    p
}

pub fn gang_gated(api: &FakeApiServer, ns: &str, name: &str) -> bool {
    api.get("Pod", Some(ns), name).is_some_and(|p| {
        p["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["name"] == GANG_GATE))
    })
}

/// Waits until `f` holds (15 s at most), failing with the server's log tail.
pub async fn wait_for(server: &LiveServer, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; server log:\n{}",
            server.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// GETs `path` until its body satisfies `f` (15 s at most) and returns that
/// body. What the API server shows (a status written, a gate lifted) can come
/// before the cycle that wrote it closes and publishes its view and metrics.
pub async fn wait_for_page(
    server: &LiveServer,
    path: &str,
    what: &str,
    f: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (code, body) = server.get(path).await;
        if code == 200 && f(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} in {path} ({code}): {body}\nserver log:\n{}",
            server.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a pod in the fake; returns the stored pod.
pub fn create_pod(api: &FakeApiServer, p: Value) -> Value {
    api.create(p)
}

/// POSTs `object` to the fake's collection at `path` (`/api/v1/...`) over
/// HTTP with its bearer token, as `kubectl create` does, so admission runs;
/// returns the status and the answer (the stored object or a `Status`).
pub async fn post_to_api(api: &FakeApiServer, path: &str, object: &Value) -> (u16, Value) {
    let request = reqwest::Client::new()
        .post(format!("{}{path}", api.url()))
        .bearer_auth(api.token());
    send_json(request, path, JSON, object).await
}

/// Merge-patches the fake's object at `path` (`/api/v1/...`) with `patch` over
/// HTTP with its bearer token, as `kubectl patch --type merge` does, so
/// admission runs; returns the status and the answer.
pub async fn merge_patch_api(api: &FakeApiServer, path: &str, patch: &Value) -> (u16, Value) {
    let request = reqwest::Client::new()
        .patch(format!("{}{path}", api.url()))
        .bearer_auth(api.token());
    send_json(request, path, "application/merge-patch+json", patch).await
}

const JSON: &str = "application/json";

/// Sends `body`, JSON of `content_type`, with `request` (to `path`); the status
/// and the decoded answer (`Null` if not JSON).
async fn send_json(
    request: reqwest::RequestBuilder,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let resp = request
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("response body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The stored pod; panics if absent.
pub fn api_pod(api: &FakeApiServer, ns: &str, name: &str) -> Value {
    api.get("Pod", Some(ns), name)
        .unwrap_or_else(|| panic!("pod {ns}/{name} not in the fake"))
}

/// What a PodGroup's first condition says (empty while it says nothing, or
/// while there is no such PodGroup).
pub fn podgroup_message(api: &FakeApiServer, ns: &str, name: &str) -> String {
    api.get("PodGroup", Some(ns), name)
        .and_then(|g| {
            g["status"]["conditions"][0]["message"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// A pod's `metadata.uid`.
pub fn uid_of(p: &Value) -> String {
    p["metadata"]["uid"].as_str().expect("uid").to_string()
}

/// An annotation of a stored object.
pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["annotations"][key].as_str()
}

/// A label of a stored object.
pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// Sets (or with `None` removes) annotations of a stored object with an
/// unconditional update (MODIFIED).
pub fn set_annotations(
    api: &FakeApiServer,
    kind: &str,
    ns: Option<&str>,
    name: &str,
    set: &[(&str, Option<&str>)],
) {
    let mut obj = api
        .get(kind, ns, name)
        .unwrap_or_else(|| panic!("{kind} {name} not in the fake"));
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    let a = obj["metadata"]["annotations"]
        .as_object_mut()
        .expect("annotations");
    for (k, v) in set {
        match v {
            Some(v) => {
                a.insert((*k).into(), json!(v));
            }
            None => {
                a.remove(*k);
            }
        }
    }
    api.update(obj);
}

/// Plays HAMi's device plugin after a bind: the pod's GPUs were handed over
/// (`hami.io/bind-phase: success`) and the kubelet started it.
pub fn device_plugin_allocated(api: &FakeApiServer, ns: &str, name: &str) {
    let Some(mut p) = api.get("Pod", Some(ns), name) else {
        return;
    };
    p["metadata"]["annotations"]["hami.io/bind-phase"] = json!("success");
    if !p["status"].is_object() {
        p["status"] = json!({});
    }
    p["status"]["phase"] = json!("Running");
    api.update(p);
}

// ---------------------------------------------------------------------------
// State checks
// ---------------------------------------------------------------------------

/// `/debug/state` without what changes by itself (reservation countdowns,
/// cluster-file events).
pub fn stable(state: &State) -> Value {
    let mut v = state.0.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("events");
    }
    if let Some(pods) = v["pods"].as_array_mut() {
        for p in pods {
            if let Some(o) = p.as_object_mut() {
                o.remove("reservationExpiresInSeconds");
            }
        }
    }
    v
}

/// A readable diff of two JSON values (paths that differ).
pub fn json_diff(a: &Value, b: &Value) -> Vec<String> {
    fn walk(path: String, a: &Value, b: &Value, out: &mut Vec<String>) {
        if out.len() > 40 {
            return;
        }
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<_> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    walk(
                        format!("{path}/{k}"),
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        out,
                    );
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    walk(format!("{path}/{i}"), p, q, out);
                }
            }
            _ if a != b => out.push(format!("{path}: {a} != {b}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(String::new(), a, b, &mut out);
    out
}

/// Every GPU over its slots, memory or cores, described.
pub fn over_capacity(gpus: &[GpuState]) -> Vec<String> {
    gpus.iter()
        .filter(|g| {
            g.usage.used > g.count || g.usage.usedmem > g.devmem || g.usage.usedcores > g.devcore
        })
        .map(|g| {
            format!(
                "{} {}: used {}/{} slots, {}/{} MiB, {}/{} cores",
                g.node,
                g.id,
                g.usage.used,
                g.count,
                g.usage.usedmem,
                g.devmem,
                g.usage.usedcores,
                g.devcore
            )
        })
        .collect()
}

/// Sum of GPU usage in `/debug/state`.
pub fn total_usage(state: &State) -> Usage {
    let mut t = Usage::default();
    for g in state.gpus() {
        t.used += g.usage.used;
        t.usedmem += g.usage.usedmem;
        t.usedcores += g.usage.usedcores;
    }
    t
}

/// Decodes `hami.io/vgpu-devices-allocated` into per-GPU usage (no init
/// containers: every entry takes one slot).
pub fn decode_allocation(value: &str) -> BTreeMap<String, Usage> {
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    for container in value.split(';') {
        for device in container.split(':').filter(|d| !d.trim().is_empty()) {
            let parts: Vec<&str> = device.split(',').collect();
            assert_eq!(parts.len(), 4, "device entry {device:?} in {value:?}");
            let u = out.entry(parts[0].to_string()).or_default();
            u.used += 1;
            u.usedmem += parts[2].parse::<u64>().expect("MiB");
            u.usedcores += parts[3].parse::<u64>().expect("cores");
        }
    }
    out
}

/// GPU usage as the cluster itself records it: every pod in the fake that holds
/// GPUs (our annotations, not Succeeded/Failed), summed per GPU UUID.
pub fn cluster_usage(api: &FakeApiServer) -> BTreeMap<String, Usage> {
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    for p in api.list("Pod") {
        let phase = p["status"]["phase"].as_str().unwrap_or("");
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let (Some(_), Some(alloc)) = (
            annotation(&p, "hami.io/vgpu-node"),
            annotation(&p, "hami.io/vgpu-devices-allocated"),
        ) else {
            continue;
        };
        for (uuid, u) in decode_allocation(alloc) {
            let t = out.entry(uuid).or_default();
            t.used += u.used;
            t.usedmem += u.usedmem;
            t.usedcores += u.usedcores;
        }
    }
    out
}

/// Node lock value `<RFC3339>,<ns>,<pod>` split into its parts; panics when
/// malformed.
pub fn parse_lock(value: &str) -> (chrono::DateTime<chrono::FixedOffset>, String, String) {
    let parts: Vec<&str> = value.split(',').collect();
    assert_eq!(parts.len(), 3, "lock {value:?} is not <RFC3339>,<ns>,<pod>");
    let time = chrono::DateTime::parse_from_rfc3339(parts[0])
        .unwrap_or_else(|e| panic!("lock time {:?} is not RFC 3339: {e}", parts[0]));
    (time, parts[1].to_string(), parts[2].to_string())
}
