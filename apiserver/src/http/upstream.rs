//! Carrying a client's request to another HTTPS server (a kubelet, an extension API server):
//! dialing with a bounded timeout, then one HTTP/1.1 exchange that passes the method, the
//! headers other than the client's credentials, and the body through, and answers with the
//! upstream's response as a stream.
//!
//! # Guarantees
//! - The client's credentials (`Authorization`, cookies, `Impersonate-*`) and any
//!   `X-Remote-*` identity headers never reach the upstream; the caller adds what the upstream
//!   must see (e.g. the front proxy's `X-Remote-User`).
//! - A `101 Switching Protocols` splices the client's upgraded connection with the upstream's,
//!   byte for byte both ways, until either side closes (SPDY or WebSocket alike).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

/// How long dialing an upstream (TCP + TLS) may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why no TLS connection was made.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The name to verify is not a DNS name or IP.
    #[error("{0}")]
    ServerName(#[from] rustls::pki_types::InvalidDnsNameError),
    /// Connecting or the handshake failed.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// Nothing within the dial timeout.
    #[error("no connection within {DIAL_TIMEOUT:?}")]
    Timeout,
}

/// A TLS connection to an upstream.
pub type Connection = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// Connects to `host:port` and verifies its certificate for `server_name`.
pub async fn dial(
    tls: Arc<rustls::ClientConfig>,
    host: &str,
    port: u16,
    server_name: &str,
) -> Result<Connection, DialError> {
    let name = ServerName::try_from(server_name.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(tls);
    let host = host.to_string();
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

/// `host:port` as a `Host` header (IPv6 literals bracketed).
pub fn host_header(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Sends `req` over `conn` to `path_and_query` with `Host: host` and the headers `extra`
/// added, and answers with the upstream's response (its body streamed).
pub async fn exchange(
    conn: Connection,
    host: &str,
    path_and_query: &str,
    mut req: Request,
    extra: HeaderMap,
) -> Result<Response, hyper::Error> {
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(conn)).await?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
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
    let mut out = out.header(header::HOST, host);
    if let Some(headers) = out.headers_mut() {
        for (name, value) in &extra {
            headers.append(name, value.clone());
        }
    }
    let downstream = upgrade.then(|| hyper::upgrade::on(&mut req));
    let body = if upgrade {
        Body::empty()
    } else {
        std::mem::take(req.body_mut())
    };
    // The builder's parts are all valid already (method, path and headers came parsed).
    let out = out.body(body).unwrap_or_default();
    let mut resp = sender.send_request(out).await?;
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        if let Some(downstream) = downstream {
            let upstream = hyper::upgrade::on(&mut resp);
            tokio::spawn(async move {
                let (Ok(down), Ok(up)) = tokio::join!(downstream, upstream) else {
                    return;
                };
                let _ =
                    tokio::io::copy_bidirectional(&mut TokioIo::new(down), &mut TokioIo::new(up))
                        .await;
            });
        }
    }
    Ok(resp.map(Body::new))
}

/// Headers that carry the client's own credentials or identity.
fn is_credential(name: &header::HeaderName) -> bool {
    name == header::AUTHORIZATION
        || name == header::PROXY_AUTHORIZATION
        || name == header::COOKIE
        || name.as_str().starts_with("impersonate-")
        || name.as_str().starts_with("x-remote-")
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
        assert!(is_credential(&header::HeaderName::from_static(
            "x-remote-user"
        )));
        assert!(is_credential(&header::HeaderName::from_static(
            "x-remote-extra-scopes"
        )));
        assert!(!is_credential(&header::UPGRADE));
        assert!(!is_credential(&header::HeaderName::from_static(
            "x-stream-protocol-version"
        )));
    }

    #[test]
    fn host_headers() {
        assert_eq!(host_header("10.0.0.1", 443), "10.0.0.1:443");
        assert_eq!(host_header("fd00::1", 10250), "[fd00::1]:10250");
    }
}
