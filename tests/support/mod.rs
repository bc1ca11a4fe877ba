//! Black-box harness: starts the real `vgpu-scheduler serve` binary on a free
//! loopback port with its own cluster file and self-signed certificate, waits for
//! `/readyz`, and talks HTTPS to it with keep-alive. Also builds HAMi-shaped nodes,
//! pods and kube-scheduler requests.

#![allow(dead_code)]

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to answer `/readyz` with 200.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

/// TLS material for a server started with `--cert-file/--key-file` (and optionally
/// `--client-ca-file`) instead of the self-signed mode.
pub struct CustomTls {
    /// PEM of the CA the client trusts.
    pub root_pem: String,
    /// Serving certificate (PEM).
    pub cert_pem: String,
    /// Serving key (PEM).
    pub key_pem: String,
    /// CA whose client certificates the extender verbs require.
    pub client_ca_pem: Option<String>,
}

/// How to start a server.
#[derive(Default)]
pub struct ServerOptions {
    /// Cluster documents (each becomes one YAML document; JSON is valid YAML).
    pub cluster: Vec<Value>,
    /// Raw cluster file text, used instead of `cluster` when set.
    pub cluster_text: Option<String>,
    /// Extra flags after the defaults.
    pub args: Vec<String>,
    /// Certificates to serve instead of the self-signed one.
    pub tls: Option<CustomTls>,
}

/// A running `vgpu-scheduler serve`; killed on drop.
pub struct Server {
    child: Child,
    /// `https://127.0.0.1:<port>`.
    pub base: String,
    /// Keep-alive client trusting the server's certificate.
    pub client: reqwest::Client,
    /// PEM the client trusts (to build more clients, e.g. with an identity).
    pub root_pem: String,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// A client trusting `root_pem` only, optionally presenting `identity_pem`
/// (private key followed by certificate chain).
pub fn https_client(root_pem: &str, identity_pem: Option<&str>) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(root_pem.as_bytes()).expect("root certificate PEM"),
        )
        .pool_idle_timeout(Duration::from_secs(30))
        .timeout(Duration::from_secs(30));
    if let Some(pem) = identity_pem {
        builder =
            builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity PEM"));
    }
    builder.build().expect("build HTTPS client")
}

