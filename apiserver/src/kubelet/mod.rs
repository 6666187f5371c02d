//! The API server's side of the kubelet API: pods' `log`, `exec`, `attach`, `portforward`
//! and `nodes/<name>/proxy/…` are carried to the node's kubelet over HTTPS, presenting the
//! API server's kubelet client certificate and verifying the kubelet's serving certificate
//! against the server CA (the signer of `kubernetes.io/kubelet-serving`).
//!
//! # Guarantees
//! - Answers of the kubelet other than 2xx/101 become `Status` objects ([`location::kubelet_error`]);
//!   a kubelet that cannot be reached is a 503 naming the address.
//! - A `101 Switching Protocols` splices the client's upgraded connection with the
//!   kubelet's, byte for byte both ways, until either side closes (SPDY or WebSocket alike).

pub mod location;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use k3rs_apimachinery::status::ApiError;
use location::KubeletAddress;

/// How long dialing a kubelet (TCP + TLS) may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
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

/// Why no TLS connection to a kubelet was made.
#[derive(Debug, thiserror::Error)]
enum DialError {
    /// The host is not a DNS name or IP.
    #[error("{0}")]
    ServerName(#[from] rustls::pki_types::InvalidDnsNameError),
    /// Connecting or the handshake failed.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// Nothing within the dial timeout.
    #[error("no connection within {DIAL_TIMEOUT:?}")]
    Timeout,
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

    async fn dial(
        &self,
        at: &KubeletAddress,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, DialError> {
        let name = ServerName::try_from(at.host.clone())?;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let host = at.host.clone();
        let port = at.port;
        let dial = async move {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(DialError::Io)?;
            let _ = tcp.set_nodelay(true);
            connector.connect(name, tcp).await.map_err(DialError::Io)
        };
        tokio::time::timeout(DIAL_TIMEOUT, dial)
            .await
            .map_err(|_| DialError::Timeout)?
    }

    /// Sends `req` (its method, headers other than credentials, and body) to `path_and_query`
    /// on the kubelet at `at`, and relays the answer.
    pub async fn forward(
        &self,
        at: &KubeletAddress,
        path_and_query: &str,
        mut req: Request,
    ) -> Result<Response, ApiError> {
        let unreachable = |e: &dyn std::fmt::Display| {
            ApiError::unavailable(format!(
                "error dialing backend: the kubelet at {}:{} is unreachable: {e}",
                at.host, at.port
            ))
        };
        let tls = self.dial(at).await.map_err(|e| unreachable(&e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            let _ = conn.with_upgrades().await;
        });
        let upgrade = req.headers().contains_key(header::UPGRADE);
        let mut out = hyper::Request::builder()
            .method(req.method().clone())
            .uri(path_and_query);
        for (name, value) in req.headers() {
            if !is_credential(name) && name != header::HOST {
                out = out.header(name, value);
            }
        }
        let host = if at.host.contains(':') {
            format!("[{}]:{}", at.host, at.port)
        } else {
            format!("{}:{}", at.host, at.port)
        };
        let out = out.header(header::HOST, host);
        let downstream = upgrade.then(|| hyper::upgrade::on(&mut req));
        let out = if upgrade {
            out.body(Body::empty())
        } else {
            out.body(std::mem::take(req.body_mut()))
        }
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let mut resp = sender
            .send_request(out)
            .await
            .map_err(|e| unreachable(&e))?;
        let status = resp.status();
        if status == StatusCode::SWITCHING_PROTOCOLS {
            if let Some(downstream) = downstream {
                let upstream = hyper::upgrade::on(&mut resp);
                tokio::spawn(async move {
                    let (Ok(down), Ok(up)) = tokio::join!(downstream, upstream) else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(
                        &mut TokioIo::new(down),
                        &mut TokioIo::new(up),
                    )
                    .await;
                });
            }
            return Ok(resp.map(Body::new));
        }
        if !status.is_success() {
            let body = resp.into_body().collect().await.map(|b| b.to_bytes());
            let text = body
                .map(|b| String::from_utf8_lossy(&b[..b.len().min(MAX_ERROR_BODY)]).into_owned())
                .unwrap_or_default();
            return Err(location::kubelet_error(status.as_u16(), &text));
        }
        let mut r = resp.map(Body::new);
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

fn is_credential(name: &header::HeaderName) -> bool {
    name == header::AUTHORIZATION
        || name == header::PROXY_AUTHORIZATION
        || name == header::COOKIE
        || name.as_str().starts_with("impersonate-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_not_forwarded() {
        assert!(is_credential(&header::AUTHORIZATION));
        assert!(is_credential(&header::HeaderName::from_static(
            "impersonate-user"
        )));
        assert!(!is_credential(&header::UPGRADE));
        assert!(!is_credential(&header::HeaderName::from_static(
            "x-stream-protocol-version"
        )));
    }
}
