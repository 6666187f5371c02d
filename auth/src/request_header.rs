//! The authenticating proxy (`--requestheader-*`): a front proxy that presents a client
//! certificate from the request-header CA (and, when `--requestheader-allowed-names` is set,
//! one of those common names) may assert the user in headers: the username (first non-empty
//! of the username headers), the uid (first non-empty of the uid headers, none by default, as
//! upstream's `--requestheader-uid-headers`), groups (every value of every group header) and
//! extra fields (`<prefix><key>: value`, key lower-cased and %-unescaped).
//!
//! # Guarantees
//! - Headers are believed only from a connection whose certificate chains to the
//!   request-header CA and whose CN is allowed; otherwise the request is left to the next
//!   authenticator (the client-certificate one, which checks its own CA).
//! - A proxy request without a username header is left to the next authenticator too (as
//!   upstream).

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use futures::future::BoxFuture;
use rustls::pki_types::{CertificateDer, UnixTime};

use super::authn::{Authenticator, AuthnRequest, Outcome, X509};
use super::cert_verdicts::CachedVerifier;
use super::user::UserInfo;

/// Which headers carry the identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headers {
    /// `--requestheader-username-headers`: the first of these present names the user.
    pub username: Vec<String>,
    /// `--requestheader-uid-headers` (empty by default, as upstream).
    pub uid: Vec<String>,
    /// `--requestheader-group-headers`: every value of each is a group.
    pub group: Vec<String>,
    /// `--requestheader-extra-headers-prefix`: `<prefix><key>` headers are `user.extra[<key>]` (key unescaped, lowercased).
    pub extra_prefix: Vec<String>,
}

impl Default for Headers {
    /// k3s's: `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-`.
    fn default() -> Headers {
        Headers {
            username: vec!["X-Remote-User".into()],
            uid: Vec::new(),
            group: vec!["X-Remote-Group".into()],
            extra_prefix: vec!["X-Remote-Extra-".into()],
        }
    }
}

impl Headers {
    /// The user the headers assert; `None` without a username.
    pub fn user(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect()
        };
        let username = self
            .username
            .iter()
            .find_map(|h| values(h).into_iter().find(|v| !v.is_empty()))?;
        let uid = self
            .uid
            .iter()
            .find_map(|h| values(h).into_iter().find(|v| !v.is_empty()))
            .unwrap_or_default();
        let groups = self
            .group
            .iter()
            .flat_map(|h| values(h))
            .filter(|g| !g.is_empty())
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for prefix in &self.extra_prefix {
            let prefix = prefix.to_ascii_lowercase();
            for (name, value) in headers {
                let Some(key) = name.as_str().strip_prefix(&prefix) else {
                    continue;
                };
                let key = percent_encoding::percent_decode_str(key)
                    .decode_utf8_lossy()
                    .to_lowercase();
                if let Ok(v) = value.to_str() {
                    extra.entry(key).or_default().push(v.to_string());
                }
            }
        }
        Some(UserInfo {
            username,
            uid,
            groups,
            extra,
        })
    }
}

/// The request-header authenticator.
#[derive(Debug)]
pub struct RequestHeader {
    /// Verifies against the request-header CA only.
    pub verifier: CachedVerifier,
    /// `--requestheader-allowed-names` (empty: any CN from the CA).
    pub allowed_names: Vec<String>,
    /// Which headers carry the identity.
    pub headers: Headers,
}

impl RequestHeader {
    /// Whether `certs` come from an allowed proxy.
    fn is_proxy(&self, certs: &[CertificateDer<'static>]) -> bool {
        let Some(leaf) = certs.first() else {
            return false;
        };
        if self.verifier.verify(certs, UnixTime::now()).is_err() {
            return false;
        }
        if self.allowed_names.is_empty() {
            return true;
        }
        match X509::user_of(leaf) {
            Ok(u) if self.allowed_names.contains(&u.username) => true,
            other => {
                tracing::debug!(cn = ?other.map(|u| u.username), "request-header client certificate not in the allowed names");
                false
            }
        }
    }
}

impl Authenticator for RequestHeader {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            if !self.is_proxy(req.peer_certs) {
                return Outcome::NotApplicable;
            }
            match self.headers.user(req.headers) {
                Some(u) => Outcome::Authenticated(u),
                None => Outcome::NotApplicable,
            }
        })
    }
}

/// Client certificates checked against the client CA by the authenticator itself, for
/// servers whose TLS handshake also accepts the request-header CA.
#[derive(Debug)]
pub struct VerifiedX509 {
    /// Verifies the chain against the client CA.
    pub verifier: CachedVerifier,
}

impl Authenticator for VerifiedX509 {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            if req.peer_certs.is_empty() {
                return Outcome::NotApplicable;
            }
            if let Err(e) = self.verifier.verify(req.peer_certs, UnixTime::now()) {
                return Outcome::Rejected(format!("verifying the client certificate: {e}"));
            }
            X509.authenticate(req).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impersonation::tests::headers;

    #[test]
    fn identity_from_the_headers() {
        let h = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "dev"),
            ("x-remote-group", "ops,qa"),
            ("X-Remote-Group", ""),
            ("X-Remote-Extra-Scopes", "read"),
            ("X-Remote-Extra-Scopes", "write"),
            ("X-Remote-Extra-Acme.com%2Fproject", "p1"),
        ]);
        let u = Headers::default().user(&h).unwrap();
        assert_eq!(u.username, "alice");
        assert_eq!(u.uid, "", "no uid headers by default");
        assert_eq!(u.groups, ["dev", "ops,qa"], "values are not split");
        assert_eq!(
            u.extra,
            BTreeMap::from([
                ("acme.com/project".to_string(), vec!["p1".to_string()]),
                ("scopes".to_string(), vec!["read".into(), "write".into()]),
            ])
        );
    }

    #[test]
    fn first_non_empty_username_header() {
        let hs = Headers {
            username: vec!["X-User".into(), "X-Remote-User".into()],
            uid: vec!["X-Uid".into(), "X-Remote-Uid".into()],
            group: vec![],
            extra_prefix: vec![],
        };
        let u = hs
            .user(&headers(&[
                ("X-User", ""),
                ("X-Remote-User", "bob"),
                ("X-Uid", ""),
                ("X-Remote-Uid", "u-1"),
                ("X-Remote-Uid", "u-2"),
            ]))
            .unwrap();
        assert_eq!((u.username.as_str(), u.uid.as_str()), ("bob", "u-1"));
        assert_eq!(hs.user(&headers(&[("X-Remote-Group", "g")])), None);
    }
}
