//! Issuing the certificate for an approved request: the request's subject, names and public
//! key; the usages of `spec.usages`; validity from five minutes ago (upstream's backdate) for
//! the requested duration, capped by the signer's maximum and the CA's own expiry.

use std::time::Duration;

use rcgen::{
    CertificateSigningRequestParams, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
};

/// Default and maximum validity (kube-controller-manager's `--cluster-signing-duration`).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
/// How far `notBefore` lies in the past (clock skew).
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// The validity of a certificate for `spec.expirationSeconds` (`None`: the maximum).
pub fn duration(expiration_seconds: Option<i64>) -> Duration {
    match expiration_seconds {
        Some(s) if s > 0 => Duration::from_secs(s as u64).min(MAX_DURATION),
        _ => MAX_DURATION,
    }
}

/// `(key usages, extended key usages)` for `spec.usages` (names upstream knows; the rest are
/// not encoded).
pub fn usages(names: &[String]) -> (Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>) {
    let (mut ku, mut eku) = (Vec::new(), Vec::new());
    for n in names {
        match n.as_str() {
            "signing" | "digital signature" => ku.push(KeyUsagePurpose::DigitalSignature),
            "content commitment" => ku.push(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => ku.push(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => ku.push(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => ku.push(KeyUsagePurpose::DataEncipherment),
            "cert sign" => ku.push(KeyUsagePurpose::KeyCertSign),
            "crl sign" => ku.push(KeyUsagePurpose::CrlSign),
            "encipher only" => ku.push(KeyUsagePurpose::EncipherOnly),
            "decipher only" => ku.push(KeyUsagePurpose::DecipherOnly),
            "any" => eku.push(ExtendedKeyUsagePurpose::Any),
            "server auth" => eku.push(ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => eku.push(ExtendedKeyUsagePurpose::ClientAuth),
            "code signing" => eku.push(ExtendedKeyUsagePurpose::CodeSigning),
            "email protection" | "s/mime" => eku.push(ExtendedKeyUsagePurpose::EmailProtection),
            "timestamping" => eku.push(ExtendedKeyUsagePurpose::TimeStamping),
            "ocsp signing" => eku.push(ExtendedKeyUsagePurpose::OcspSigning),
            _ => {}
        }
    }
    ku.dedup();
    eku.dedup();
    (ku, eku)
}

/// Why a request could not be signed (the Failed condition's message).
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// rcgen cannot read the request.
    #[error("reading the request: {0}")]
    Request(#[source] rcgen::Error),
    /// rcgen cannot sign it.
    #[error("signing: {0}")]
    Sign(#[source] rcgen::Error),
}

/// Signs the DER request `csr_der` with `issuer`, valid from `now - BACKDATE` for `valid`
/// (never past `ca_not_after`). Returns the PEM certificate.
pub fn sign(
    issuer: &Issuer<'_, KeyPair>,
    ca_not_after: time::OffsetDateTime,
    csr_der: &[u8],
    usage_names: &[String],
    valid: Duration,
    now: std::time::SystemTime,
) -> Result<String, SignError> {
    let der = rustls::pki_types::CertificateSigningRequestDer::from(csr_der.to_vec());
    let mut req = CertificateSigningRequestParams::from_der(&der).map_err(SignError::Request)?;
    let now = time::OffsetDateTime::from(now);
    let p = &mut req.params;
    p.not_before = now - BACKDATE;
    p.not_after = (now + valid).min(ca_not_after);
    let (ku, eku) = usages(usage_names);
    p.key_usages = ku;
    p.extended_key_usages = eku;
    p.is_ca = rcgen::IsCa::ExplicitNoCa;
    p.use_authority_key_identifier_extension = true;
    let mut serial: [u8; 16] = rand::random();
    serial[0] = (serial[0] & 0x7f) | 0x01;
    p.serial_number = Some(SerialNumber::from_slice(&serial));
    let cert = req.signed_by(issuer).map_err(SignError::Sign)?;
    Ok(cert.pem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_capped() {
        assert_eq!(duration(None), MAX_DURATION);
        assert_eq!(duration(Some(3600)), Duration::from_secs(3600));
        assert_eq!(duration(Some(10 * 365 * 24 * 3600)), MAX_DURATION);
        assert_eq!(duration(Some(-1)), MAX_DURATION);
    }

    #[test]
    fn usage_names() {
        let (ku, eku) = usages(&[
            "digital signature".into(),
            "key encipherment".into(),
            "client auth".into(),
        ]);
        assert_eq!(
            ku,
            vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment
            ]
        );
        assert_eq!(eku, vec![ExtendedKeyUsagePurpose::ClientAuth]);
    }

    #[test]
    fn signs_with_the_request_subject_and_the_validity() {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::default();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "test-ca");
        let ca_not_after = ca.not_after;
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:n1");
        let csr = p.serialize_request(&key).unwrap();
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let pem = sign(
            &issuer,
            ca_not_after,
            csr.der(),
            &["client auth".into(), "digital signature".into()],
            Duration::from_secs(3600),
            now,
        )
        .unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let cn = cert.subject().iter_common_name().next().unwrap();
        assert_eq!(cn.as_str().unwrap(), "system:node:n1");
        assert_eq!(cert.issuer().to_string(), "CN=test-ca");
        assert_eq!(cert.validity().not_before.timestamp(), 1_800_000_000 - 300);
        assert_eq!(cert.validity().not_after.timestamp(), 1_800_000_000 + 3600);
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
    }
}