/// Renders cluster documents as a multi-document YAML file.
pub fn cluster_text(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| serde_json::to_string_pretty(d).expect("serialise cluster document"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Gangs in queues shared by proportion: Volcano's usual configuration.
pub const GANG_PROPORTION_CONF: &str = "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: proportion
";

impl Server {
    /// Starts a server over `cluster` with extra flags `args`.
    pub async fn start(cluster: Vec<Value>, args: &[&str]) -> Server {
        Server::start_with(ServerOptions {
            cluster,
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .await
    }

    /// Starts a server over `cluster` with `conf` as its `--scheduler-config`; the
    /// directory holding the file lives as long as the server is wanted.
    pub async fn start_with_scheduler_conf(
        cluster: Vec<Value>,
        conf: &str,
    ) -> (Server, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("volcano-scheduler.conf");
        std::fs::write(&path, conf).expect("write scheduler config");
        let server = Server::start(
            cluster,
            &["--scheduler-config", path.to_str().expect("utf-8 path")],
        )
        .await;
        (server, dir)
    }

    /// Starts a server; retries with another port if the chosen one was taken.
    pub async fn start_with(options: ServerOptions) -> Server {
        let mut last_error = String::new();
        for _ in 0..3 {
            match Server::try_start(&options).await {
                Ok(server) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("vgpu-scheduler did not start: {last_error}");
    }

    async fn try_start(options: &ServerOptions) -> Result<Server, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let cluster_file = dir.path().join("cluster.yaml");
        let text = options
            .cluster_text
            .clone()
            .unwrap_or_else(|| cluster_text(&options.cluster));
        std::fs::write(&cluster_file, text).map_err(|e| e.to_string())?;
        let cert_dir = dir.path().join("tls");
        let port = free_port();
        let log_path = dir.path().join("server.log");
        let log = File::create(&log_path).map_err(|e| e.to_string())?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;

        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"));
        cmd.arg("serve")
            .arg("--cluster-file")
            .arg(&cluster_file)
            .arg("--http-bind")
            .arg(format!("127.0.0.1:{port}"));
        let root_pem = match &options.tls {
            None => {
                cmd.arg("--self-signed-dir").arg(&cert_dir);
                None
            }
            Some(tls) => {
                let write = |name: &str, pem: &str| -> Result<PathBuf, String> {
                    let p = dir.path().join(name);
                    std::fs::write(&p, pem).map_err(|e| e.to_string())?;
                    Ok(p)
                };
                cmd.arg("--cert-file")
                    .arg(write("server.pem", &tls.cert_pem)?)
                    .arg("--key-file")
                    .arg(write("server-key.pem", &tls.key_pem)?);
                if let Some(ca) = &tls.client_ca_pem {
                    cmd.arg("--client-ca-file").arg(write("client-ca.pem", ca)?);
                }
                Some(tls.root_pem.clone())
            }
        };
        cmd.args(&options.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
        let mut server = Server {
            child,
            base: format!("https://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            root_pem: String::new(),
            dir,
        };

        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "exited with {status} before becoming ready; log:\n{}",
                    read_log(&log_path)
                ));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "not ready after {READY_TIMEOUT:?}; log:\n{}",
                    read_log(&log_path)
                ));
            }
            let root = match &root_pem {
                Some(pem) => Some(pem.clone()),
                None => std::fs::read_to_string(cert_dir.join("cert.pem")).ok(),
            };
            if let Some(root) = root.filter(|r| r.contains("BEGIN CERTIFICATE")) {
                if server.root_pem != root {
                    server.client = https_client(&root, None);
                    server.root_pem = root;
                }
                if let Ok(resp) = server.client.get(server.url("/readyz")).send().await
                    && resp.status().as_u16() == 200
                {
                    return Ok(server);
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's resident set size in MiB, from /proc.
    pub fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the server's /proc status");
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc status");
        kib / 1024.0
    }

    /// Sends SIGTERM and waits up to `within` for the server to exit; its exit
    /// status, or `None` when it still runs.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits");
        // SAFETY: sends SIGTERM to the child this harness started; no memory is shared.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "send SIGTERM");
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }

    /// The temporary directory of this server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        read_log(&self.dir.path().join("server.log"))
    }

    /// Full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POSTs raw bytes as JSON; returns status and body text.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, String) {
        let resp = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.text().await.expect("response body"))
    }

    /// POSTs JSON; returns status and the decoded answer (`Value::Null` if not JSON).
    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, text) = self.post_raw(path, body.to_string()).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// GET; returns status and body text.
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

    /// `/filter` with kube-scheduler's shape (`nodeCacheCapable: true`); asserts 200.
    pub async fn filter(&self, pod: &Value, nodes: &[&str]) -> Value {
        let (status, answer) = self.post_json("/filter", &filter_args(pod, nodes)).await;
        assert_eq!(status, 200, "/filter answered HTTP {status}: {answer}");
        answer
    }

    /// `/bind` with kube-scheduler's shape for `pod` (taken from its metadata); asserts 200.
    pub async fn bind(&self, pod: &Value, node: &str) -> Value {
        self.bind_args(&bind_args(pod_ns(pod), pod_name(pod), pod_uid(pod), node))
            .await
    }

    /// `/bind` with explicit arguments; asserts 200.
    pub async fn bind_args(&self, args: &Value) -> Value {
        let (status, answer) = self.post_json("/bind", args).await;
        assert_eq!(status, 200, "/bind answered HTTP {status}: {answer}");
        answer
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
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// The value of one sample in a `/metrics` text, named as rendered (`name` or
/// `name{labels}`); 0 when absent, as a labelled counter is before its first
/// increment.
pub fn metric_value(text: &str, sample: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .unwrap_or_else(|e| panic!("{sample}: value {v:?}: {e}")) as u64
        })
        .unwrap_or(0)
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

// ---------------------------------------------------------------------------
// /debug/state
// ---------------------------------------------------------------------------

/// Usage of one GPU as /debug/state reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub used: u64,
    pub usedmem: u64,
    pub usedcores: u64,
}

/// One GPU in /debug/state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuState {
    pub node: String,
    pub id: String,
    pub count: u64,
    pub devmem: u64,
    pub devcore: u64,
    pub usage: Usage,
}

/// A decoded /debug/state answer.
#[derive(Debug, Clone)]
pub struct State(pub Value);

fn num(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("field {key} missing or not a number in {v}"))
}

