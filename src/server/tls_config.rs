//! Turning the configured PEM material into a rustls [`ServerConfig`].
//!
//! The material is read as raw bytes first ([`TlsInputs`]) and only then parsed, so the
//! reloader can cheaply tell whether anything changed by comparing bytes. Comparing
//! contents (instead of modification times) is what makes rotation of Kubernetes Secret
//! volumes work: those swap a `..data` symlink, which leaves the mtime of the path the
//! server was given untouched.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::error::TlsSetupError;
use super::self_signed::{self, SelfSigned};
use super::settings::TlsSettings;

/// ALPN identifiers offered to clients, most preferred first. Offering `h2` lets the
/// API server and kube-scheduler multiplex calls over one connection.
pub(crate) const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Where the serving key pair comes from.
#[derive(Debug, Clone)]
enum ServingSource {
    /// Operator-provided files, re-read on every reload check.
    Files {
        cert_file: PathBuf,
        key_file: PathBuf,
    },
    /// Generated at start; fixed for the life of the process.
    Generated(SelfSigned),
}

/// Everything needed to (re)build the server's TLS configuration.
#[derive(Debug, Clone)]
pub(crate) struct CertificateSource {
    serving: ServingSource,
    client_ca_file: Option<PathBuf>,
}

/// The raw bytes a configuration is built from. Compared as a whole to detect changes.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct TlsInputs {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    client_ca_pem: Option<Vec<u8>>,
}

