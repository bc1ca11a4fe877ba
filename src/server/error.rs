//! Errors raised while preparing the TLS configuration.
//!
//! They are typed (rather than plain `anyhow` strings) so that a reload failure can be
//! logged with the same wording as a start-up failure, and so that callers can tell a
//! configuration mistake apart from an unreadable file.

use std::io;
use std::path::PathBuf;

/// Why a TLS configuration could not be built from the configured files or settings.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// Only one half of the serving key pair was configured.
    #[error(
        "a TLS certificate file and a TLS key file must be configured together, \
         but only the {given} file was given"
    )]
    IncompleteKeyPair {
        /// Which of the two files was given ("certificate" or "key").
        given: &'static str,
    },

    /// A configured file could not be read.
    #[error("cannot read {what} file {path}: {source}")]
    Read {
        /// What the file was meant to hold.
        what: &'static str,
        /// The configured path.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },

    /// A configured file is not valid PEM of the expected kind.
    #[error("cannot parse {what} PEM from {path}: {source}")]
    Pem {
        /// What the file was meant to hold.
        what: &'static str,
        /// The configured path, or a description of the in-memory source.
        path: PathBuf,
        /// The PEM parser's error.
        #[source]
        source: rustls::pki_types::pem::Error,
    },

    /// A certificate file parsed but holds no certificate at all.
    #[error("{what} file {path} contains no PEM certificate")]
    NoCertificate {
        /// What the file was meant to hold.
        what: &'static str,
        /// The configured path.
        path: PathBuf,
    },

    /// A client CA certificate could not be used as a trust anchor.
    #[error("client CA file {path} holds an unusable CA certificate: {source}")]
    ClientCa {
        /// The configured path.
        path: PathBuf,
        /// Why rustls rejected it.
        #[source]
        source: rustls::Error,
    },

    /// The client certificate verifier could not be built from the client CA bundle.
    #[error("cannot build the client certificate verifier from {path}: {source}")]
    ClientVerifier {
        /// The configured client CA path.
        path: PathBuf,
        /// Why rustls rejected the bundle.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },

    /// rustls rejected the serving certificate and key (for example because they do
    /// not belong together).
    #[error("the TLS serving certificate and key are unusable: {0}")]
    ServerConfig(#[source] rustls::Error),

    /// The self-signed serving certificate could not be generated.
    #[error("cannot generate a self-signed serving certificate: {0}")]
    Generate(#[source] rcgen::Error),

    /// The self-signed certificate or key could not be written to disk.
    #[error("cannot write the self-signed {what} to {path}: {source}")]
    Write {
        /// What was being written.
        what: &'static str,
        /// Where it was being written.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
}
