//! Authentication: an ordered chain of authenticators; the first that recognises the
//! request's credentials decides (kube-apiserver's union authenticator).
//!
//! # Guarantees
//! - Credentials an authenticator rejects are 401 unless a later authenticator accepts the
//!   request (upstream's union authenticator goes on after an error); they are never
//!   downgraded to anonymous.
//! - Every user the chain returns carries `system:authenticated`.

use std::fmt::Debug;
use std::sync::Arc;

use axum::http::HeaderMap;
use futures::future::BoxFuture;
use rustls::pki_types::CertificateDer;

use super::user::UserInfo;

/// What authenticators look at.
#[derive(Debug, Clone, Copy)]
pub struct AuthnRequest<'a> {
    /// The request's HTTP headers (bearer token, front-proxy headers).
    pub headers: &'a HeaderMap,
    /// The client's verified certificate chain (leaf first); empty without one.
    pub peer_certs: &'a [CertificateDer<'static>],
    /// The request path (none of the built-in authenticators decides on it).
    pub path: &'a str,
}

impl AuthnRequest<'_> {
    /// The `Authorization: Bearer <token>` token, if any (kube-apiserver ignores an empty one).
    pub fn bearer_token(&self) -> Option<&str> {
        let v = self
            .headers
            .get(axum::http::header::AUTHORIZATION)?
            .to_str()
            .ok()?;
        let (scheme, token) = v.split_once(' ')?;
        let token = token.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    }
}

/// One authenticator's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The credentials are this authenticator's kind and valid: this is the user.
    Authenticated(UserInfo),
    /// The credentials are not this authenticator's kind (or there are none): ask the next.
    NotApplicable,
    /// The credentials are this authenticator's kind but invalid (expired, bad signature…):
    /// 401, with the reason logged (never sent to the client).
    Rejected(String),
}

/// One way of authenticating (x509, bootstrap token, service-account JWT, …).
pub trait Authenticator: Send + Sync + Debug {
    /// This authenticator's verdict on `req`'s credentials.
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome>;
}

/// The ordered chain.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    authenticators: Vec<Arc<dyn Authenticator>>,
}

impl Chain {
    /// A chain consulting `authenticators` in order.
    pub fn new(authenticators: Vec<Arc<dyn Authenticator>>) -> Chain {
        Chain { authenticators }
    }

    /// Appends `a` (consulted after those already in the chain).
    pub fn push(&mut self, a: Arc<dyn Authenticator>) {
        self.authenticators.push(a);
    }

    /// The first authenticator's user; else the first rejection; `NotApplicable` when none
    /// recognised the request (the caller decides on anonymous), except that a bearer token
    /// no authenticator recognised is `Rejected` (as kube-apiserver's bearer-token
    /// authenticator: a presented token never means anonymous).
    pub async fn authenticate(&self, req: &AuthnRequest<'_>) -> Outcome {
        let mut rejected = None;
        for a in &self.authenticators {
            match a.authenticate(req).await {
                Outcome::NotApplicable => continue,
                Outcome::Authenticated(mut u) => {
                    u.add_group(super::user::ALL_AUTHENTICATED);
                    return Outcome::Authenticated(u);
                }
                r @ Outcome::Rejected(_) => {
                    rejected.get_or_insert(r);
                }
            }
        }
        if let Some(r) = rejected {
            return r;
        }
        if req.bearer_token().is_some() {
            return Outcome::Rejected("invalid bearer token".into());
        }
        Outcome::NotApplicable
    }
}

/// Why a verified client certificate names no user.
#[derive(Debug, thiserror::Error)]
pub enum CertificateUserError {
    /// The certificate does not parse.
    #[error("parsing the client certificate: {0}")]
    Parse(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// The subject has no CN.
    #[error("client certificate without a common name")]
    NoCommonName,
}

/// x509 client certificates: the TLS handshake verified the chain against the client CA;
/// the subject's CN is the user and its O values the groups.
#[derive(Debug, Clone, Copy, Default)]
pub struct X509;

impl X509 {
    /// The user named by a (verified) client certificate.
    pub fn user_of(cert: &CertificateDer<'_>) -> Result<UserInfo, CertificateUserError> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
            .map_err(CertificateUserError::Parse)?;
        let subject = parsed.subject();
        let cn = subject
            .iter_common_name()
            .next()
            .and_then(|a| a.as_str().ok())
            .unwrap_or_default();
        if cn.is_empty() {
            return Err(CertificateUserError::NoCommonName);
        }
        let groups = subject
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect();
        Ok(UserInfo::authenticated(cn, groups))
    }
}

impl Authenticator for X509 {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match req.peer_certs.first() {
                None => Outcome::NotApplicable,
                Some(leaf) => match X509::user_of(leaf) {
                    Ok(u) => Outcome::Authenticated(u),
                    Err(e) => Outcome::Rejected(e.to_string()),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: &str, orgs: &[&str]) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if !cn.is_empty() {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
        }
        for o in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    fn run(chain: &Chain, certs: &[CertificateDer<'static>], headers: &HeaderMap) -> Outcome {
        let req = AuthnRequest {
            headers,
            peer_certs: certs,
            path: "/api",
        };
        futures::executor::block_on(chain.authenticate(&req))
    }

    #[test]
    fn x509_user_and_groups() {
        let chain = Chain::new(vec![Arc::new(X509)]);
        let out = run(&chain, &[cert("alice", &["dev"])], &HeaderMap::new());
        let Outcome::Authenticated(u) = out else {
            panic!("{out:?}")
        };
        assert_eq!(u.username, "alice");
        assert_eq!(u.groups, vec!["dev", "system:authenticated"]);
    }

    #[test]
    fn x509_without_cn_is_rejected_and_none_is_not_applicable() {
        let chain = Chain::new(vec![Arc::new(X509)]);
        assert!(matches!(
            run(&chain, &[cert("", &["dev"])], &HeaderMap::new()),
            Outcome::Rejected(_)
        ));
        assert_eq!(run(&chain, &[], &HeaderMap::new()), Outcome::NotApplicable);
    }

    #[test]
    fn bearer_token_parsing() {
        let mut h = HeaderMap::new();
        let req = |h: &HeaderMap| {
            AuthnRequest {
                headers: h,
                peer_certs: &[],
                path: "/",
            }
            .bearer_token()
            .map(str::to_string)
        };
        assert_eq!(req(&h), None);
        h.insert("authorization", "Bearer abc.def".parse().unwrap());
        assert_eq!(req(&h).as_deref(), Some("abc.def"));
        h.insert("authorization", "bearer  xyz ".parse().unwrap());
        assert_eq!(req(&h).as_deref(), Some("xyz"));
        h.insert("authorization", "Bearer ".parse().unwrap());
        assert_eq!(req(&h), None);
        h.insert("authorization", "Basic dXNlcjpwYXNz".parse().unwrap());
        assert_eq!(req(&h), None);
    }
}