impl fmt::Debug for TlsInputs {
    /// Deliberately omits the bytes: they include the private key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsInputs")
            .field("cert_pem_len", &self.cert_pem.len())
            .field("client_ca", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl CertificateSource {
    /// Validates the settings and, in self-signed mode, generates and writes the
    /// certificate. This is the only step that touches the disk for writing.
    pub(crate) fn from_settings(settings: &TlsSettings) -> Result<Self, TlsSetupError> {
        let serving = match (&settings.cert_file, &settings.key_file) {
            (Some(cert_file), Some(key_file)) => ServingSource::Files {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
            },
            (Some(_), None) => {
                return Err(TlsSetupError::IncompleteKeyPair {
                    given: "certificate",
                });
            }
            (None, Some(_)) => return Err(TlsSetupError::IncompleteKeyPair { given: "key" }),
            (None, None) => {
                let dir = settings
                    .self_signed_dir
                    .clone()
                    .unwrap_or_else(self_signed::default_dir);
                let generated = self_signed::generate(&settings.self_signed_names, &dir)?;
                tracing::info!(
                    cert_file = %generated.cert_file.display(),
                    key_file = %generated.key_file.display(),
                    "no TLS certificate configured; serving a generated self-signed certificate"
                );
                ServingSource::Generated(generated)
            }
        };
        Ok(Self {
            serving,
            client_ca_file: settings.client_ca_file.clone(),
        })
    }

    /// Whether any input lives in a file that may change, i.e. whether reloading can
    /// ever observe something new.
    pub(crate) fn has_files(&self) -> bool {
        matches!(self.serving, ServingSource::Files { .. }) || self.client_ca_file.is_some()
    }

    /// Whether clients are asked for a certificate during the handshake.
    pub(crate) fn requests_client_certificates(&self) -> bool {
        self.client_ca_file.is_some()
    }

    /// Path of the generated certificate in self-signed mode.
    pub(crate) fn self_signed_cert_file(&self) -> Option<&Path> {
        match &self.serving {
            ServingSource::Generated(generated) => Some(&generated.cert_file),
            ServingSource::Files { .. } => None,
        }
    }

    /// Reads the current bytes of every input. Blocking, but the files are tiny.
    pub(crate) fn read(&self) -> Result<TlsInputs, TlsSetupError> {
        let (cert_pem, key_pem) = match &self.serving {
            ServingSource::Files {
                cert_file,
                key_file,
            } => (
                read_file("certificate", cert_file)?,
                read_file("private key", key_file)?,
            ),
            ServingSource::Generated(generated) => (
                generated.cert_pem.as_bytes().to_vec(),
                generated.key_pem.as_bytes().to_vec(),
            ),
        };
        let client_ca_pem = self
            .client_ca_file
            .as_deref()
            .map(|path| read_file("client CA", path))
            .transpose()?;
        Ok(TlsInputs {
            cert_pem,
            key_pem,
            client_ca_pem,
        })
    }

    /// Parses `inputs` into a ready-to-serve configuration. Uses the ring provider
    /// explicitly so the result does not depend on a process-wide default having been
    /// installed first.
    pub(crate) fn build(&self, inputs: &TlsInputs) -> Result<ServerConfig, TlsSetupError> {
        let (cert_path, key_path) = match &self.serving {
            ServingSource::Files {
                cert_file,
                key_file,
            } => (cert_file.as_path(), key_file.as_path()),
            ServingSource::Generated(generated) => {
                (generated.cert_file.as_path(), generated.key_file.as_path())
            }
        };
        let chain = parse_certificates("certificate", cert_path, &inputs.cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(&inputs.key_pem).map_err(|source| {
            TlsSetupError::Pem {
                what: "private key",
                path: key_path.to_path_buf(),
                source,
            }
        })?;

        let provider: Arc<CryptoProvider> = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsSetupError::ServerConfig)?;
        let builder = match (&self.client_ca_file, &inputs.client_ca_pem) {
            (Some(ca_path), Some(ca_pem)) => {
                let roots = parse_client_roots(ca_path, ca_pem)?;
                // Request but do not require: the webhook routes must stay reachable
                // for an API server that presents no certificate, while the extender
                // routes enforce one in the HTTP layer.
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
                    .allow_unauthenticated()
                    .build()
                    .map_err(|source| TlsSetupError::ClientVerifier {
                        path: ca_path.clone(),
                        source,
                    })?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(TlsSetupError::ServerConfig)?;
        config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
        Ok(config)
    }
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsSetupError> {
    std::fs::read(path).map_err(|source| TlsSetupError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn parse_certificates(
    what: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsSetupError::Pem {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    if certificates.is_empty() {
        return Err(TlsSetupError::NoCertificate {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(certificates)
}

fn parse_client_roots(path: &Path, pem: &[u8]) -> Result<Arc<RootCertStore>, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    for certificate in parse_certificates("client CA", path, pem)? {
        roots
            .add(certificate)
            .map_err(|source| TlsSetupError::ClientCa {
                path: path.to_path_buf(),
                source,
            })?;
    }
    Ok(Arc::new(roots))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings_with(cert: Option<&str>, key: Option<&str>) -> TlsSettings {
        TlsSettings {
            cert_file: cert.map(PathBuf::from),
            key_file: key.map(PathBuf::from),
            ..TlsSettings::default()
        }
    }

    #[test]
    fn half_a_key_pair_is_rejected() {
        let err = CertificateSource::from_settings(&settings_with(Some("c.pem"), None))
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("only the certificate file")));
        let err = CertificateSource::from_settings(&settings_with(None, Some("k.pem")))
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("only the key file")));
    }

    #[test]
    fn mismatched_key_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let one = rcgen::generate_simple_self_signed(vec!["a.test".to_owned()])?;
        let two = rcgen::generate_simple_self_signed(vec!["b.test".to_owned()])?;
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::write(&cert, one.cert.pem())?;
        std::fs::write(&key, two.signing_key.serialize_pem())?;
        let source = CertificateSource::from_settings(&TlsSettings {
            cert_file: Some(cert),
            key_file: Some(key),
            ..TlsSettings::default()
        })?;
        let inputs = source.read()?;
        assert!(matches!(
            source.build(&inputs),
            Err(TlsSetupError::ServerConfig(_))
        ));
        Ok(())
    }

    #[test]
    fn missing_file_names_the_path() -> Result<(), Box<dyn std::error::Error>> {
        let source = CertificateSource::from_settings(&settings_with(
            Some("/nonexistent/tls.crt"),
            Some("/nonexistent/tls.key"),
        ))?;
        let message = source.read().err().map(|e| e.to_string());
        assert!(message.is_some_and(|m| m.contains("/nonexistent/tls.crt")));
        Ok(())
    }
}
