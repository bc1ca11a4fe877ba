//! End-to-end tests of the TLS server: real sockets on 127.0.0.1, a real TLS client,
//! certificates made on the fly with rcgen; a test router, and the scheduler's own
//! routes to see which of them need a client certificate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::routing::get;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use vgpu_scheduler::app::{AppState, RouterOptions, router};
use vgpu_scheduler::cluster::api::ClusterApi;
use vgpu_scheduler::cluster::memory::MemoryCluster;
use vgpu_scheduler::device::device_config::NvidiaConfig;
use vgpu_scheduler::metrics::Metrics;
use vgpu_scheduler::scheduler::{Scheduler, SchedulerConfig};
use vgpu_scheduler::server::{
    ClientIdentity, ServerLimits, TlsServer, TlsSettings, client_certificate_layer,
    install_crypto_provider,
};
use vgpu_scheduler::webhook::WebhookConfig;

/// A test certificate authority that can issue server and client certificates.
struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A PEM certificate and its PEM private key.
struct Issued {
    cert_pem: String,
    key_pem: String,
}

impl TestCa {
    fn new(name: &str) -> Result<Self> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        Ok(Self { issuer })
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn issue(&self, common_name: &str, usage: ExtendedKeyUsagePurpose) -> Result<Issued> {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    fn server_cert(&self) -> Result<Issued> {
        self.issue("vgpu-scheduler", ExtendedKeyUsagePurpose::ServerAuth)
    }

    fn client_cert(&self, common_name: &str) -> Result<Issued> {
        self.issue(common_name, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// `/slow` requests whose handler has begun, so a test knows one is in flight.
static SLOW_STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `/open` is public, `/guarded` needs a client certificate and echoes its subject,
/// `/slow` keeps a request in flight long enough to test shutdown.
fn app() -> Router {
    let guarded = Router::new()
        .route(
            "/guarded",
            get(|identity: ClientIdentity| async move {
                match identity {
                    ClientIdentity::Verified { subject } => subject,
                    ClientIdentity::None => "anonymous".to_owned(),
                }
            }),
        )
        .route_layer(client_certificate_layer(true));
    Router::new()
        .route("/open", get(|| async { "open" }))
        .route(
            "/slow",
            get(|| async {
                SLOW_STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(400)).await;
                "slow"
            }),
        )
        .merge(guarded)
}

/// Everything logged in this test process at info level and above. The
/// certificate reloader logs from a task of whichever test started its server, so
/// the capture is the process's subscriber, installed by the first caller.
fn captured_log() -> &'static std::sync::Mutex<Vec<u8>> {
    static LOG: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
    static INSTALL: std::sync::Once = std::sync::Once::new();

    struct Capture;
    impl std::io::Write for Capture {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            LOG.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    INSTALL.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(|| Capture)
            .try_init();
    });
    &LOG
}

/// Waits until a captured log line contains `text`.
async fn wait_for_log(text: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let logged =
            String::from_utf8_lossy(&captured_log().lock().unwrap_or_else(|e| e.into_inner()))
                .lines()
                .any(|l| l.contains(text));
        if logged {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("nothing logged {text:?} within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A server running in the background, stopped through `shutdown`.
struct Running {
    address: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<()>>,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.address.port())
    }

    /// Fires the shutdown signal and waits for `serve` to return.
    async fn stop(mut self) -> Result<()> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .context("serve did not return after shutdown")??
    }
}

async fn start(server: TlsServer, limits: ServerLimits) -> Result<Running> {
    start_app(server, app(), limits).await
}

async fn start_app(server: TlsServer, app: Router, limits: ServerLimits) -> Result<Running> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let (shutdown, shutdown_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(listener, app, limits, async move {
        let _ = shutdown_rx.await;
    }));
    Ok(Running {
        address,
        shutdown: Some(shutdown),
        task,
    })
}

/// A client that trusts exactly `root_pem` and optionally presents `identity`.
fn client(root_pem: &str, identity: Option<&Issued>) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(root_pem.as_bytes())?)
        .timeout(Duration::from_secs(5));
    if let Some(issued) = identity {
        let pem = format!("{}{}", issued.key_pem, issued.cert_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes())?);
    }
    Ok(builder.build()?)
}

