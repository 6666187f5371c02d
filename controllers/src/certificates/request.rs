//! What a certificate signing request asks for, and what each built-in signer accepts
//! (upstream's `ValidateKubeletClientCSR`, `ValidateKubeletServingCSR` and the
//! kube-apiserver-client usage rule), in upstream's words.

use std::collections::BTreeSet;

/// Signs client certificates for the API server with the client CA.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
/// Signs kubelet client certificates (`system:node:<name>`) with the client CA.
pub const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Signs kubelet serving certificates with the server CA (as k3s does).
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// The parts of a PKCS#10 request the signers' rules look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<String>,
    pub emails: Vec<String>,
    pub uris: Vec<String>,
    /// The DER of the request (for signing).
    pub der: Vec<u8>,
}

/// Why `spec.request` is not a PKCS#10 request.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// No PEM block.
    #[error("parsing the PEM request: {0}")]
    Pem(x509_parser::nom::Err<x509_parser::error::PEMError>),
    /// The block is not a certificate request.
    #[error("parsing the certificate request: {0}")]
    Request(x509_parser::nom::Err<x509_parser::error::X509Error>),
}

/// Why a built-in signer refuses a request (upstream's words; the Failed condition's
/// message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The subject's only organization is not `system:nodes`.
    #[error("subject organization is not system:nodes")]
    Organization,
    /// The subject's CN does not start with `system:node:`.
    #[error("subject common name does not begin with system:node:")]
    CommonName,
    /// SANs of a kind (`DNS`, `Email`, `IP`, `URI`) the signer does not allow.
    #[error("{0} subjectAltNames are not allowed")]
    SanKind(&'static str),
    /// A serving request without a DNS or IP SAN.
    #[error("DNS or IP subjectAltName is required")]
    NoSan,
    /// Usages other than the signer's set (named).
    #[error("usages did not match [{0}]")]
    Usages(&'static str),
    /// A usage a client certificate may not have.
    #[error("invalid usage for client certificate: {0}")]
    ClientUsage(String),
}

/// Parses a PEM request (`spec.request` decoded).
pub fn parse_pem(pem: &[u8]) -> Result<Request, ParseError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).map_err(ParseError::Pem)?;
    use x509_parser::prelude::FromDer;
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .map_err(ParseError::Request)?;
    let subject = &csr.certification_request_info.subject;
    let mut r = Request {
        common_name: subject
            .iter_common_name()
            .next()
            .and_then(|a| a.as_str().ok())
            .unwrap_or_default()
            .to_string(),
        organizations: subject
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect(),
        der: pem.contents.clone(),
        ..Request::default()
    };
    use x509_parser::extensions::{GeneralName, ParsedExtension};
    for ext in csr.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for n in &san.general_names {
                match n {
                    GeneralName::DNSName(d) => r.dns_names.push(d.to_string()),
                    GeneralName::RFC822Name(e) => r.emails.push(e.to_string()),
                    GeneralName::URI(u) => r.uris.push(u.to_string()),
                    GeneralName::IPAddress(ip) => r.ip_addresses.push(hex::encode(ip)),
                    _ => {}
                }
            }
        }
    }
    Ok(r)
}

fn usage_set(usages: &[String]) -> BTreeSet<&str> {
    usages.iter().map(String::as_str).collect()
}

fn node_subject(r: &Request) -> Result<(), Refusal> {
    if r.organizations.len() != 1 || r.organizations[0] != "system:nodes" {
        return Err(Refusal::Organization);
    }
    if !r.common_name.starts_with("system:node:") {
        return Err(Refusal::CommonName);
    }
    Ok(())
}

/// Upstream's kubelet client rule.
pub fn kubelet_client(r: &Request, usages: &[String]) -> Result<(), Refusal> {
    if r.organizations.len() != 1 || r.organizations[0] != "system:nodes" {
        return Err(Refusal::Organization);
    }
    if !r.dns_names.is_empty() {
        return Err(Refusal::SanKind("DNS"));
    }
    if !r.emails.is_empty() {
        return Err(Refusal::SanKind("Email"));
    }
    if !r.ip_addresses.is_empty() {
        return Err(Refusal::SanKind("IP"));
    }
    if !r.uris.is_empty() {
        return Err(Refusal::SanKind("URI"));
    }
    if !r.common_name.starts_with("system:node:") {
        return Err(Refusal::CommonName);
    }
    let u = usage_set(usages);
    let full = BTreeSet::from(["client auth", "digital signature", "key encipherment"]);
    let short = BTreeSet::from(["client auth", "digital signature"]);
    if u != full && u != short {
        return Err(Refusal::Usages(
            "client auth digital signature key encipherment",
        ));
    }
    Ok(())
}

