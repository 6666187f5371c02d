//! The ingress listeners: one task per address, binding until it can (another process may
//! hold the port for a while), then serving HTTP or HTTPS with the shared server
//! ([`k3rs_apimachinery::tls::serve`]) until stopped, draining open connections.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use k3rs_apimachinery::tls::{Limits, PeerAddr, Transport};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::proxy::Proxy;

/// How long to wait before trying a busy address again.
const BIND_RETRY: Duration = Duration::from_secs(5);

/// The router of one listener: every request goes to `proxy`.
pub fn router(proxy: Proxy) -> Router {
    Router::new().fallback_service(tower::service_fn(move |req: http::Request<Body>| {
        let proxy = proxy.clone();
        async move {
            let peer = req
                .extensions()
                .get::<PeerAddr>()
                .map(|p| p.0)
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            Ok::<_, std::convert::Infallible>(proxy.handle(req, peer).await)
        }
    }))
}

/// Binds `addr`, retrying while it is busy; `None` once `stop` is cancelled.
pub async fn bind(addr: SocketAddr, stop: &CancellationToken) -> Option<TcpListener> {
    loop {
        match TcpListener::bind(addr).await {
            Ok(l) => {
                tracing::info!(%addr, "ingress: listening");
                return Some(l);
            }
            Err(e) => tracing::warn!(%addr, error = %e, "ingress: cannot listen (retrying)"),
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(BIND_RETRY) => {}
        }
    }
}

/// Serves `app` on `addr` with `transport` until `stop`, through the shared server
/// ([`k3rs_apimachinery::tls::serve`]: its limits, accept backoff and drain).
pub async fn serve(
    addr: SocketAddr,
    transport: Transport,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
) {
    let what = match transport {
        Transport::Plain => "ingress-http",
        Transport::Tls(_) => "ingress-https",
    };
    if let Some(listener) = bind(addr, &stop).await {
        k3rs_apimachinery::tls::serve(listener, transport, app, stop, &limits, what).await;
    }
}
