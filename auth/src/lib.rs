//! Who is asking, and may they: the authentication chain, the authorization chain, and the
//! request attributes both are decided on. The API server runs them in this order before any
//! handler (see `apiserver::http::router`): authenticate → (impersonate) → authorize.
//!
//! # Guarantees
//! - A request whose credentials are presented but invalid is 401, never anonymous (the
//!   public paths below answer anyway, like k3s's supervisor endpoints).
//! - Only the paths in [`PUBLIC_PATHS`] are served to unauthenticated clients.
//! - An authorizer chain with no `Allow` denies (403 with kube-apiserver's message).

pub mod abac;
pub mod access_review;
pub mod attributes;
pub mod authn;
pub mod authz;
pub mod bootstrap_token;
pub mod cert_verdicts;
pub mod impersonation;
pub mod node;
pub mod node_password;
pub mod node_restriction;
pub mod oidc;
pub mod rbac;
pub mod request_header;
pub mod serviceaccount;
pub mod token_file;
pub mod user;
pub mod webhook;

pub use attributes::Attributes;
pub use user::{InProcessUser, UserInfo};

/// Paths served without authentication (like k3s: health, version and the CA bundle).
pub const PUBLIC_PATHS: &[&str] = &[
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/cacerts",
    "/v1-k3rs/client-ca.crt",
];

/// Whether `path` is one of [`PUBLIC_PATHS`] or below one.
pub fn is_public(path: &str) -> bool {
    PUBLIC_PATHS.iter().any(|p| {
        path == *p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
mod fuzz_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_paths() {
        assert!(is_public("/healthz"));
        assert!(is_public("/readyz/etcd"));
        assert!(is_public("/version/"));
        assert!(!is_public("/versionx"));
        assert!(!is_public("/api/v1/pods"));
        assert!(!is_public("/metrics"));
    }
}
