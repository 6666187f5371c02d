//! Serving one request: find its backend in the current [`Table`], forward it over HTTP/1.1
//! to the next endpoint, and relay the answer; upgrades (WebSocket) become a byte tunnel.
//!
//! Guarantees:
//! - The table is read once per request: a new table applies to the next request; requests
//!   and tunnels in flight keep the backend they chose.
//! - No route: 404. A route whose backend is unavailable: 503 with the reason. An endpoint
//!   that cannot be reached: 502. Never a panic.
//! - The backend sees the client's `Host` (HTTP/2's `:authority` becomes `Host`), the path and
//!   query as sent, and `X-Forwarded-For` (the client's address), `X-Forwarded-Proto`,
//!   `X-Forwarded-Host` and `X-Forwarded-Port` set by the proxy (values a client sent are
//!   replaced, not trusted). Hop-by-hop headers are dropped both ways, except `Connection:
//!   upgrade` and `Upgrade` on an upgrade request, which go through, as does the 101 answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::table::{Table, Target};

/// How long connecting to an endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Hop-by-hop headers (RFC 9110 §7.6.1), never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

/// The proxy shared by every connection of one listener.
#[derive(Clone)]
pub struct Proxy {
    /// The current routing table (each request reads the latest).
    pub table: watch::Receiver<Arc<Table>>,
    /// `http` or `https`: what `X-Forwarded-Proto` says.
    pub scheme: &'static str,
    /// The listening port (`X-Forwarded-Port`).
    pub port: u16,
    /// Cancels the upgraded tunnels when the agent stops.
    pub stop: CancellationToken,
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(Body::from(body + "\n"));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The request's host, lower case, without a port: `Host`, else the URI's authority.
pub fn request_host<B>(req: &Request<B>) -> Option<String> {
    let raw = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))?;
    let host = match raw.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
        None => raw.split(':').next().unwrap_or_default().to_string(),
    };
    Some(host.to_ascii_lowercase())
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Drops the hop-by-hop headers and those `Connection` names; keeps the upgrade pair when
/// `upgrade`.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for h in HOP_BY_HOP {
        headers.remove(h);
    }
    for h in named {
        if h != header::UPGRADE {
            headers.remove(h);
        }
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    } else {
        headers.remove(header::UPGRADE);
    }
}

impl Proxy {
    /// Serves `req` from client `peer`.
    pub async fn handle(&self, mut req: Request<Body>, peer: SocketAddr) -> Response<Body> {
        let Some(host) = request_host(&req) else {
            return text(StatusCode::BAD_REQUEST, "no host in the request".into());
        };
        let table = self.table.borrow().clone();
        let Some(backend) = table.backend(&host, req.uri().path()).cloned() else {
            return text(StatusCode::NOT_FOUND, "404 page not found".into());
        };
        drop(table);
        let Some(endpoint) = backend.pick() else {
            let why = match &backend.target {
                Target::Unavailable(why) => why.clone(),
                Target::Endpoints(_) => "no endpoints".into(),
            };
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("503 service unavailable: {why}"),
            );
        };
        let upgrade = req.version() == Version::HTTP_11 && is_upgrade(req.headers());
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        self.rewrite(&mut req, &host, peer, upgrade);
        match self.forward(req, endpoint).await {
            Ok(mut resp) => {
                if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
                    if let Some(client) = client_upgrade {
                        let backend_side = hyper::upgrade::on(&mut resp);
                        tokio::spawn(tunnel(client, backend_side, self.stop.clone()));
                    }
                } else {
                    strip_hop_by_hop(resp.headers_mut(), false);
                }
                resp.map(Body::new)
            }
            Err(why) => {
                tracing::debug!(ingress = %backend.ingress, %endpoint, error = %why, "ingress: backend failed");
                text(StatusCode::BAD_GATEWAY, format!("502 bad gateway: {why}"))
            }
        }
    }

    /// The request as the backend gets it (HTTP/1.1, origin-form URI, forwarded headers).
    fn rewrite(&self, req: &mut Request<Body>, host: &str, peer: SocketAddr, upgrade: bool) {
        let authority = req.headers().get(header::HOST).cloned().or_else(|| {
            req.uri()
                .authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        });
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_string();
        *req.uri_mut() = path.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
        *req.version_mut() = Version::HTTP_11;
        let headers = req.headers_mut();
        strip_hop_by_hop(headers, upgrade);
        if let Some(a) = authority {
            headers.insert(header::HOST, a);
        }
        let set = |headers: &mut HeaderMap, name: &'static str, value: String| {
            if let Ok(v) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), v);
            }
        };
        set(headers, "x-forwarded-for", peer.ip().to_string());
        set(headers, "x-forwarded-proto", self.scheme.to_string());
        set(headers, "x-forwarded-host", host.to_string());
        set(headers, "x-forwarded-port", self.port.to_string());
    }

    async fn forward(
        &self,
        req: Request<Body>,
        endpoint: SocketAddr,
    ) -> Result<Response<hyper::body::Incoming>, String> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(endpoint))
            .await
            .map_err(|_| format!("connecting to {endpoint}: timed out"))?
            .map_err(|e| format!("connecting to {endpoint}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("{endpoint}: {e}"))?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(%endpoint, error = %e, "ingress: backend connection ended");
            }
        });
        sender
            .send_request(req)
            .await
            .map_err(|e| format!("{endpoint}: {e}"))
    }
}

/// Copies bytes both ways between the upgraded client and backend connections until either
/// closes or the agent stops.
async fn tunnel(
    client: hyper::upgrade::OnUpgrade,
    backend: hyper::upgrade::OnUpgrade,
    stop: CancellationToken,
) {
    let (client, backend) = match tokio::try_join!(client, backend) {
        Ok(both) => both,
        Err(e) => {
            tracing::debug!(error = %e, "ingress: upgrade failed");
            return;
        }
    };
    let (mut client, mut backend) = (TokioIo::new(client), TokioIo::new(backend));
    tokio::select! {
        _ = stop.cancelled() => {}
        r = tokio::io::copy_bidirectional(&mut client, &mut backend) => if let Err(e) = r {
            tracing::debug!(error = %e, "ingress: tunnel ended");
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_comes_from_the_header_or_the_authority_without_port() {
        let r = Request::builder()
            .uri("/x")
            .header("host", "Web.Example.com:8080")
            .body(())
            .unwrap();
        assert_eq!(request_host(&r).as_deref(), Some("web.example.com"));
        let h2 = Request::builder()
            .uri("https://a.example.com/x")
            .body(())
            .unwrap();
        assert_eq!(request_host(&h2).as_deref(), Some("a.example.com"));
        let v6 = Request::builder()
            .uri("/")
            .header("host", "[::1]:80")
            .body(())
            .unwrap();
        assert_eq!(request_host(&v6).as_deref(), Some("::1"));
        let none = Request::builder().uri("/").body(()).unwrap();
        assert_eq!(request_host(&none), None);
    }

    #[test]
    fn hop_by_hop_headers_go_and_the_upgrade_pair_stays() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("Upgrade, X-Secret"));
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        assert!(is_upgrade(&h));
        let mut up = h.clone();
        strip_hop_by_hop(&mut up, true);
        let names = |h: &HeaderMap| {
            let mut n: Vec<String> = h.keys().map(|k| k.to_string()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&up), ["connection", "upgrade", "x-kept"]);
        assert_eq!(up["connection"], "upgrade");
        strip_hop_by_hop(&mut h, false);
        assert_eq!(names(&h), ["x-kept"]);
    }
}