impl State {
    /// Every GPU of every node.
    pub fn gpus(&self) -> Vec<GpuState> {
        let mut out = Vec::new();
        for node in self.0["nodes"].as_array().expect("nodes array") {
            let name = node["name"].as_str().expect("node name").to_string();
            for g in node["gpus"].as_array().expect("gpus array") {
                out.push(GpuState {
                    node: name.clone(),
                    id: g["id"].as_str().expect("gpu id").to_string(),
                    count: num(g, "count"),
                    devmem: num(g, "devmem"),
                    devcore: num(g, "devcore"),
                    usage: Usage {
                        used: num(g, "used"),
                        usedmem: num(g, "usedmem"),
                        usedcores: num(g, "usedcores"),
                    },
                });
            }
        }
        out
    }

    /// Usage of the GPU with UUID `id`.
    pub fn gpu_usage(&self, id: &str) -> Usage {
        self.gpus()
            .into_iter()
            .find(|g| g.id == id)
            .unwrap_or_else(|| panic!("GPU {id} not in /debug/state: {}", self.0))
            .usage
    }

    /// The node entry named `name`.
    pub fn node(&self, name: &str) -> &Value {
        self.0["nodes"]
            .as_array()
            .expect("nodes array")
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("node {name} not in /debug/state: {}", self.0))
    }

    /// Tracked pods.
    /// Names of the registered nodes, in the dump's order (by name).
    pub fn node_names(&self) -> Vec<&str> {
        self.0["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .filter_map(|n| n["name"].as_str())
            .collect()
    }

    pub fn pods(&self) -> &Vec<Value> {
        self.0["pods"].as_array().expect("pods array")
    }

    /// The tracked pod with this UID, if any.
    pub fn pod(&self, uid: &str) -> Option<&Value> {
        self.pods().iter().find(|p| p["uid"] == uid)
    }

    /// The tracked pod with this UID; panics if absent.
    pub fn expect_pod(&self, uid: &str) -> &Value {
        self.pod(uid)
            .unwrap_or_else(|| panic!("pod {uid} not tracked in /debug/state: {}", self.0))
    }

    /// Events recorded by the in-memory cluster.
    pub fn events(&self) -> Vec<Value> {
        self.0["events"].as_array().cloned().unwrap_or_default()
    }

    /// Whether an event with `reason` exists for pod `name`.
    pub fn has_event(&self, pod: &str, reason: &str) -> bool {
        self.events()
            .iter()
            .any(|e| e["pod"] == pod && e["reason"] == reason)
    }
}

/// A tracked pod's devices encoded the way HAMi writes `hami.io/vgpu-devices-allocated`
/// (`UUID,NVIDIA,MEM,CORES:` per device, `;` after each container).
pub fn encode_devices(pod: &Value) -> String {
    let mut out = String::new();
    for container in pod["devices"].as_array().expect("devices array") {
        for d in container.as_array().expect("container devices array") {
            out.push_str(&format!(
                "{},{},{},{}:",
                d["uuid"].as_str().expect("uuid"),
                d["vendor"].as_str().expect("vendor"),
                num(d, "usedmem"),
                num(d, "usedcores")
            ));
        }
        out.push(';');
    }
    out
}