async fn get_text(client: &reqwest::Client, url: &str) -> Result<(u16, String)> {
    let response = client.get(url).send().await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

fn fast_limits() -> ServerLimits {
    ServerLimits {
        handshake_timeout: Duration::from_millis(300),
        header_read_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..ServerLimits::default()
    }
}

#[tokio::test]
async fn self_signed_mode_serves_https_over_h2_and_http1() -> Result<()> {
    install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let server = self_signed_server(dir.path())?;
    let cert_file = server
        .self_signed_certificate_file()
        .context("self-signed mode must report its certificate file")?
        .to_path_buf();
    assert_eq!(cert_file, dir.path().join("cert.pem"));
    assert!(dir.path().join("key.pem").is_file());
    assert!(!server.requests_client_certificates());
    let running = start(server, fast_limits()).await?;

    let root = std::fs::read_to_string(&cert_file)?;
    let h2 = client(&root, None)?;
    let response = h2.get(running.url("/open")).send().await?;
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.text().await?, "open");

    let http1 = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(root.as_bytes())?)
        .http1_only()
        .build()?;
    let response = http1.get(running.url("/open")).send().await?;
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    assert_eq!(response.text().await?, "open");

    // Without a client CA nobody can present a certificate, so an enforcing guard
    // rejects everyone.
    let (status, body) = get_text(&h2, &running.url("/guarded")).await?;
    assert_eq!(
        (status, body.as_str()),
        (401, "client certificate required")
    );

    running.stop().await
}

/// A server with a self-signed certificate written into `dir` (as `cert.pem`).
fn self_signed_server(dir: &std::path::Path) -> Result<TlsServer> {
    Ok(TlsServer::new(&TlsSettings {
        self_signed_dir: Some(dir.to_path_buf()),
        ..TlsSettings::default()
    })?)
}

/// A server with a certificate from `server_ca` that asks for client certificates
/// from `client_ca` (files written into `dir`).
fn server_with_client_ca(
    dir: &std::path::Path,
    server_ca: &TestCa,
    client_ca: &TestCa,
) -> Result<TlsServer> {
    let serving = server_ca.server_cert()?;
    let cert_file = dir.join("tls.crt");
    let key_file = dir.join("tls.key");
    let client_ca_file = dir.join("client-ca.crt");
    std::fs::write(&cert_file, &serving.cert_pem)?;
    std::fs::write(&key_file, &serving.key_pem)?;
    std::fs::write(&client_ca_file, client_ca.pem())?;
    Ok(TlsServer::new(&TlsSettings {
        cert_file: Some(cert_file),
        key_file: Some(key_file),
        client_ca_file: Some(client_ca_file),
        ..TlsSettings::default()
    })?)
}

#[tokio::test]
async fn client_certificates_are_requested_but_enforced_per_route() -> Result<()> {
    install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let server_ca = TestCa::new("server CA")?;
    let client_ca = TestCa::new("client CA")?;
    let other_ca = TestCa::new("someone else's CA")?;
    let server = server_with_client_ca(dir.path(), &server_ca, &client_ca)?;
    assert!(server.requests_client_certificates());
    assert!(server.self_signed_certificate_file().is_none());
    let running = start(server, fast_limits()).await?;

    let anonymous = client(&server_ca.pem(), None)?;
    assert_eq!(
        get_text(&anonymous, &running.url("/open")).await?,
        (200, "open".to_owned())
    );
    assert_eq!(
        get_text(&anonymous, &running.url("/guarded")).await?,
        (401, "client certificate required".to_owned())
    );

    let scheduler = client(
        &server_ca.pem(),
        Some(&client_ca.client_cert("system:kube-scheduler")?),
    )?;
    assert_eq!(
        get_text(&scheduler, &running.url("/guarded")).await?,
        (200, "system:kube-scheduler".to_owned())
    );
    assert_eq!(
        get_text(&scheduler, &running.url("/open")).await?,
        (200, "open".to_owned())
    );

    let stranger = client(&server_ca.pem(), Some(&other_ca.client_cert("intruder")?))?;
    match get_text(&stranger, &running.url("/guarded")).await {
        Err(_) => {} // the handshake rejected the unknown issuer
        Ok((status, _)) => assert_eq!(status, 401, "foreign client cert must not pass"),
    }

    running.stop().await
}

/// The scheduler's own routes behind a client CA: the extender verbs and the debug
/// dumps need a certificate from it; the webhook, probes and metrics stay open.
fn scheduler_app(require_client_certificate: bool) -> Router {
    let memory = Arc::new(MemoryCluster::new(Vec::new(), Vec::new(), true));
    let api: Arc<dyn ClusterApi> = memory.clone();
    let scheduler = Arc::new(Scheduler::new(
        SchedulerConfig::default(),
        api,
        Arc::new(Metrics::new()),
    ));
    let state = Arc::new(AppState {
        scheduler,
        webhook: WebhookConfig {
            scheduler_name: "vgpu-scheduler".into(),
            force_overwrite_default_scheduler: true,
            nvidia: NvidiaConfig::default(),
            gang_gates: true,
            allow_privileged_vgpu: false,
            annotation_writers: Default::default(),
        },
        memory_cluster: Some(memory),
        ready: AtomicBool::new(true),
    });
    router(
        state,
        RouterOptions {
            require_client_certificate,
            max_request_body: 1 << 20,
            max_admission_body: 1 << 20,
            max_bodies_in_flight: 4 << 20,
            max_admission_bodies_in_flight: 4 << 20,
        },
    )
}

