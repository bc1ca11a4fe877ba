//! HAMi's scheduler flags on the real binary: the metrics listener of
//! `--metrics-bind-address` (plain HTTP, stops with the server), `--legacy-metrics`,
//! the quota gauges named after the configured resources, the flags accepted for
//! HAMi's Deployment arguments, and `--kube-timeout` bounding API calls.

mod support;

use serde_json::{Value, json};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Server, cluster_text, gpu_uuid, h100, node, pod, quota};

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

fn cluster() -> Vec<Value> {
    vec![
        node("n1", &[h100(&gpu_uuid("n1", 0), 0)], &[]),
        quota(
            "team-a",
            "gpu-quota",
            &[
                ("limits.example.com/vram", "40000"),
                ("limits.example.com/vcores", "150"),
            ],
        ),
    ]
}

/// A device config that renames the memory and cores resources.
fn device_config(dir: &std::path::Path) -> String {
    let path = dir.join("device-config.yaml");
    std::fs::write(
        &path,
        "nvidia:\n  resourceMemoryName: example.com/vram\n  resourceCoreName: example.com/vcores\n",
    )
    .expect("write device config");
    path.to_string_lossy().into_owned()
}

/// A vGPU pod asking for the renamed resources.
fn vram_pod(name: &str) -> Value {
    let mut p = pod("team-a", name).build();
    p["spec"]["containers"] = json!([{
        "name": "c",
        "resources": {"limits": {
            "nvidia.com/gpu": "1", "example.com/vram": "1000", "example.com/vcores": "10"}},
    }]);
    p
}

