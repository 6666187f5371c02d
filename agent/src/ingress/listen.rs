//! The ingress listeners: one task per address, binding until it can (another process may
//! hold the port for a while) and serving until stopped, then draining open connections.
//! HTTPS goes through the shared TLS server ([`k3rs_apimachinery::tls::serve`]); plain HTTP
//! through the loop here, with the same shutdown behaviour.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use k3rs_apimachinery::tls::{Limits, PeerAddr};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

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

/// Serves HTTPS on `addr` with `tls` until `stop`.
pub async fn https(
    addr: SocketAddr,
    tls: rustls::ServerConfig,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
) {
    if let Some(listener) = bind(addr, &stop).await {
        k3rs_apimachinery::tls::serve(listener, tls, app, stop, &limits, "ingress-https").await;
    }
}

/// Serves plain HTTP on `addr` until `stop`, then lets open connections finish for
/// `limits.drain`.
pub async fn http(addr: SocketAddr, app: Router, limits: Limits, stop: CancellationToken) {
    let Some(listener) = bind(addr, &stop).await else {
        return;
    };
    let graceful = GracefulShutdown::new();
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "ingress: accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        if conns.len() >= limits.max_connections {
            tracing::debug!(%peer, "ingress: too many connections; closing a new one");
            continue;
        }
        let _ = tcp.set_nodelay(true);
        let app = app.clone();
        let service =
            hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(PeerAddr(peer));
                app.clone().oneshot(req.map(Body::new))
            });
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout);
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(tcp), service)
            .into_owned();
        let watcher = graceful.watcher();
        conns.spawn(async move {
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "ingress: connection ended");
            }
        });
    }
    if tokio::time::timeout(limits.drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(%addr, "ingress: open connections did not drain; closing them");
    }
    conns.abort_all();
}
