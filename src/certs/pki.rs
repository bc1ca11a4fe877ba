//! Making and reading the certificates `certs` manages: a CA, serving and client
//! certificates it signs, and the facts about existing ones that decide whether
//! they are still good (expiry, names, issuer, key).

use anyhow::{Context, anyhow, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use time::OffsetDateTime;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// A certificate and its private key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// What a leaf certificate is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// TLS server certificate for these DNS names / IPs.
    Serving(Vec<String>),
    /// TLS client certificate with this common name.
    Client(String),
}

/// Facts read from one certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// The certificate as one PEM block (with a final newline).
    pub pem: String,
    pub der: Vec<u8>,
    /// Seconds since the Unix epoch.
    pub not_after: i64,
    pub is_ca: bool,
    /// DNS and IP subject alternative names, as text.
    pub names: Vec<String>,
    pub common_name: String,
    /// SubjectPublicKeyInfo (DER).
    pub public_key: Vec<u8>,
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Whether a certificate ending at `not_after` expires within `window` from now.
pub fn expires_within(not_after: i64, window: Duration) -> bool {
    not_after - now_secs() <= window.as_secs() as i64
}

fn offset(secs: i64) -> anyhow::Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(secs).context("certificate time out of range")
}

/// A new self-signed CA valid for `validity`.
pub fn new_ca(common_name: &str, validity: Duration) -> anyhow::Result<Pair> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = now_secs();
    // A little slack for clocks that are behind.
    params.not_before = offset(now - 300)?;
    params.not_after = offset(now + validity.as_secs() as i64)?;
    let key = KeyPair::generate().context("generate CA key")?;
    let cert = params.self_signed(&key).context("sign CA certificate")?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A leaf certificate signed by `ca`, valid for `validity` but never past the CA.
pub fn issue(ca: &Pair, leaf: &Leaf, validity: Duration) -> anyhow::Result<Pair> {
    let ca_info = parse_one(&ca.cert_pem).context("CA certificate")?;
    let ca_key = KeyPair::from_pem(&ca.key_pem).context("CA key")?;
    let ca_der = CertificateDer::from(ca_info.der.clone());
    let issuer = Issuer::from_ca_cert_der(&ca_der, ca_key).context("use CA")?;
    let (mut params, common_name, usage) = match leaf {
        Leaf::Serving(names) => (
            CertificateParams::new(names.clone()).context("serving certificate names")?,
            names.first().cloned().unwrap_or_default(),
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        Leaf::Client(cn) => (
            CertificateParams::default(),
            cn.clone(),
            ExtendedKeyUsagePurpose::ClientAuth,
        ),
    };
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    let now = now_secs();
    params.not_before = offset(now - 300)?;
    params.not_after = offset((now + validity.as_secs() as i64).min(ca_info.not_after))?;
    let key = KeyPair::generate().context("generate key")?;
    let cert = params
        .signed_by(&key, &issuer)
        .context("sign certificate")?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Facts about one certificate (`pem` is its PEM block).
pub fn info(pem: String, der: &[u8]) -> anyhow::Result<CertInfo> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| anyhow!("not an X.509 certificate: {e}"))?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(n) => names.push((*n).to_string()),
                GeneralName::IPAddress(ip) => match ip.len() {
                    4 => names.push(
                        std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*ip).expect("4 bytes"))
                            .to_string(),
                    ),
                    16 => names.push(
                        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*ip).expect("16 bytes"))
                            .to_string(),
                    ),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or("")
        .to_string();
    Ok(CertInfo {
        pem,
        der: der.to_vec(),
        not_after: cert.validity().not_after.timestamp(),
        is_ca: cert.is_ca(),
        names,
        common_name,
        public_key: cert.public_key().raw.to_vec(),
    })
}

const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const END: &str = "-----END CERTIFICATE-----";

/// Every certificate of a PEM bundle, in order.
pub fn parse_bundle(pem: &str) -> anyhow::Result<Vec<CertInfo>> {
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            bail!("unterminated PEM certificate");
        };
        let block = format!("{}\n", &rest[start..start + len + END.len()]);
        rest = &rest[start + len + END.len()..];
        let der = CertificateDer::from_pem_slice(block.as_bytes())
            .map_err(|e| anyhow!("bad PEM certificate: {e:?}"))?;
        out.push(info(block, der.as_ref())?);
    }
    if out.is_empty() {
        bail!("no PEM certificate");
    }
    Ok(out)
}

/// The first certificate of a PEM text.
pub fn parse_one(pem: &str) -> anyhow::Result<CertInfo> {
    Ok(parse_bundle(pem)?.remove(0))
}

/// Whether `cert` carries a valid signature of `ca`.
pub fn signed_by(cert: &CertInfo, ca: &CertInfo) -> bool {
    let (Ok((_, cert)), Ok((_, ca))) = (
        X509Certificate::from_der(&cert.der),
        X509Certificate::from_der(&ca.der),
    ) else {
        return false;
    };
    cert.issuer() == ca.subject() && cert.verify_signature(Some(ca.public_key())).is_ok()
}

/// Whether `key_pem` is the private key of `cert`.
pub fn key_matches(cert: &CertInfo, key_pem: &str) -> bool {
    use rcgen::PublicKeyData;
    KeyPair::from_pem(key_pem).is_ok_and(|k| k.subject_public_key_info() == cert.public_key)
}
