//! The subject common name of a DER certificate, for logs and for
//! [`super::ClientIdentity`]. The certificate has already been verified by rustls
//! when this runs; anything unexpected simply yields no name.

use x509_parser::asn1_rs::Tag;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Returns the last common name in the certificate's subject (the most specific one,
/// as Go's `crypto/x509` reports it), or `None` if there is none, it is not a
/// string, or the DER does not parse.
pub(crate) fn subject_common_name(certificate_der: &[u8]) -> Option<String> {
    let (_, certificate) = X509Certificate::from_der(certificate_der).ok()?;
    let name = certificate.subject().iter_common_name().last()?;
    if let Ok(text) = name.as_str() {
        return Some(text.to_owned());
    }
    // The string kinds x509-parser leaves to the caller.
    let bytes = name.as_slice();
    match name.attr_value().tag() {
        // Teletex is treated as Latin-1, which is what it carries in practice.
        Tag::T61String => Some(bytes.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString if bytes.len().is_multiple_of(2) => {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn certificate_with(dn: &[(DnType, &str)]) -> Result<Vec<u8>, rcgen::Error> {
        let mut params = CertificateParams::new(vec!["a.test".to_owned()])?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, value) in dn {
            params.distinguished_name.push(kind.clone(), *value);
        }
        let key = KeyPair::generate()?;
        Ok(params.self_signed(&key)?.der().to_vec())
    }

    #[test]
    fn finds_common_name_among_other_attributes() -> Result<(), rcgen::Error> {
        let der = certificate_with(&[
            (DnType::OrganizationName, "system:masters"),
            (DnType::CommonName, "kube-scheduler"),
        ])?;
        assert_eq!(subject_common_name(&der).as_deref(), Some("kube-scheduler"));
        Ok(())
    }

    #[test]
    fn bmp_and_teletex_common_names_are_read() -> Result<(), rcgen::Error> {
        use rcgen::DnValue;
        use rcgen::string::{BmpString, TeletexString};
        for value in [
            DnValue::BmpString(BmpString::try_from("kube-scheduler")?),
            DnValue::TeletexString(TeletexString::try_from("kube-scheduler")?),
        ] {
            let mut params = CertificateParams::new(vec!["a.test".to_owned()])?;
            params.distinguished_name = rcgen::DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, value);
            let der = params.self_signed(&KeyPair::generate()?)?.der().to_vec();
            assert_eq!(subject_common_name(&der).as_deref(), Some("kube-scheduler"));
        }
        Ok(())
    }

    #[test]
    fn no_common_name_yields_none() -> Result<(), rcgen::Error> {
        let der = certificate_with(&[(DnType::OrganizationName, "acme")])?;
        assert_eq!(subject_common_name(&der), None);
        Ok(())
    }

    #[test]
    fn garbage_yields_none() {
        assert_eq!(subject_common_name(&[]), None);
        assert_eq!(subject_common_name(&[0x30, 0x84, 0xff]), None);
        assert_eq!(subject_common_name(&[0x30, 0x03, 0x02, 0x01]), None);
    }
}
