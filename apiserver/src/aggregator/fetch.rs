//! One GET to an extension server through the proxy transport (front-proxy client
//! certificate, `caBundle`), as the aggregator's own user `system:kube-aggregator`, bounded
//! in time ([`TIMEOUT`]) and size ([`MAX_BYTES`]). The availability check and the
//! discovery and OpenAPI downloads use it.

use std::time::Duration;

use axum::body::Body;
use axum::body::Bytes;
use axum::http::header;
use http_body_util::BodyExt;

use super::backend::ServiceRef;
use super::resolve::Address;
use super::{proxy, Aggregator, Trust};
use k3rs_auth::UserInfo;

/// How long one GET may take (kube-aggregator's 5 s).
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest document read from an extension server.
pub const MAX_BYTES: usize = 16 << 20;

/// What the extension server answered.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: u16,
    pub content_type: String,
    pub etag: Option<String>,
    pub body: Bytes,
}

/// Why a GET got no answer.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0}")]
    Request(#[from] axum::http::Error),
    #[error("{0}")]
    Proxy(#[from] proxy::ProxyError),
    #[error("reading the body: {0}")]
    Body(String),
    #[error("context deadline exceeded")]
    Timeout,
}

/// Where to GET from.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub at: &'a Address,
    pub service: &'a ServiceRef,
    pub trust: &'a Trust,
}

impl Target<'_> {
    /// `https://<host>:<port><path>` (for messages).
    pub fn url(&self, path: &str) -> String {
        format!(
            "https://{}{path}",
            crate::http::upstream::host_header(&self.at.host, self.at.port)
        )
    }
}

/// GETs `path` with `accept`, and `If-None-Match: etag` when given.
pub async fn get(
    agg: &Aggregator,
    to: Target<'_>,
    path: &str,
    accept: &str,
    etag: Option<&str>,
) -> Result<Fetched, FetchError> {
    let mut req = axum::http::Request::builder()
        .uri(path)
        .header(header::ACCEPT, accept);
    if let Some(tag) = etag {
        req = req.header(header::IF_NONE_MATCH, tag);
    }
    let req = req.body(Body::empty())?;
    let user = UserInfo {
        username: "system:kube-aggregator".into(),
        groups: vec![k3rs_auth::user::SYSTEM_MASTERS.into()],
        ..UserInfo::default()
    };
    let exchange = async {
        let resp = proxy::forward_to(agg, to.at, to.service, to.trust, &user, req).await?;
        let content_type = text(resp.headers(), header::CONTENT_TYPE);
        let etag = text(resp.headers(), header::ETAG);
        let status = resp.status().as_u16();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_BYTES)
            .collect()
            .await
            .map_err(|e| FetchError::Body(e.to_string()))?
            .to_bytes();
        Ok::<_, FetchError>(Fetched {
            status,
            content_type: content_type.unwrap_or_default(),
            etag,
            body,
        })
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| FetchError::Timeout)?
}

fn text(headers: &axum::http::HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
