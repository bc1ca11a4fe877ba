//! Generation of a throw-away serving certificate for when no certificate is mounted.
//!
//! The scheduler extender and the admission webhook are only ever called over TLS, so
//! running without a certificate is not an option; generating one lets the binary start
//! in development and lets an operator copy the written `cert.pem` into a
//! `caBundle` or a scheduler config.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};

use super::error::TlsSetupError;
use super::settings::default_self_signed_names;

/// File name of the generated certificate inside the self-signed directory.
pub(crate) const CERT_FILE_NAME: &str = "cert.pem";
/// File name of the generated private key inside the self-signed directory.
pub(crate) const KEY_FILE_NAME: &str = "key.pem";

/// A generated certificate, kept in memory (it is what the server serves) and also
/// written to disk (so that clients can be told to trust it).
#[derive(Clone)]
pub(crate) struct SelfSigned {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
    pub(crate) cert_file: PathBuf,
    pub(crate) key_file: PathBuf,
}

impl std::fmt::Debug for SelfSigned {
    /// Shows where the files are but never the private key itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfSigned")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

/// The directory used when the caller did not choose one: unique per process so two
/// instances on one host do not overwrite each other's key.
pub(crate) fn default_dir() -> PathBuf {
    std::env::temp_dir().join(format!("vgpu-scheduler-{}", std::process::id()))
}

/// Generates a certificate for `names` (IP literals become IP SANs) and writes
/// `cert.pem` and `key.pem` into `dir`, creating it if needed.
pub(crate) fn generate(names: &[String], dir: &Path) -> Result<SelfSigned, TlsSetupError> {
    let requested = if names.is_empty() {
        default_self_signed_names()
    } else {
        names.to_vec()
    };
    // Duplicate SANs are legal but confuse people reading the certificate.
    let mut names: Vec<String> = Vec::with_capacity(requested.len());
    for name in requested {
        if !names.contains(&name) {
            names.push(name);
        }
    }

    let mut params = CertificateParams::new(names).map_err(TlsSetupError::Generate)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "vgpu-scheduler");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(TlsSetupError::Generate)?;
    let cert = params.self_signed(&key).map_err(TlsSetupError::Generate)?;

    let generated = SelfSigned {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_file: dir.join(CERT_FILE_NAME),
        key_file: dir.join(KEY_FILE_NAME),
    };

    fs::create_dir_all(dir).map_err(|source| TlsSetupError::Write {
        what: "certificate directory",
        path: dir.to_path_buf(),
        source,
    })?;
    write_atomically(&generated.cert_file, generated.cert_pem.as_bytes(), 0o644).map_err(
        |source| TlsSetupError::Write {
            what: "certificate",
            path: generated.cert_file.clone(),
            source,
        },
    )?;
    write_atomically(&generated.key_file, generated.key_pem.as_bytes(), 0o600).map_err(
        |source| TlsSetupError::Write {
            what: "private key",
            path: generated.key_file.clone(),
            source,
        },
    )?;
    Ok(generated)
}

/// Writes through a temporary sibling and a rename so a reader never sees a half
/// written PEM file, and creates the file with `mode` so a key is never world-readable
/// even briefly.
fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    // A stale temporary file could carry wider permissions than `mode`; start afresh.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(&tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    #[test]
    fn writes_cert_and_key_with_ip_sans() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let names = vec!["127.0.0.1".to_owned(), "example.test".to_owned()];
        let generated = generate(&names, dir.path())?;

        let on_disk = fs::read_to_string(&generated.cert_file)?;
        assert_eq!(on_disk, generated.cert_pem);
        let der = CertificateDer::from_pem_slice(on_disk.as_bytes())?;
        // An IPv4 SAN is encoded as context tag [7], length 4, then the address.
        let ip_san = [0x87, 0x04, 127, 0, 0, 1];
        assert!(der.windows(ip_san.len()).any(|w| w == ip_san));

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&generated.key_file)?.permissions().mode();
            assert_eq!(mode & 0o077, 0, "key file must not be readable by others");
        }
        Ok(())
    }
}
