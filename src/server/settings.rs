//! Caller-facing knobs for the TLS server: where the certificates come from and how
//! long a connection may dawdle at each stage.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

/// Where the serving certificate (and the optional client CA) come from.
///
/// With neither `cert_file` nor `key_file` the server generates a self-signed
/// certificate at start, which is enough for a kube-scheduler or API server that is
/// told to trust that certificate (or to skip verification) in development. In a
/// cluster, point `cert_file`/`key_file` at a mounted Secret: the files are polled
/// every `reload_interval` so a rotated certificate is picked up without a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM certificate chain (leaf first). Must be given together with `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1). Must be given together with `cert_file`.
    pub key_file: Option<PathBuf>,
    /// PEM bundle of CAs whose client certificates are accepted. When set, the TLS
    /// layer asks every client for a certificate but does not insist on one; whether a
    /// route needs one is decided per route by [`crate::server::client_certificate_layer`].
    pub client_ca_file: Option<PathBuf>,
    /// Directory for the generated `cert.pem`/`key.pem` in self-signed mode. `None`
    /// means a fresh `vgpu-scheduler-<pid>` directory under the system temp directory.
    pub self_signed_dir: Option<PathBuf>,
    /// Subject alternative names for the self-signed certificate. Entries that parse as
    /// IP addresses become IP SANs, everything else a DNS SAN. Empty means
    /// [`default_self_signed_names`].
    pub self_signed_names: Vec<String>,
    /// How often the certificate, key and client CA files are checked for changes.
    /// `Duration::ZERO` turns reloading off.
    pub reload_interval: Duration,
}

impl Default for TlsSettings {
    fn default() -> Self {
        Self {
            cert_file: None,
            key_file: None,
            client_ca_file: None,
            self_signed_dir: None,
            self_signed_names: default_self_signed_names(),
            reload_interval: Duration::from_secs(5),
        }
    }
}

/// Time limits that keep slow or idle peers from tying up connection tasks forever.
///
/// A zero duration disables the corresponding limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Upper bound on the TLS handshake, counted from the TCP accept. A peer that
    /// connects and says nothing is dropped after this.
    pub handshake_timeout: Duration,
    /// Upper bound on receiving an HTTP/1 request head, also the idle limit between
    /// keep-alive requests on HTTP/1 connections.
    pub header_read_timeout: Duration,
    /// Upper bound on one request from the moment its head is read until the handler
    /// has produced a response (this includes reading the request body). Exceeding it
    /// yields `503 Service Unavailable`.
    pub request_timeout: Duration,
    /// Connections served at once; further ones wait in the listen backlog until
    /// one closes. Each holds buffers (TLS records, HTTP/2 flow-control windows),
    /// so this bounds what idle or slow peers can hold.
    pub max_connections: usize,
    /// Concurrent HTTP/2 streams per connection (hyper's default is 200).
    pub max_streams_per_connection: u32,
    /// Connections from one source address between accept and a finished TLS
    /// handshake; more from it are closed at once, so raw TCP connections from a
    /// few addresses cannot take every slot (see `handshake_gate`).
    pub max_handshakes_per_source: usize,
    /// The handshake deadline of connections accepted while fewer than a quarter
    /// of `max_connections` are free. Zero keeps `handshake_timeout`.
    pub handshake_timeout_under_pressure: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(15),
            request_timeout: Duration::from_secs(60),
            max_connections: 512,
            max_streams_per_connection: 64,
            max_handshakes_per_source: 32,
            handshake_timeout_under_pressure: Duration::from_secs(1),
        }
    }
}

/// The names a self-signed certificate is issued for when the caller names none:
/// `localhost`, `127.0.0.1`, `::1` and, when the kernel reports one, this host's name
/// (so in-cluster clients that dial the pod by hostname can match it too).
pub fn default_self_signed_names() -> Vec<String> {
    let mut names = vec![
        "localhost".to_owned(),
        Ipv4Addr::LOCALHOST.to_string(),
        Ipv6Addr::LOCALHOST.to_string(),
    ];
    if let Some(host) = local_hostname()
        && !names.contains(&host)
    {
        names.push(host);
    }
    names
}

/// The host name as the kernel or the environment reports it, if it is a plausible DNS
/// name. Reading it this way avoids a dependency just for `gethostname(2)`.
fn local_hostname() -> Option<String> {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())?;
    let host = raw.trim().to_ascii_lowercase();
    let plausible = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    plausible.then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_cover_loopback() {
        let names = default_self_signed_names();
        for expected in ["localhost", "127.0.0.1", "::1"] {
            assert!(names.iter().any(|n| n == expected), "{expected} missing");
        }
    }

    #[test]
    fn default_limits_match_documentation() {
        let limits = ServerLimits::default();
        assert_eq!(limits.handshake_timeout, Duration::from_secs(10));
        assert_eq!(limits.header_read_timeout, Duration::from_secs(15));
        assert_eq!(limits.request_timeout, Duration::from_secs(60));
        assert_eq!(limits.max_connections, 512);
        assert_eq!(limits.max_streams_per_connection, 64);
        assert_eq!(limits.max_handshakes_per_source, 32);
        assert_eq!(
            limits.handshake_timeout_under_pressure,
            Duration::from_secs(1)
        );
    }
}