/// Per-GPU usage of one tracked pod by HAMi's collapse rule: init containers run one
/// at a time, app containers together; `mem = max(max init, sum app)`, same for cores,
/// `slots = max(1 if any init, number of app containers)`.
pub fn collapse(devices: &Value, init_count: usize) -> BTreeMap<String, Usage> {
    #[derive(Default)]
    struct Acc {
        init_mem: u64,
        init_cores: u64,
        init_used: bool,
        app_mem: u64,
        app_cores: u64,
        app_count: u64,
    }
    let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
    for (i, container) in devices
        .as_array()
        .expect("devices array")
        .iter()
        .enumerate()
    {
        for d in container.as_array().expect("container array") {
            let a = acc
                .entry(d["uuid"].as_str().expect("uuid").to_string())
                .or_default();
            let (mem, cores) = (num(d, "usedmem"), num(d, "usedcores"));
            if i < init_count {
                a.init_mem = a.init_mem.max(mem);
                a.init_cores = a.init_cores.max(cores);
                a.init_used = true;
            } else {
                a.app_mem += mem;
                a.app_cores += cores;
                a.app_count += 1;
            }
        }
    }
    acc.into_iter()
        .map(|(uuid, a)| {
            (
                uuid,
                Usage {
                    used: a.app_count.max(u64::from(a.init_used)).max(1),
                    usedmem: a.init_mem.max(a.app_mem),
                    usedcores: a.init_cores.max(a.app_cores),
                },
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Cluster objects
// ---------------------------------------------------------------------------

/// Deterministic UUID-shaped string for a name (FNV-1a based).
pub fn uid_for(name: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut h2: u64 = 0x8422_2325_cbf2_9ce4;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h2 = h2.rotate_left(5) ^ u64::from(b);
        h2 = h2.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        (h >> 32) as u32,
        (h >> 16) as u16,
        (h & 0xfff) as u16,
        (h2 >> 52) as u16 & 0xfff,
        h2 & 0xffff_ffff_ffff
    )
}

/// A GPU UUID in NVIDIA's format, deterministic per (node, index).
pub fn gpu_uuid(node: &str, index: u32) -> String {
    format!("GPU-{}", uid_for(&format!("{node}/gpu{index}")))
}

/// One physical GPU as HAMi's device plugin registers it.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub id: String,
    pub index: u32,
    pub count: u32,
    pub devmem: u64,
    pub devcore: u32,
    pub model: String,
    pub numa: i32,
    pub health: bool,
    /// `migProfiles` of a GPU in MIG mode (`None`: a `hami-core` GPU).
    pub mig_profiles: Option<Value>,
}

/// An H100 (81559 MiB, 100 cores, 10 slots), healthy, NUMA 0.
pub fn h100(id: &str, index: u32) -> Gpu {
    Gpu {
        id: id.to_string(),
        index,
        count: 10,
        devmem: 81559,
        devcore: 100,
        model: "NVIDIA H100 80GB HBM3".into(),
        numa: 0,
        health: true,
        mig_profiles: None,
    }
}

/// The MIG profiles HAMi's device plugin registers for an H100 80GB (memory and
/// placements as NVML reports them).
pub fn h100_mig_profiles() -> Value {
    let one_slice: Vec<Value> = (0..7).map(|s| json!({"start": s, "size": 1})).collect();
    json!([
        {"name": "1g.10gb", "memoryMB": 9856, "core": 14, "sliceCount": 1, "placements": one_slice},
        {"name": "2g.20gb", "memoryMB": 19968, "core": 28, "sliceCount": 2,
         "placements": [{"start": 0, "size": 2}, {"start": 2, "size": 2}, {"start": 4, "size": 2}]},
        {"name": "3g.40gb", "memoryMB": 40192, "core": 42, "sliceCount": 3,
         "placements": [{"start": 0, "size": 4}, {"start": 4, "size": 4}]},
        {"name": "7g.80gb", "memoryMB": 80896, "core": 100, "sliceCount": 7,
         "placements": [{"start": 0, "size": 8}]}
    ])
}

/// An H100 in MIG mode: 7 instances at most, the H100's MIG profiles.
pub fn h100_mig(id: &str, index: u32) -> Gpu {
    Gpu {
        count: 7,
        mig_profiles: Some(h100_mig_profiles()),
        ..h100(id, index)
    }
}

impl Gpu {
    pub fn count(mut self, n: u32) -> Self {
        self.count = n;
        self
    }
    pub fn devmem(mut self, mib: u64) -> Self {
        self.devmem = mib;
        self
    }
    pub fn model(mut self, m: &str) -> Self {
        self.model = m.into();
        self
    }
    pub fn numa(mut self, n: i32) -> Self {
        self.numa = n;
        self
    }
    pub fn unhealthy(mut self) -> Self {
        self.health = false;
        self
    }

    fn json(&self) -> Value {
        let mode = if self.mig_profiles.is_some() {
            "mig"
        } else {
            "hami-core"
        };
        let mut v = json!({
            "id": self.id, "count": self.count, "devmem": self.devmem,
            "devcore": self.devcore, "type": self.model, "index": self.index,
            "mode": mode,
        });
        if let Some(profiles) = &self.mig_profiles {
            v["migProfiles"] = profiles.clone();
        }
        // The device plugin omits zero NUMA and false health (Go omitempty).
        if self.numa != 0 {
            v["numa"] = json!(self.numa);
        }
        if self.health {
            v["health"] = json!(true);
        }
        v
    }
}

/// The `hami.io/node-nvidia-register` value for `gpus` (JSON format, v2.8+).
pub fn register_annotation(gpus: &[Gpu]) -> String {
    Value::Array(gpus.iter().map(Gpu::json).collect()).to_string()
}

/// A Node object registered by HAMi's device plugin, with extra annotations.
pub fn node(name: &str, gpus: &[Gpu], extra_annotations: &[(&str, &str)]) -> Value {
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        "hami.io/node-handshake".into(),
        json!("Requesting_2026-11-22 10:00:00"),
    );
    annotations.insert(
        "hami.io/node-nvidia-register".into(),
        json!(register_annotation(gpus)),
    );
    for (k, v) in extra_annotations {
        annotations.insert((*k).into(), json!(v));
    }
    raw_node(name, Value::Object(annotations), gpus.len())
}

/// A Node with exactly these annotations (e.g. none, or a garbage register value).
pub fn raw_node(name: &str, annotations: Value, gpu_count: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid_for(&format!("node/{name}")),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.present": "true",
            },
            "annotations": annotations,
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110",
                          "nvidia.com/gpu": (gpu_count * 10).to_string()},
            "allocatable": {"cpu": "63", "memory": "500Gi", "pods": "110",
                             "nvidia.com/gpu": (gpu_count * 10).to_string()},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "architecture": "amd64",
                          "operatingSystem": "linux"},
        },
    })
}

