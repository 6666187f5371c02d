//! The node's certificate requests: a fresh ECDSA P-256 key made on the node (it never leaves
//! it), the PKCS#10 request, and the `CertificateSigningRequest` objects upstream kubelet
//! submits: the client identity `system:node:<name>` in `system:nodes` for the signer
//! `kubernetes.io/kube-apiserver-client-kubelet`, and the serving certificate (SANs: node name
//! and addresses) for `kubernetes.io/kubelet-serving`.

use std::net::IpAddr;

use base64::Engine;
use k3rs_apimachinery::signers::{KUBELET_CLIENT, KUBELET_SERVING};
use k3rs_apimachinery::users::NODE_PASSWORD_ANNOTATION;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use serde_json::json;

use super::renew::Validity;

/// Which certificate a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The kubelet's client certificate (`system:node:<name>`).
    Client,
    /// The kubelet's serving certificate.
    Serving,
}

/// A key and its request, both PEM.
#[derive(Clone)]
pub struct KeyAndRequest {
    /// The private key (never leaves the node).
    pub key_pem: String,
    /// The PKCS#10 request.
    pub request_pem: String,
}

impl std::fmt::Debug for KeyAndRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyAndRequest").finish_non_exhaustive()
    }
}

/// Why a request could not be made or a certificate read.
#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    /// The key or request could not be made.
    #[error("generating the node key or request")]
    Generate(#[source] rcgen::Error),
    /// The issued certificate does not parse.
    #[error("parsing the certificate: {0}")]
    Certificate(String),
}

/// `system:node:<name>`.
pub fn node_user(node: &str) -> String {
    format!("system:node:{node}")
}

/// A new key and the request for `kind` of node `node` (`ips` only matter for serving).
pub fn generate(kind: Kind, node: &str, ips: &[IpAddr]) -> Result<KeyAndRequest, CsrError> {
    let key =
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(CsrError::Generate)?;
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    p.distinguished_name
        .push(rcgen::DnType::CommonName, node_user(node));
    if kind == Kind::Serving {
        let dns =
            rcgen::string::Ia5String::try_from(node.to_string()).map_err(CsrError::Generate)?;
        p.subject_alt_names = std::iter::once(rcgen::SanType::DnsName(dns))
            .chain(ips.iter().map(|ip| rcgen::SanType::IpAddress(*ip)))
            .collect();
    }
    let request_pem = p
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(CsrError::Generate)?;
    Ok(KeyAndRequest {
        key_pem: key.serialize_pem(),
        request_pem,
    })
}

/// The `CertificateSigningRequest` for `request_pem` (named `csr-<random>` by the server),
/// carrying the node's `password` when given (a request made with the join token).
pub fn object(kind: Kind, request_pem: &str, password: Option<&str>) -> CertificateSigningRequest {
    let (signer, usages) = match kind {
        Kind::Client => (KUBELET_CLIENT, ["digital signature", "client auth"]),
        Kind::Serving => (KUBELET_SERVING, ["digital signature", "server auth"]),
    };
    let mut metadata = json!({ "generateName": "csr-" });
    if let Some(p) = password {
        metadata["annotations"] = json!({ (NODE_PASSWORD_ANNOTATION): p });
    }
    serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": metadata,
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request_pem),
            "signerName": signer,
            "usages": usages,
        },
    }))
    .expect("a valid CertificateSigningRequest")
}

/// What became of a submitted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Neither issued nor refused yet.
    Pending,
    /// The issued certificate (PEM).
    Issued(Vec<u8>),
    /// Denied or Failed, with the condition's reason and message.
    Refused(String),
}

/// The outcome of `csr` as stored.
pub fn outcome(csr: &CertificateSigningRequest) -> Outcome {
    let Some(status) = &csr.status else {
        return Outcome::Pending;
    };
    for c in status.conditions.iter().flatten() {
        if (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True" {
            return Outcome::Refused(format!(
                "{} ({}): {}",
                c.type_,
                c.reason.as_deref().unwrap_or(""),
                c.message.as_deref().unwrap_or("")
            ));
        }
    }
    match &status.certificate {
        Some(c) if !c.0.is_empty() => Outcome::Issued(c.0.clone()),
        _ => Outcome::Pending,
    }
}

/// The validity of the first certificate of `cert_pem` if its public key is `key_pem`'s.
pub fn validity_of_pair(cert_pem: &[u8], key_pem: &[u8]) -> Result<Validity, CsrError> {
    let bad = |m: String| CsrError::Certificate(m);
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem).map_err(|e| bad(e.to_string()))?;
    let cert = pem.parse_x509().map_err(|e| bad(e.to_string()))?;
    let key_text = std::str::from_utf8(key_pem).map_err(|e| bad(e.to_string()))?;
    let key = rcgen::KeyPair::from_pem(key_text).map_err(|e| bad(e.to_string()))?;
    if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
        return Err(bad("the certificate is not for the stored key".into()));
    }
    let v = cert.validity();
    Ok(Validity {
        not_before: v.not_before.timestamp(),
        not_after: v.not_after.timestamp(),
    })
}