async fn post_text(client: &reqwest::Client, url: &str, body: &str) -> Result<(u16, String)> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

/// Runs `vgpu-scheduler queues` without blocking the runtime the server under test
/// runs on.
async fn queues_cli(args: &[&str]) -> Result<(bool, String)> {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .arg("queues")
        .args(args)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .context("vgpu-scheduler queues did not finish")??;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), text))
}

#[tokio::test]
async fn debug_dumps_need_a_client_certificate_like_the_extender_verbs() -> Result<()> {
    install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let server_ca = TestCa::new("server CA")?;
    let client_ca = TestCa::new("client CA")?;
    let server_ca_file = dir.path().join("server-ca.crt");
    std::fs::write(&server_ca_file, server_ca.pem())?;
    let server = server_with_client_ca(dir.path(), &server_ca, &client_ca)?;
    let guarded = server.requests_client_certificates();
    assert!(guarded);
    let running = start_app(server, scheduler_app(guarded), fast_limits()).await?;

    let anonymous = client(&server_ca.pem(), None)?;
    for path in ["/debug/state", "/debug/queues"] {
        assert_eq!(
            get_text(&anonymous, &running.url(path)).await?,
            (401, "client certificate required".to_owned()),
            "{path}"
        );
    }
    assert_eq!(
        post_text(&anonymous, &running.url("/filter"), "{}")
            .await?
            .0,
        401
    );
    assert_eq!(
        post_text(&anonymous, &running.url("/bind"), "{}").await?.0,
        401
    );
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(
            get_text(&anonymous, &running.url(path)).await?.0,
            200,
            "{path} stays open"
        );
    }
    let review = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"default","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{"containers":[{"name":"c"}]}}}}"#;
    for path in ["/mutate", "/webhook"] {
        let (status, body) = post_text(&anonymous, &running.url(path), review).await?;
        assert_eq!(status, 200, "{path} stays open: {body}");
        assert!(body.contains(r#""allowed":true"#), "{body}");
    }

    let identity = client_ca.client_cert("operator")?;
    let trusted = client(&server_ca.pem(), Some(&identity))?;
    let (status, state) = get_text(&trusted, &running.url("/debug/state")).await?;
    assert_eq!(status, 200, "{state}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&state).is_ok(),
        "{state}"
    );
    let (status, queues) = get_text(&trusted, &running.url("/debug/queues")).await?;
    assert_eq!(status, 200, "{queues}");

    // `vgpu-scheduler queues` reads /debug/queues: refused without a certificate,
    // served with one.
    let base = running.url("");
    let ca = server_ca_file.to_string_lossy().into_owned();
    let (ok, out) = queues_cli(&["--server", &base, "--ca-file", &ca, "--json"]).await?;
    assert!(!ok && out.contains("401"), "{out}");
    let client_cert = dir.path().join("client.crt");
    let client_key = dir.path().join("client.key");
    std::fs::write(&client_cert, &identity.cert_pem)?;
    std::fs::write(&client_key, &identity.key_pem)?;
    let (ok, out) = queues_cli(&[
        "--server",
        &base,
        "--ca-file",
        &ca,
        "--client-certificate",
        &client_cert.to_string_lossy(),
        "--client-key",
        &client_key.to_string_lossy(),
        "--json",
    ])
    .await?;
    assert!(ok, "{out}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&out).is_ok(),
        "{out}"
    );

    running.stop().await
}

#[tokio::test]
async fn without_a_client_ca_the_debug_dumps_are_open() -> Result<()> {
    install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let server = self_signed_server(dir.path())?;
    let guarded = server.requests_client_certificates();
    assert!(!guarded);
    let root = std::fs::read_to_string(dir.path().join("cert.pem"))?;
    let running = start_app(server, scheduler_app(guarded), fast_limits()).await?;
    let anonymous = client(&root, None)?;
    for path in ["/debug/state", "/debug/queues"] {
        assert_eq!(
            get_text(&anonymous, &running.url(path)).await?.0,
            200,
            "{path}"
        );
    }
    running.stop().await
}

/// Writes a key pair the way the kubelet lays out a Secret volume: the configured
/// paths are symlinks through `..data`, which is itself a symlink to a versioned
/// directory and is swapped atomically on update.
fn write_secret_volume(dir: &Path, version: &str, issued: &Issued) -> Result<()> {
    let versioned = dir.join(format!("..{version}"));
    std::fs::create_dir(&versioned)?;
    std::fs::write(versioned.join("tls.crt"), &issued.cert_pem)?;
    std::fs::write(versioned.join("tls.key"), &issued.key_pem)?;
    let staged = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&versioned, &staged)?;
    std::fs::rename(&staged, dir.join("..data"))?;
    for name in ["tls.crt", "tls.key"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(PathBuf::from("..data").join(name), &link)?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn rotated_certificate_applies_to_new_connections_only() -> Result<()> {
    install_crypto_provider();
    captured_log();
    let dir = tempfile::tempdir()?;
    let ca_a = TestCa::new("CA A")?;
    let ca_b = TestCa::new("CA B")?;
    write_secret_volume(dir.path(), "v1", &ca_a.server_cert()?)?;

    let server = TlsServer::new(&TlsSettings {
        cert_file: Some(dir.path().join("tls.crt")),
        key_file: Some(dir.path().join("tls.key")),
        reload_interval: Duration::from_millis(200),
        ..TlsSettings::default()
    })?;
    let running = start(server, fast_limits()).await?;

    // Opens an HTTP/2 connection that stays in the client's pool.
    let trusts_a = client(&ca_a.pem(), None)?;
    assert_eq!(get_text(&trusts_a, &running.url("/open")).await?.0, 200);

    write_secret_volume(dir.path(), "v2", &ca_b.server_cert()?)?;

    let trusts_b = client(&ca_b.pem(), None)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match get_text(&trusts_b, &running.url("/open")).await {
            Ok((200, _)) => break,
            _ if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => bail!("certificate B was never served: {other:?}"),
        }
    }

    // The connection opened under certificate A is still usable: this client trusts
    // only CA A, so the request can only succeed over that old connection.
    assert_eq!(get_text(&trusts_a, &running.url("/open")).await?.0, 200);
    // A fresh client trusting only CA A now fails, so new connections really get B.
    assert!(
        get_text(&client(&ca_a.pem(), None)?, &running.url("/open"))
            .await
            .is_err()
    );

    // A broken update keeps the current certificate: once the reloader said it
    // rejected the files, new connections still get B.
    std::fs::write(dir.path().join("..v2").join("tls.crt"), "not a certificate")?;
    wait_for_log("changed TLS files are unusable; keeping the current certificate").await?;
    assert_eq!(
        get_text(&client(&ca_b.pem(), None)?, &running.url("/open"))
            .await?
            .0,
        200
    );

    running.stop().await
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish() -> Result<()> {
    install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let server = self_signed_server(dir.path())?;
    let root = std::fs::read_to_string(dir.path().join("cert.pem"))?;
    let running = start(server, fast_limits()).await?;
    let address = running.address;

    let http = client(&root, None)?;
    let before = SLOW_STARTED.load(std::sync::atomic::Ordering::SeqCst);
    let slow = tokio::spawn({
        let url = running.url("/slow");
        async move { get_text(&http, &url).await }
    });
    // Stop only once the request is being handled.
    let deadline = Instant::now() + Duration::from_secs(10);
    while SLOW_STARTED.load(std::sync::atomic::Ordering::SeqCst) == before {
        if Instant::now() >= deadline {
            bail!("/slow was never handled");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let stopped_at = Instant::now();
    running.stop().await?;
    assert!(
        stopped_at.elapsed() >= Duration::from_millis(200),
        "serve returned before the in-flight request finished"
    );
    assert_eq!(slow.await??, (200, "slow".to_owned()));
    assert!(
        TcpStream::connect(address).await.is_err(),
        "the listener must be closed after shutdown"
    );
    Ok(())
}

#[tokio::test]
async fn silent_client_is_dropped_after_handshake_timeout() -> Result<()> {
    install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let server = self_signed_server(dir.path())?;
    let root = std::fs::read_to_string(dir.path().join("cert.pem"))?;
    let running = start(server, fast_limits()).await?;

    let connected_at = Instant::now();
    let mut silent = TcpStream::connect(running.address).await?;

    // Others are served while the silent peer holds its connection open.
    let http = client(&root, None)?;
    assert_eq!(
        get_text(&http, &running.url("/open")).await?,
        (200, "open".to_owned())
    );

    let mut buffer = [0_u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(3), silent.read(&mut buffer))
        .await
        .context("the silent connection was never closed")?;
    assert!(matches!(read, Ok(0) | Err(_)), "expected EOF, got {read:?}");
    assert!(connected_at.elapsed() >= Duration::from_millis(250));

    running.stop().await
}