/// A ResourceQuota limiting vGPU resources in a namespace.
pub fn quota(ns: &str, name: &str, hard: &[(&str, &str)]) -> Value {
    let hard: serde_json::Map<String, Value> = hard
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hard": hard},
    })
}

/// Builds a Pod as kube-scheduler sends it.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    ns: String,
    name: String,
    uid: String,
    annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    init: Vec<Value>,
    containers: Vec<Value>,
    node_name: Option<String>,
    phase: String,
}

/// A pod `ns/name` with a UID derived from its name and no containers yet.
pub fn pod(ns: &str, name: &str) -> PodBuilder {
    PodBuilder {
        ns: ns.into(),
        name: name.into(),
        uid: uid_for(&format!("pod/{ns}/{name}")),
        annotations: BTreeMap::new(),
        labels: BTreeMap::new(),
        init: Vec::new(),
        containers: Vec::new(),
        node_name: None,
        phase: "Pending".into(),
    }
}

/// A container with these limits (empty = asks for nothing).
pub fn container(name: &str, limits: &[(&str, &str)]) -> Value {
    let limits: serde_json::Map<String, Value> = limits
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    json!({
        "name": name,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"],
        "resources": {
            "limits": limits,
            "requests": {"cpu": "1", "memory": "2Gi"},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    })
}

/// Limits for `n` GPUs with `mem` MiB and `cores` percent each.
pub fn gpu_limits(n: u32, mem: u64, cores: u32) -> Vec<(&'static str, String)> {
    vec![
        ("nvidia.com/gpu", n.to_string()),
        ("nvidia.com/gpumem", mem.to_string()),
        ("nvidia.com/gpucores", cores.to_string()),
    ]
}

/// A container asking for `n` GPUs with `mem` MiB and `cores` percent each.
pub fn gpu_container(name: &str, n: u32, mem: u64, cores: u32) -> Value {
    let l = gpu_limits(n, mem, cores);
    let refs: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
    container(name, &refs)
}

impl PodBuilder {
    pub fn uid(mut self, uid: &str) -> Self {
        self.uid = uid.into();
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.annotations.insert(k.into(), v.into());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }
    pub fn container(mut self, c: Value) -> Self {
        self.containers.push(c);
        self
    }
    pub fn init_container(mut self, c: Value) -> Self {
        self.init.push(c);
        self
    }
    /// One container asking for `n` GPUs with `mem` MiB and `cores` percent each.
    pub fn gpus(self, n: u32, mem: u64, cores: u32) -> Self {
        let name = format!("c{}", self.containers.len());
        self.container(gpu_container(&name, n, mem, cores))
    }
    pub fn node_name(mut self, n: &str) -> Self {
        self.node_name = Some(n.into());
        self
    }
    pub fn phase(mut self, p: &str) -> Self {
        self.phase = p.into();
        self
    }
    /// A pod already running on `node` holding `devices` (HAMi annotation format).
    pub fn holding(self, node: &str, devices: &str) -> Self {
        self.annotation("hami.io/vgpu-node", node)
            .annotation("hami.io/vgpu-time", "1763800000")
            .annotation("hami.io/vgpu-devices-allocated", devices)
            .annotation("hami.io/vgpu-devices-to-allocate", ";")
            .annotation("hami.io/bind-phase", "success")
            .node_name(node)
            .phase("Running")
    }

    pub fn build(&self) -> Value {
        let mut spec = json!({
            "containers": self.containers,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "vgpu-scheduler",
            "securityContext": {},
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
            ],
        });
        if !self.init.is_empty() {
            spec["initContainers"] = json!(self.init);
        }
        if let Some(n) = &self.node_name {
            spec["nodeName"] = json!(n);
        }
        let mut metadata = json!({
            "name": self.name,
            "namespace": self.ns,
            "uid": self.uid,
            "resourceVersion": "1042",
            "creationTimestamp": "2026-11-22T10:00:00Z",
        });
        if !self.annotations.is_empty() {
            metadata["annotations"] = json!(self.annotations);
        }
        if !self.labels.is_empty() {
            metadata["labels"] = json!(self.labels);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {"phase": self.phase, "qosClass": "Burstable"},
        })
    }
}