/// Upstream's kubelet serving rule.
pub fn kubelet_serving(r: &Request, usages: &[String]) -> Result<(), Refusal> {
    node_subject(r)?;
    if r.dns_names.is_empty() && r.ip_addresses.is_empty() {
        return Err(Refusal::NoSan);
    }
    if !r.emails.is_empty() {
        return Err(Refusal::SanKind("Email"));
    }
    if !r.uris.is_empty() {
        return Err(Refusal::SanKind("URI"));
    }
    let u = usage_set(usages);
    let full = BTreeSet::from(["digital signature", "key encipherment", "server auth"]);
    let short = BTreeSet::from(["digital signature", "server auth"]);
    if u != full && u != short {
        return Err(Refusal::Usages(
            "digital signature key encipherment server auth",
        ));
    }
    Ok(())
}

/// Upstream's kube-apiserver-client rule: only client usages.
pub fn apiserver_client(usages: &[String]) -> Result<(), Refusal> {
    for u in usages {
        if !["digital signature", "key encipherment", "client auth"].contains(&u.as_str()) {
            return Err(Refusal::ClientUsage(u.clone()));
        }
    }
    Ok(())
}

/// Which CA signs for `signer`, `None` for signers we do not handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ca {
    Client,
    Server,
}

/// The CA for `signer` and whether the request is acceptable to it (`Err`: the Failed
/// condition's message).
pub fn check(signer: &str, r: &Request, usages: &[String]) -> Option<(Ca, Result<(), Refusal>)> {
    match signer {
        KUBE_APISERVER_CLIENT => Some((Ca::Client, apiserver_client(usages))),
        KUBELET_CLIENT => Some((Ca::Client, kubelet_client(r, usages))),
        KUBELET_SERVING => Some((Ca::Server, kubelet_serving(r, usages))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cn: &str, orgs: &[&str]) -> Request {
        Request {
            common_name: cn.into(),
            organizations: orgs.iter().map(|s| s.to_string()).collect(),
            ..Request::default()
        }
    }

    fn us(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kubelet_client_rules() {
        let ok = node("system:node:n1", &["system:nodes"]);
        let usages = us(&["digital signature", "key encipherment", "client auth"]);
        assert_eq!(kubelet_client(&ok, &usages), Ok(()));
        assert_eq!(
            kubelet_client(&ok, &us(&["client auth", "digital signature"])),
            Ok(())
        );
        assert_eq!(
            kubelet_client(&ok, &us(&["client auth"])).map_err(|e| e.to_string()),
            Err("usages did not match [client auth digital signature key encipherment]".into())
        );
        assert_eq!(
            kubelet_client(&node("system:node:n1", &["system:masters"]), &usages)
                .map_err(|e| e.to_string()),
            Err("subject organization is not system:nodes".into())
        );
        assert_eq!(
            kubelet_client(&node("alice", &["system:nodes"]), &usages).map_err(|e| e.to_string()),
            Err("subject common name does not begin with system:node:".into())
        );
        let mut dns = ok.clone();
        dns.dns_names.push("n1".into());
        assert_eq!(
            kubelet_client(&dns, &usages).map_err(|e| e.to_string()),
            Err("DNS subjectAltNames are not allowed".into())
        );
    }

    #[test]
    fn kubelet_serving_rules() {
        let mut r = node("system:node:n1", &["system:nodes"]);
        let usages = us(&["digital signature", "server auth"]);
        assert_eq!(
            kubelet_serving(&r, &usages).map_err(|e| e.to_string()),
            Err("DNS or IP subjectAltName is required".into())
        );
        r.dns_names.push("n1".into());
        assert_eq!(kubelet_serving(&r, &usages), Ok(()));
        assert!(kubelet_serving(&r, &us(&["client auth"])).is_err());
    }

    #[test]
    fn apiserver_client_rules_and_signers() {
        assert_eq!(
            apiserver_client(&us(&["client auth", "digital signature"])),
            Ok(())
        );
        assert_eq!(
            apiserver_client(&us(&["client auth", "server auth"])).map_err(|e| e.to_string()),
            Err("invalid usage for client certificate: server auth".into())
        );
        let r = Request::default();
        assert_eq!(
            check(KUBE_APISERVER_CLIENT, &r, &[]).map(|c| c.0),
            Some(Ca::Client)
        );
        assert_eq!(
            check(KUBELET_SERVING, &r, &[]).map(|c| c.0),
            Some(Ca::Server)
        );
        assert_eq!(check("example.com/custom", &r, &[]), None);
    }

    #[test]
    fn parses_a_pem_request() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["n1.example".into()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:n1");
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let pem = p.serialize_request(&key).unwrap().pem().unwrap();
        let r = parse_pem(pem.as_bytes()).unwrap();
        assert_eq!(r.common_name, "system:node:n1");
        assert_eq!(r.organizations, vec!["system:nodes"]);
        assert_eq!(r.dns_names, vec!["n1.example"]);
        assert!(parse_pem(b"not a request").is_err());
    }
}