fn value_of(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn get_plain(url: &str) -> Result<(u16, String), reqwest::Error> {
    let response = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

#[tokio::test]
async fn hami_arguments_are_accepted_and_metrics_are_also_served_over_plain_http() {
    let config_dir = tempfile::tempdir().expect("temp dir");
    let config = device_config(config_dir.path());
    let port = free_port();
    // HAMi's spelling of every interface (`:9395` by default there).
    let metrics_address = format!(":{port}");
    let server = Server::start(
        cluster(),
        &[
            "--device-config-file",
            &config,
            "--metrics-bind-address",
            &metrics_address,
            "--legacy-metrics",
            "--kube-timeout=30",
            "--profiling",
            "--debug",
            "-v=4",
            "--leader-elect=false",
            "--force-overwrite-default-scheduler=true",
        ],
    )
    .await;
    let p = vram_pod("train");
    assert_eq!(
        server.filter(&p, &["n1"]).await,
        json!({"NodeNames": ["n1"]})
    );

    let (status, tls_text) = server.get("/metrics").await;
    assert_eq!(status, 200);
    let (status, plain_text) = get_plain(&format!("http://127.0.0.1:{port}/metrics"))
        .await
        .expect("plain-HTTP metrics listener answers");
    assert_eq!(status, 200);
    // The same registry on both listeners (series within a metric come in no
    // particular order).
    let hami = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("hami_") || l.starts_with("QuotaUsed"))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(hami(&plain_text), hami(&tls_text));

    let uuid = gpu_uuid("n1", 0);
    // Quota gauges carry the configured resource names.
    assert_eq!(
        value_of(
            &plain_text,
            r#"hami_resource_quota_limit{zone="vGPU",namespace="team-a",quota_name="example.com/vram"}"#
        ),
        Some(40000.0),
        "{plain_text}"
    );
    assert_eq!(
        value_of(
            &plain_text,
            r#"hami_resource_quota_used{zone="vGPU",namespace="team-a",quota_name="example.com/vram",limit="40000"}"#
        ),
        Some(1000.0),
        "{plain_text}"
    );
    assert_eq!(
        value_of(
            &plain_text,
            r#"hami_resource_quota_used{zone="vGPU",namespace="team-a",quota_name="example.com/vcores",limit="150"}"#
        ),
        Some(10.0),
        "{plain_text}"
    );
    // --legacy-metrics: the same samples under HAMi's pre-v2.9 names and labels.
    let legacy = [
        (
            format!(r#"hami_gpu_memory_limit_bytes{{zone="vGPU",node="n1",device_uuid="{uuid}",device_index="0","#),
            format!(r#"GPUDeviceMemoryLimit{{zone="vGPU",nodeid="n1",deviceuuid="{uuid}",deviceidx="0","#),
        ),
        (
            format!(r#"hami_gpu_shared_count{{zone="vGPU",node="n1",device_uuid="{uuid}","#),
            format!(r#"GPUDeviceSharedNum{{zone="vGPU",nodeid="n1",deviceuuid="{uuid}","#),
        ),
        (
            format!(r#"hami_gpu_memory_allocated_bytes{{zone="vGPU",node="n1",device_uuid="{uuid}","#),
            format!(r#"GPUDeviceMemoryAllocated{{zone="vGPU",nodeid="n1",deviceuuid="{uuid}","#),
        ),
        (
            format!(r#"hami_node_gpu_memory_allocated_ratio{{zone="vGPU",node="n1",device_uuid="{uuid}","#),
            format!(r#"nodeGPUMemoryPercentage{{zone="vGPU",nodeid="n1",deviceuuid="{uuid}",deviceidx="0"}}"#),
        ),
        (
            format!(r#"hami_vgpu_memory_allocated_bytes{{zone="vGPU",namespace="team-a",node="n1",pod="train",container_index="0",device_uuid="{uuid}"}}"#),
            format!(r#"vGPUMemoryAllocated{{zone="vGPU",podnamespace="team-a",nodename="n1",podname="train",containeridx="0",deviceuuid="{uuid}"}}"#),
        ),
        (
            format!(r#"hami_vgpu_core_allocated_ratio{{zone="vGPU",namespace="team-a",node="n1",pod="train",container_index="0",device_uuid="{uuid}"}}"#),
            format!(r#"vGPUCoreAllocated{{zone="vGPU",podnamespace="team-a",nodename="n1",podname="train",containeridx="0",deviceuuid="{uuid}"}}"#),
        ),
        (
            r#"hami_resource_quota_used{zone="vGPU",namespace="team-a",quota_name="example.com/vram","#.to_string(),
            r#"QuotaUsed{zone="vGPU",quotanamespace="team-a",quotaName="example.com/vram",limit="40000"}"#.to_string(),
        ),
    ];
    for (current, old) in &legacy {
        let value = value_of(&plain_text, current);
        assert!(value.is_some(), "{current} missing: {plain_text}");
        assert_eq!(value_of(&plain_text, old), value, "{old}: {plain_text}");
    }
    assert_eq!(
        value_of(&plain_text, "vGPUMemoryAllocated{"),
        Some(1000.0 * 1_048_576.0)
    );
    let build = plain_text
        .lines()
        .find(|l| l.starts_with("hami_build_info{"))
        .unwrap_or_else(|| panic!("no hami_build_info: {plain_text}"));
    for label in [
        "version=",
        "revision=",
        "build_date=",
        "go_version=",
        "compiler=\"rustc\"",
        "platform=\"",
    ] {
        assert!(build.contains(label), "{label} missing in {build}");
    }

    // The metrics listener serves nothing else.
    for path in ["/filter", "/debug/state", "/healthz"] {
        let (status, _) = get_plain(&format!("http://127.0.0.1:{port}{path}"))
            .await
            .expect("plain-HTTP listener answers");
        assert_eq!(status, 404, "{path}");
    }
    assert!(
        server.log().contains("--profiling has no effect"),
        "{}",
        server.log()
    );
}

#[tokio::test]
async fn without_legacy_metrics_the_old_names_are_absent() {
    let server = Server::start(cluster(), &["--legacy-metrics=false"]).await;
    let (status, text) = server.get("/metrics").await;
    assert_eq!(status, 200);
    assert!(text.contains("hami_gpu_memory_limit_bytes{"), "{text}");
    for old in ["GPUDeviceMemoryLimit", "QuotaUsed", "nodeGPUOverview"] {
        assert!(
            !text.contains(old),
            "{old} without --legacy-metrics: {text}"
        );
    }
}

/// A started server and its log; killed on drop.
struct Spawned {
    child: std::process::Child,
    dir: tempfile::TempDir,
    log: std::path::PathBuf,
    /// The TLS listener's port.
    port: u16,
}

impl Spawned {
    /// Starts a server with `--metrics-bind-address=metrics_address`, logging at info
    /// level through RUST_LOG.
    fn start(metrics_address: &str) -> Spawned {
        let flag = format!("--metrics-bind-address={metrics_address}");
        Spawned::start_with(&[&flag], Some("info"))
    }

    /// Starts a server with `args`; RUST_LOG is `rust_log`, or unset.
    fn start_with(args: &[&str], rust_log: Option<&str>) -> Spawned {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster_file = dir.path().join("cluster.yaml");
        std::fs::write(&cluster_file, cluster_text(&cluster())).expect("write cluster");
        let log = dir.path().join("server.log");
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"));
        command
            .arg("serve")
            .arg("--cluster-file")
            .arg(&cluster_file)
            .arg("--http-bind")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--self-signed-dir")
            .arg(dir.path().join("tls"))
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if let Some(filter) = rust_log {
            command.env("RUST_LOG", filter);
        }
        let child = command.spawn().expect("spawn vgpu-scheduler");
        Spawned {
            child,
            dir,
            log,
            port,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit; its status, `None` after `limit`.
    fn wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_metrics_listener_stops_with_the_server() {
    let port = free_port();
    let mut server = Spawned::start(&format!("127.0.0.1:{port}"));
    let url = format!("http://127.0.0.1:{port}/metrics");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match get_plain(&url).await {
            Ok((200, text)) => {
                assert!(text.contains("hami_gpu_memory_limit_bytes{"), "{text}");
                break;
            }
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            other => panic!("metrics never served: {other:?}\n{}", server.log()),
        }
    }
    let pid = libc::pid_t::try_from(server.child.id()).expect("pid fits");
    // SAFETY: sends SIGTERM to the child this test started; no memory is shared.
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(sent, 0, "send SIGTERM");
    let status = server
        .wait(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("did not stop after SIGTERM:\n{}", server.log()));
    assert!(status.success(), "{status}:\n{}", server.log());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the metrics port must be closed after shutdown"
    );
}

#[test]
fn a_metrics_address_in_use_fails_the_start() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("address").to_string();
    let mut server = Spawned::start(&address);
    let status = server
        .wait(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("kept running:\n{}", server.log()));
    assert!(!status.success());
    assert!(
        server.log().contains("--metrics-bind-address"),
        "{}",
        server.log()
    );
}

/// Makes the server log at debug and then at info level: a TLS connection (its
/// establishment is logged at debug level) carrying a `/filter` that fits (logged
/// at info level, "reserved GPUs"). Returns once that info line is in the log;
/// lines are written out in the order they were logged, so whatever the
/// connection logged at debug level is in the log by then too.
async fn log_a_placement(server: &Spawned) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let cert = server.dir.path().join("tls").join("cert.pem");
    let url = format!("https://127.0.0.1:{}/filter", server.port);
    let probe = pod("default", "probe").gpus(1, 1000, 10).build();
    loop {
        // The certificate is written before the server listens.
        if let Ok(root) = std::fs::read_to_string(&cert)
            && root.contains("END CERTIFICATE")
            && let Ok(response) = support::https_client(&root, None)
                .post(&url)
                .json(&support::filter_args(&probe, &["n1"]))
                .send()
                .await
        {
            assert_eq!(response.status().as_u16(), 200, "{}", server.log());
            break;
        }
        assert!(Instant::now() < deadline, "never served:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    while !server.log().contains("reserved GPUs") {
        assert!(
            Instant::now() < deadline,
            "the placement was not logged:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// `--debug` (HAMi's extender argument, with `-v=4`) logs this server's debug lines
/// when RUST_LOG is not set; RUST_LOG still wins.
#[tokio::test]
async fn debug_logs_debug_lines_unless_rust_log_says_otherwise() {
    let debug_line = " DEBUG vgpu_scheduler::";
    let debug = Spawned::start_with(&["--debug", "-v=4"], None);
    log_a_placement(&debug).await;
    assert!(debug.log().contains(debug_line), "{}", debug.log());

    for (args, rust_log) in [(&[][..], None), (&["--debug"][..], Some("info"))] {
        let quiet = Spawned::start_with(args, rust_log);
        log_a_placement(&quiet).await;
        assert!(
            !quiet.log().contains(" DEBUG "),
            "{args:?} RUST_LOG={rust_log:?}: {}",
            quiet.log()
        );
    }
}

/// An API server that accepts connections and never answers.
fn silent_api_server() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    (listener, url)
}

fn kubeconfig(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n\
         contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n\
         users:\n- name: u\n  user:\n    token: t\n"
    );
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

async fn client_for(
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> Result<kube::Client, anyhow::Error> {
    use clap::Parser;
    let mut all = vec!["vgpu-scheduler", "serve"];
    all.extend_from_slice(args);
    let vgpu_scheduler::config::Command::Serve(serve) =
        vgpu_scheduler::config::Cli::try_parse_from(all)?.command
    else {
        anyhow::bail!("not serve");
    };
    let mut config = vgpu_scheduler::run::kube_config(Some(kubeconfig), "no config").await?;
    vgpu_scheduler::run::set_kube_timeout(&mut config, serve.kube_timeout());
    Ok(kube::Client::try_from(config)?)
}

// Paused time: the clock jumps to the next timer whenever every task waits (here,
// on a socket that never answers), so the client's own timeouts, if any, fire
// before ours and the three seconds below cost nothing.
#[tokio::test(start_paused = true)]
async fn kube_timeout_bounds_calls_to_an_api_server_that_does_not_answer() {
    vgpu_scheduler::server::install_crypto_provider();
    let dir = tempfile::tempdir().expect("temp dir");
    let (_listener, url) = silent_api_server();
    let kubeconfig = kubeconfig(dir.path(), &url);

    let bounded = client_for(&kubeconfig, &["--kube-timeout=1"])
        .await
        .expect("client");
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(10), bounded.apiserver_version()).await;
    assert!(
        matches!(answer, Ok(Err(_))),
        "the call fails by itself: {answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Without the flag (HAMi's default 0) nothing bounds the call: no timer of the
    // client's fires before ours.
    let unbounded = client_for(&kubeconfig, &[]).await.expect("client");
    let answer = tokio::time::timeout(Duration::from_secs(3), unbounded.apiserver_version()).await;
    assert!(answer.is_err(), "still waiting: {answer:?}");
}
