//! Starting the release `vgpu-scheduler serve` on a free loopback port and talking
//! HTTPS to it with keep-alive.

use super::go_http2_clients::GoHttp2Clients;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// HTTP version the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpVersion {
    /// HTTP/1.1 with a pool of keep-alive connections (one per in-flight request).
    Http1,
    /// HTTP/2 negotiated by ALPN (as client-go does), requests multiplexed.
    Http2,
}

/// A running server; killed (and reaped) on drop.
pub struct ServerProcess {
    child: Child,
    /// Its process id (for /proc/<pid>/status).
    pub pid: u32,
    /// `https://127.0.0.1:<port>`.
    pub base: String,
    /// Keep-alive client trusting the server's self-signed certificate.
    pub client: reqwest::Client,
    /// That certificate (PEM), for more clients.
    root_pem: String,
    /// From spawning the process to the first 200 of /readyz.
    pub startup: Duration,
    log_path: PathBuf,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the server reads the cluster from.
#[derive(Debug, Clone, Copy)]
pub enum ServerSource<'a> {
    /// A cluster file (the server simulates the API server).
    ClusterFile(&'a Path),
    /// An API server, through this kubeconfig (live mode).
    Kubeconfig(&'a Path),
}

/// How to start the server.
pub struct Launch<'a> {
    /// Directory for the certificate and the log.
    pub dir: &'a Path,
    /// The cluster it schedules.
    pub source: ServerSource<'a>,
    /// Another build of the server to run (default: this one's).
    pub binary: Option<&'a Path>,
    /// Extra `serve` flags.
    pub extra_args: &'a [String],
    /// `RUST_LOG` of the server.
    pub log_level: &'a str,
    /// Client protocol.
    pub http: HttpVersion,
    /// Idle connections kept per host.
    pub pool: usize,
    /// Give up waiting for /readyz after this long.
    pub ready_timeout: Duration,
    /// Run the server on this CPU only (Linux).
    pub cpu: Option<usize>,
}

/// A CPU set holding only `cpu`.
#[cfg(target_os = "linux")]
fn cpu_set(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of the set (ignored when out of range).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    set
}

/// Restricts the calling thread, and the threads and processes it starts from
/// now on, to `cpu`.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    let set = cpu_set(cpu);
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ))
    }
}

#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cpu: usize) -> Result<(), String> {
    Err("--pin needs Linux".into())
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn client(root_pem: &str, http: HttpVersion, pool: usize) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = reqwest::Certificate::from_pem(root_pem.as_bytes()).map_err(|e| e.to_string())?;
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(root)
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(pool)
        .pool_idle_timeout(Duration::from_secs(120))
        .timeout(Duration::from_secs(60));
    if http == HttpVersion::Http1 {
        builder = builder.http1_only();
    }
    builder.build().map_err(|e| e.to_string())
}

impl ServerProcess {
    /// Starts the server; retries on another port if the chosen one was taken.
    pub async fn start(launch: &Launch<'_>) -> Result<ServerProcess, String> {
        let mut last = String::new();
        for attempt in 0..3 {
            match Self::try_start(launch, attempt).await {
                Ok(server) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn try_start(launch: &Launch<'_>, attempt: usize) -> Result<ServerProcess, String> {
        let port = free_port().map_err(|e| format!("free port: {e}"))?;
        let cert_dir = launch.dir.join(format!("tls-{attempt}"));
        let log_path = launch.dir.join(format!("server-{attempt}.log"));
        let log = File::create(&log_path).map_err(|e| e.to_string())?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let spawned = Instant::now();
        let mut command = Command::new(
            launch
                .binary
                .unwrap_or(Path::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))),
        );
        #[cfg(target_os = "linux")]
        if let Some(cpu) = launch.cpu {
            use std::os::unix::process::CommandExt;
            let set = cpu_set(cpu);
            // SAFETY: runs in the forked child before exec and only makes one
            // system call on a value prepared before the fork.
            unsafe {
                command.pre_exec(move || {
                    let size = std::mem::size_of::<libc::cpu_set_t>();
                    if libc::sched_setaffinity(0, size, &set) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        command.arg("serve");
        match launch.source {
            ServerSource::ClusterFile(path) => command.arg("--cluster-file").arg(path),
            ServerSource::Kubeconfig(path) => command
                .arg("--kubeconfig")
                .arg(path)
                .env_remove("KUBECONFIG")
                .env_remove("POD_NAME")
                .env_remove("POD_NAMESPACE"),
        };
        let child = command
            .arg("--http-bind")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--self-signed-dir")
            .arg(&cert_dir)
            .arg("--reservation-ttl")
            .arg("1h")
            .args(launch.extra_args)
            .env("RUST_LOG", launch.log_level)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("spawn vgpu-scheduler: {e}"))?;
        let mut server = ServerProcess {
            pid: child.id(),
            child,
            base: format!("https://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            root_pem: String::new(),
            startup: Duration::ZERO,
            log_path,
        };
        let mut have_client = false;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "server exited with {status} before becoming ready:\n{}",
                    server.log_tail()
                ));
            }
            if spawned.elapsed() > launch.ready_timeout {
                return Err(format!(
                    "server not ready after {:?}:\n{}",
                    launch.ready_timeout,
                    server.log_tail()
                ));
            }
            if !have_client
                && let Ok(pem) = std::fs::read_to_string(cert_dir.join("cert.pem"))
                && pem.contains("END CERTIFICATE")
            {
                server.client = client(&pem, launch.http, launch.pool)?;
                server.root_pem = pem;
                have_client = true;
            }
            if have_client
                && let Ok(resp) = server.client.get(server.url("/readyz")).send().await
                && resp.status().as_u16() == 200
            {
                server.startup = spawned.elapsed();
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Clients as kube-scheduler's Go HTTP/2 transport connects to the server,
    /// which allows `streams` requests at once on a connection.
    pub fn go_http2_clients(&self, streams: usize) -> GoHttp2Clients {
        let pem = self.root_pem.clone();
        GoHttp2Clients::new(
            Box::new(move || client(&pem, HttpVersion::Http2, 1)),
            streams,
        )
    }

    /// Full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Size of the server's log, bytes.
    pub fn log_bytes(&self) -> u64 {
        std::fs::metadata(&self.log_path).map_or(0, |m| m.len())
    }

    /// CPU time (user + system) the server has used so far.
    pub fn cpu_time(&self) -> Option<Duration> {
        process_cpu_time(&format!("/proc/{}/stat", self.pid))
    }

    /// `VmRSS` and `VmHWM` (peak) of the server, MiB.
    pub fn rss_mib(&self) -> (Option<f64>, Option<f64>) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kb| kb.parse::<f64>().ok())
                .map(|kb| kb / 1024.0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

/// CPU time (user + system) this process has used so far.
pub fn own_cpu_time() -> Option<Duration> {
    process_cpu_time("/proc/self/stat")
}

/// `utime + stime` of a `/proc/<pid>/stat` file (fields 14 and 15, in clock ticks).
fn process_cpu_time(stat_path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    // The command name (field 2) may hold spaces; the fields after it do not.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / ticks as f64,
    ))
}
