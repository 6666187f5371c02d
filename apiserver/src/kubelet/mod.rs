//! The API server's side of the kubelet API: pods' `log`, `exec`, `attach`, `portforward`
//! and `nodes/<name>/proxy/…` are carried to the node's kubelet over HTTPS, presenting the
//! API server's kubelet client certificate and verifying the kubelet's serving certificate
//! against the server CA (the signer of `kubernetes.io/kubelet-serving`).
//!
//! # Guarantees
//! - Answers of the kubelet other than 2xx/101 become `Status` objects ([`location::kubelet_error`]);
//!   a kubelet that cannot be reached is a 503 naming the address.
//! - A `101 Switching Protocols` splices the client's upgraded connection with the
//!   kubelet's ([`crate::http::upstream`]).

pub mod location;

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::http::upstream;
use k3rs_apimachinery::status::ApiError;
use location::KubeletAddress;

/// The most of a kubelet's error body relayed.
const MAX_ERROR_BODY: usize = 2048;

/// The TLS client the API server dials kubelets with.
#[derive(Clone)]
pub struct KubeletClient {
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for KubeletClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeletClient")
    }
}

/// Why the client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Pem {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("kubelet client TLS: {0}")]
    Tls(String),
}

impl KubeletClient {
    /// Trusts `server_ca` (kubelet serving certificates) and presents `cert`/`key`.
    pub fn load(server_ca: &Path, cert: &Path, key: &Path) -> Result<KubeletClient, Error> {
        let pem = |p: &Path| {
            let p = p.display().to_string();
            move |source| Error::Pem { path: p, source }
        };
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(server_ca).map_err(pem(server_ca))? {
            roots
                .add(c.map_err(pem(server_ca))?)
                .map_err(|e| Error::Tls(e.to_string()))?;
        }
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(pem(cert))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(pem(cert))?;
        let key = PrivateKeyDer::from_pem_file(key).map_err(pem(key))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| Error::Tls(e.to_string()))?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(KubeletClient { tls: Arc::new(tls) })
    }

    /// Sends `req` (its method, headers other than credentials, and body) to `path_and_query`
    /// on the kubelet at `at`, and relays the answer.
    pub async fn forward(
        &self,
        at: &KubeletAddress,
        path_and_query: &str,
        req: Request,
    ) -> Result<Response, ApiError> {
        let unreachable = |e: &dyn std::fmt::Display| {
            ApiError::unavailable(format!(
                "error dialing backend: the kubelet at {}:{} is unreachable: {e}",
                at.host, at.port
            ))
        };
        let conn = upstream::dial(self.tls.clone(), &at.host, at.port, &at.host)
            .await
            .map_err(|e| unreachable(&e))?;
        let host = upstream::host_header(&at.host, at.port);
        let resp = upstream::exchange(conn, &host, path_and_query, req, Default::default())
            .await
            .map_err(|e| unreachable(&e))?;
        let status = resp.status();
        if status == StatusCode::SWITCHING_PROTOCOLS {
            return Ok(resp);
        }
        if !status.is_success() {
            let body = resp.into_body().collect().await.map(|b| b.to_bytes());
            let text = body
                .map(|b| String::from_utf8_lossy(&b[..b.len().min(MAX_ERROR_BODY)]).into_owned())
                .unwrap_or_default();
            return Err(location::kubelet_error(status.as_u16(), &text));
        }
        let mut r = resp;
        // Streams (logs with follow) must not be buffered on the way.
        r.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache, private"),
        );
        Ok(r.into_response())
    }

    /// GETs `path_and_query` from the kubelet at `at`: its body, at most `limit` bytes
    /// (a longer body is an error, as is any answer but 2xx).
    pub async fn get(
        &self,
        at: &KubeletAddress,
        path_and_query: &str,
        limit: usize,
    ) -> Result<axum::body::Bytes, ApiError> {
        let req = axum::http::Request::builder()
            .uri(path_and_query)
            .body(Body::empty())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let resp = self.forward(at, path_and_query, req).await?;
        http_body_util::Limited::new(resp.into_body(), limit)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| {
                ApiError::unavailable(format!(
                    "reading {path_and_query} from the kubelet at {}:{}: {e}",
                    at.host, at.port
                ))
            })
    }
}
