//! The proxy to extension API servers: after this server authenticated and authorized the
//! request, it goes to the APIService's Service endpoint over TLS (verified against the
//! `caBundle` for `<service>.<namespace>.svc`, unless `insecureSkipTLSVerify`), presenting
//! the front-proxy client certificate and the user in `X-Remote-User`, `X-Remote-Group` and
//! `X-Remote-Extra-<key>` (kube-aggregator's headers, which extension servers trust from the
//! request-header CA). Bodies stream both ways; upgrades (exec, port-forward) are spliced.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::backend::{Backend, ServiceRef};
use super::resolve::{self, Unreachable};
use super::Aggregator;
use crate::http::upstream;
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiError;
use k3rs_auth::UserInfo;

/// Why a request did not reach the extension server.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("{0}")]
    Tls(#[from] k3rs_auth::webhook::client::TlsConfigError),
    #[error("{0}")]
    Dial(#[from] upstream::DialError),
    #[error("{0}")]
    Http(#[from] hyper::Error),
}

impl From<ProxyError> for ApiError {
    fn from(e: ProxyError) -> ApiError {
        ApiError::unavailable(format!("error trying to reach service: {e}"))
    }
}

/// Characters of an extra key kept as they are in `X-Remote-Extra-<key>`
/// (upstream escapes everything else with `%`).
const EXTRA_KEY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'*')
    .remove(b'+')
    .remove(b'^')
    .remove(b'`')
    .remove(b'|');

/// The front proxy's identity headers for `user`.
pub fn identity_headers(user: &UserInfo) -> HeaderMap {
    let mut h = HeaderMap::new();
    let mut add = |name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (
            HeaderName::try_from(name),
            HeaderValue::try_from(value.to_string()),
        ) {
            h.append(n, v);
        }
    };
    add("x-remote-user", &user.username);
    for g in &user.groups {
        add("x-remote-group", g);
    }
    for (key, values) in &user.extra {
        let key = percent_encoding::utf8_percent_encode(key, EXTRA_KEY).to_string();
        for v in values {
            add(&format!("x-remote-extra-{key}"), v);
        }
    }
    h
}

/// Sends `req` as `user` to the extension server behind `svc` at `at`.
pub async fn forward_to(
    agg: &Aggregator,
    at: &resolve::Address,
    svc: &ServiceRef,
    trust: &super::Trust,
    user: &UserInfo,
    req: Request,
) -> Result<Response, ProxyError> {
    let tls = agg.tls_for(trust)?;
    let conn = upstream::dial(tls, &at.host, at.port, &svc.server_name()).await?;
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let host = upstream::host_header(&at.host, at.port);
    Ok(upstream::exchange(conn, &host, &path, req, identity_headers(user)).await?)
}

/// Sends `req` as `user` to `backend`'s extension server, answering a failure with a 503
/// `Status`.
pub async fn serve(
    agg: &Aggregator,
    reg: &Registry,
    backend: &Backend,
    user: &UserInfo,
    req: Request,
) -> Response {
    let svc = &backend.service;
    let trust = super::Trust::of(&backend.api_service);
    let result = match resolve::lookup(reg, svc).await {
        Ok(at) => forward_to(agg, &at, svc, &trust, user, req).await,
        Err(e) => Err(e.into()),
    };
    result.unwrap_or_else(|e| {
        tracing::debug!(service = %svc.server_name(), error = %e, "aggregated API unreachable");
        ApiError::from(e).into_response()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn headers_carry_user_groups_and_escaped_extras() {
        let user = UserInfo {
            username: "alice".into(),
            uid: String::new(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: BTreeMap::from([(
                "example.org/scope key".to_string(),
                vec!["a".to_string(), "b".to_string()],
            )]),
        };
        let h = identity_headers(&user);
        assert_eq!(h["x-remote-user"], "alice");
        let groups: Vec<_> = h.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["devs", "system:authenticated"]);
        let extra: Vec<_> = h
            .get_all("x-remote-extra-example.org%2fscope%20key")
            .iter()
            .collect();
        assert_eq!(extra, ["a", "b"]);
    }
}