/// The subject common name of the first certificate of `cert_pem`.
pub fn common_name(cert_pem: &[u8]) -> Result<String, CsrError> {
    let bad = |m: String| CsrError::Certificate(m);
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem).map_err(|e| bad(e.to_string()))?;
    let cert = pem.parse_x509().map_err(|e| bad(e.to_string()))?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_string();
    Ok(cn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `req`'s key, valid from `nb` to `na` (Unix seconds).
    fn certify(req: &KeyAndRequest, nb: i64, na: i64) -> String {
        let key = rcgen::KeyPair::from_pem(&req.key_pem).unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:n1");
        p.not_before = time::OffsetDateTime::from_unix_timestamp(nb).unwrap();
        p.not_after = time::OffsetDateTime::from_unix_timestamp(na).unwrap();
        p.self_signed(&key).unwrap().pem()
    }

    /// The subject and SANs of a PEM request.
    fn parse_request(pem: &str) -> (String, Vec<String>) {
        use x509_parser::extensions::ParsedExtension;
        use x509_parser::prelude::FromDer;
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let (_, csr) =
            x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
                .unwrap();
        let mut sans = Vec::new();
        for ext in csr.requested_extensions().into_iter().flatten() {
            if let ParsedExtension::SubjectAlternativeName(san) = ext {
                sans.extend(san.general_names.iter().map(|n| n.to_string()));
            }
        }
        (csr.certification_request_info.subject.to_string(), sans)
    }

    #[test]
    fn client_requests_name_the_node_and_nothing_else() {
        let r = generate(Kind::Client, "n1", &["10.0.0.1".parse().unwrap()]).unwrap();
        assert_eq!(
            parse_request(&r.request_pem),
            ("O=system:nodes, CN=system:node:n1".to_string(), vec![])
        );
        assert!(r.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    }

    #[test]
    fn serving_requests_carry_the_name_and_addresses() {
        let ips: Vec<IpAddr> = vec!["10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap()];
        let r = generate(Kind::Serving, "n1", &ips).unwrap();
        assert_eq!(
            parse_request(&r.request_pem),
            (
                "O=system:nodes, CN=system:node:n1".to_string(),
                vec![
                    "DNSName(n1)".to_string(),
                    "IPAddress(0a:00:00:01)".to_string(),
                    "IPAddress(fd:00:00:00:00:00:00:00:00:00:00:00:00:00:00:01)".to_string()
                ]
            )
        );
    }

    #[test]
    fn objects_use_upstreams_signers_and_usages() {
        let v = serde_json::to_value(object(Kind::Client, "PEM", None)).unwrap();
        assert_eq!(
            v["spec"],
            json!({"request": "UEVN", "signerName": KUBELET_CLIENT,
                "usages": ["digital signature", "client auth"]})
        );
        assert_eq!(v["metadata"], json!({"generateName": "csr-"}));
        let v = serde_json::to_value(object(Kind::Serving, "PEM", None)).unwrap();
        assert_eq!(v["spec"]["signerName"], json!(KUBELET_SERVING));
        assert_eq!(
            v["spec"]["usages"],
            json!(["digital signature", "server auth"])
        );
    }

    #[test]
    fn outcomes() {
        let mut c = object(Kind::Client, "PEM", None);
        assert_eq!(outcome(&c), Outcome::Pending);
        c.status = Some(
            serde_json::from_value(json!({"conditions": [
            {"type": "Approved", "status": "True"}]}))
            .unwrap(),
        );
        assert_eq!(outcome(&c), Outcome::Pending);
        c.status.as_mut().unwrap().certificate = Some(k8s_openapi::ByteString(b"C".to_vec()));
        assert_eq!(outcome(&c), Outcome::Issued(b"C".to_vec()));
        c.status = Some(
            serde_json::from_value(json!({"conditions": [
            {"type": "Denied", "status": "True", "reason": "No", "message": "not you"}]}))
            .unwrap(),
        );
        assert_eq!(outcome(&c), Outcome::Refused("Denied (No): not you".into()));
    }

    #[test]
    fn a_pair_gives_its_validity_and_a_foreign_key_is_refused() {
        let r = generate(Kind::Client, "n1", &[]).unwrap();
        let cert = certify(&r, 1_800_000_000, 1_800_003_600);
        assert_eq!(
            validity_of_pair(cert.as_bytes(), r.key_pem.as_bytes()).unwrap(),
            Validity {
                not_before: 1_800_000_000,
                not_after: 1_800_003_600
            }
        );
        assert_eq!(common_name(cert.as_bytes()).unwrap(), "system:node:n1");
        let other = generate(Kind::Client, "n1", &[]).unwrap();
        let e = validity_of_pair(cert.as_bytes(), other.key_pem.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "parsing the certificate: the certificate is not for the stored key"
        );
    }
}