pub fn pod_ns(pod: &Value) -> &str {
    pod["metadata"]["namespace"].as_str().expect("namespace")
}
pub fn pod_name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().expect("name")
}
pub fn pod_uid(pod: &Value) -> &str {
    pod["metadata"]["uid"].as_str().expect("uid")
}

// ---------------------------------------------------------------------------
// Extender requests
// ---------------------------------------------------------------------------

/// kube-scheduler's ExtenderArgs in node-cache mode (PascalCase, `Nodes: null`).
pub fn filter_args(pod: &Value, nodes: &[&str]) -> Value {
    json!({"Pod": pod, "Nodes": null, "NodeNames": nodes})
}

/// kube-scheduler's ExtenderBindingArgs (PascalCase).
pub fn bind_args(ns: &str, name: &str, uid: &str, node: &str) -> Value {
    json!({"PodName": name, "PodNamespace": ns, "PodUID": uid, "Node": node})
}

/// The single node a successful single-mode `/filter` answered.
pub fn chosen_node(answer: &Value) -> String {
    let names = answer["NodeNames"]
        .as_array()
        .unwrap_or_else(|| panic!("expected NodeNames in {answer}"));
    assert_eq!(names.len(), 1, "expected exactly one node in {answer}");
    names[0].as_str().expect("node name").to_string()
}

/// Asserts the answer is a rejection: 200 already checked, FailedNodes present, no
/// NodeNames/Nodes and no Error. Returns the FailedNodes map.
pub fn expect_rejected(answer: &Value) -> serde_json::Map<String, Value> {
    assert!(
        answer.get("NodeNames").is_none_or(Value::is_null),
        "no NodeNames expected: {answer}"
    );
    assert!(
        answer.get("Nodes").is_none_or(Value::is_null),
        "no Nodes expected: {answer}"
    );
    assert!(
        answer.get("Error").is_none_or(|e| e == ""),
        "no Error expected: {answer}"
    );
    answer["FailedNodes"]
        .as_object()
        .unwrap_or_else(|| panic!("expected FailedNodes in {answer}"))
        .clone()
}

/// An AdmissionReview v1 of a pod CREATE by the job controller, as the API server
/// sends `/mutate`.
pub fn admission_review_for(p: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0d6c6a39-5f0a-4b8e-9d65-2f3c1b7a8e10",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": pod_ns(p),
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": p,
            "dryRun": false,
        }
    })
}

// ---------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------

/// A PEM certificate and its PEM private key.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Issued {
    /// Key then certificate, as `https_client` takes an identity.
    pub fn identity_pem(&self) -> String {
        format!("{}{}", self.key_pem, self.cert_pem)
    }
}

/// A self-signed certificate authority named `name`.
pub fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA")
}

/// A certificate for `127.0.0.1` and `localhost` with common name `cn`, signed by `ca`.
pub fn issue(
    ca: &CertifiedIssuer<'static, KeyPair>,
    cn: &str,
    usage: ExtendedKeyUsagePurpose,
) -> Issued {
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, ca).expect("sign leaf");
    Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

// ---------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------

/// Standard base64 (RFC 4648) decoding, for AdmissionReview patches.
pub fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("standard base64")
}

/// A small deterministic PRNG (xorshift64*), so load tests are reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// An RFC 3339 UTC timestamp `seconds_ago` before now.
pub fn rfc3339_ago(seconds_ago: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::seconds(seconds_ago))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
