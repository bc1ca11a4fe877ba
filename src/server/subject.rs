//! Extraction of the subject common name from a DER certificate.
//!
//! Only the CN is needed (for logs and for [`super::ClientIdentity`]), so a few lines of
//! DER walking replace a full X.509 parser dependency. The certificate has already been
//! verified by rustls when this runs; anything unexpected simply yields no name.

/// Universal DER tags used on the path from the certificate to its subject CN.
const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_OID: u8 = 0x06;
const TAG_VERSION: u8 = 0xa0;
const TAG_UTF8_STRING: u8 = 0x0c;
const TAG_PRINTABLE_STRING: u8 = 0x13;
const TAG_T61_STRING: u8 = 0x14;
const TAG_IA5_STRING: u8 = 0x16;
const TAG_BMP_STRING: u8 = 0x1e;
/// OID 2.5.4.3 (id-at-commonName), content bytes only.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// Returns the last common name in the certificate's subject (the most specific one,
/// as Go's `crypto/x509` reports it), or `None` if there is none or the DER is odd.
pub(crate) fn subject_common_name(certificate_der: &[u8]) -> Option<String> {
    let (tag, certificate, _) = read_tlv(certificate_der)?;
    expect(tag, TAG_SEQUENCE)?;
    let (tag, mut tbs, _) = read_tlv(certificate)?;
    expect(tag, TAG_SEQUENCE)?;

    let (tag, _, rest) = read_tlv(tbs)?;
    if tag == TAG_VERSION {
        tbs = rest;
    }
    // serialNumber, signature algorithm, issuer, validity: skip them in order.
    for _ in 0..4 {
        let (_, _, rest) = read_tlv(tbs)?;
        tbs = rest;
    }
    let (tag, mut subject, _) = read_tlv(tbs)?;
    expect(tag, TAG_SEQUENCE)?;

    let mut common_name = None;
    while !subject.is_empty() {
        let (tag, mut rdn, rest) = read_tlv(subject)?;
        expect(tag, TAG_SET)?;
        subject = rest;
        while !rdn.is_empty() {
            let (tag, attribute, rest) = read_tlv(rdn)?;
            expect(tag, TAG_SEQUENCE)?;
            rdn = rest;
            let (tag, oid, value) = read_tlv(attribute)?;
            expect(tag, TAG_OID)?;
            if oid == OID_COMMON_NAME {
                let (tag, text, _) = read_tlv(value)?;
                common_name = Some(decode_string(tag, text)?);
            }
        }
    }
    common_name
}

fn expect(actual: u8, wanted: u8) -> Option<()> {
    (actual == wanted).then_some(())
}

/// Splits one tag-length-value off the front of `input`: `(tag, value, rest)`.
/// Handles single-byte tags and definite lengths up to four bytes, which is all DER
/// certificates use.
fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let length = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    if rest.len() < length {
        return None;
    }
    let (value, rest) = rest.split_at(length);
    Some((tag, value, rest))
}

fn decode_string(tag: u8, bytes: &[u8]) -> Option<String> {
    match tag {
        TAG_UTF8_STRING | TAG_PRINTABLE_STRING | TAG_IA5_STRING => {
            String::from_utf8(bytes.to_vec()).ok()
        }
        // Teletex is treated as Latin-1, which is what it carries in practice.
        TAG_T61_STRING => Some(bytes.iter().map(|&b| char::from(b)).collect()),
        TAG_BMP_STRING => {
            if !bytes.len().is_multiple_of(2) {
                return None;
            }
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
