//! The accept loop behind every HTTP and HTTPS listener ([`serve`]).
//!
//! # Guarantees
//! - A failed `accept` (file descriptors exhausted, say) is retried after a wait that
//!   doubles from 5 ms up to 1 s and starts over after a success, as Go's `net/http`
//!   server does: the loop neither spins nor gives up.
//! - On `stop` the listener is closed at once (new connections are refused), open
//!   connections finish their requests (HTTP/1 connections close after the current one,
//!   HTTP/2 ones get a GOAWAY) for at most `Limits::drain`, and the rest are closed; a TLS
//!   handshake in progress is abandoned.
//! - HTTP/1.1, HTTP/2 (by ALPN, or with prior knowledge on plain HTTP) and protocol
//!   upgrades (WebSocket, SPDY) are served on every listener alike.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::{PeerAddr, PeerCertificates};

/// What one server allows its clients (the same for the API server, the kubelet and the
/// ingress).
///
/// # Guarantees
/// - A connection that has not finished its TLS handshake after `handshake_timeout` is
///   closed (half-open and slow clients cost a task each, for that long at most).
/// - A connection that sends nothing for `header_read_timeout` after its handshake (after
///   it is accepted, on plain HTTP) is closed (HTTP/1 and HTTP/2 alike).
/// - An HTTP/1 connection that sends no complete request header for `header_read_timeout`
///   (idle keep-alive included) is closed; an HTTP/2 connection whose peer stops answering
///   pings (`keepalive` interval, then as long again) is closed.
/// - At most `max_connections` connections are open; beyond that new ones are closed at
///   once, so open connections cannot exhaust memory or file descriptors.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long a client may take to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// How long a connection may wait before sending a request header.
    pub header_read_timeout: Duration,
    /// The HTTP/2 keep-alive ping interval.
    pub keepalive: Duration,
    /// The most connections served at once.
    pub max_connections: usize,
    /// Concurrent streams per HTTP/2 connection (kube-apiserver's
    /// `--http2-max-streams-per-connection` is 1000; clients multiplex their watches).
    pub http2_max_streams: u32,
    /// How long open connections may finish after `stop` before they are closed.
    pub drain: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            keepalive: Duration::from_secs(30),
            max_connections: 8192,
            http2_max_streams: 1000,
            drain: Duration::from_secs(5),
        }
    }
}

/// What a listener speaks.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Plain HTTP.
    Plain,
    /// HTTPS with this configuration: its verifier checks client certificates and its
    /// resolver picks the serving certificate in each handshake.
    Tls(Arc<rustls::ServerConfig>),
}

impl From<rustls::ServerConfig> for Transport {
    fn from(config: rustls::ServerConfig) -> Transport {
        Transport::Tls(Arc::new(config))
    }
}

/// The waits between failed `accept`s in a row: 5 ms, doubling up to 1 s (Go's `net/http`).
#[derive(Debug, Default)]
struct AcceptBackoff {
    last: Option<Duration>,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    /// The wait after one more failure.
    fn failed(&mut self) -> Duration {
        let wait = self.last.map_or(Self::FIRST, |d| (d * 2).min(Self::MAX));
        self.last = Some(wait);
        wait
    }

    /// A connection came: the next failure waits the shortest time again.
    fn accepted(&mut self) {
        self.last = None;
    }
}

/// Where connections come from (a [`TcpListener`]; in tests, one that fails on demand).
trait Accept: Send {
    fn accept(&mut self) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + Send;
}

impl Accept for TcpListener {
    fn accept(&mut self) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + Send {
        TcpListener::accept(&*self)
    }
}

/// Serves `app` on `listener` with `transport` until `stop` (see the module's guarantees).
/// `what` names the server in logs.
pub async fn serve(
    listener: TcpListener,
    transport: impl Into<Transport>,
    app: Router,
    stop: CancellationToken,
    limits: &Limits,
    what: &'static str,
) {
    accept_loop(listener, transport.into(), app, stop, limits, what).await;
}

async fn accept_loop(
    mut listener: impl Accept,
    transport: Transport,
    app: Router,
    stop: CancellationToken,
    limits: &Limits,
    what: &'static str,
) {
    let acceptor = match transport {
        Transport::Plain => None,
        Transport::Tls(config) => Some(tokio_rustls::TlsAcceptor::from(config)),
    };
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut conns = tokio::task::JoinSet::new();
    let mut backoff = AcceptBackoff::default();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff.accepted();
                    a
                }
                Err(e) => {
                    let wait = backoff.failed();
                    tracing::warn!(server = what, error = %e, retry_in = ?wait, "accepting a connection");
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(wait) => continue,
                    }
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::debug!(server = what, %peer, max = limits.max_connections, "too many connections; closing a new one");
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let conn = Connection {
            peer,
            app: app.clone(),
            limits: limits.clone(),
            watcher: graceful.watcher(),
            what,
        };
        let acceptor = acceptor.clone();
        let stop = stop.clone();
        conns.spawn(async move {
            let _permit = permit;
            let Some(acceptor) = acceptor else {
                return conn.serve(tcp, PeerCertificates::default()).await;
            };
            let tls = tokio::select! {
                _ = stop.cancelled() => return,
                r = tokio::time::timeout(conn.limits.handshake_timeout, acceptor.accept(tcp)) => match r {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(server = what, %peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(server = what, %peer, "TLS handshake timed out");
                        return;
                    }
                },
            };
            let chain = PeerCertificates(Arc::new(
                tls.get_ref()
                    .1
                    .peer_certificates()
                    .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                    .unwrap_or_default(),
            ));
            conn.serve(tls, chain).await;
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(server = what, drain = ?limits.drain, "open connections did not drain; closing them");
    }
    conns.abort_all();
}

/// One accepted connection, served after its handshake (if any).
struct Connection {
    peer: SocketAddr,
    app: Router,
    limits: Limits,
    watcher: Watcher,
    what: &'static str,
}

impl Connection {
    /// Serves HTTP on `io` until the client or the graceful shutdown ends it.
    async fn serve<I>(self, io: I, chain: PeerCertificates)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            peer,
            app,
            limits,
            watcher,
            what,
        } = self;
        let service =
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(chain.clone());
                req.extensions_mut().insert(PeerAddr(peer));
                app.clone().oneshot(req.map(axum::body::Body::new))
            });
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.http2_max_streams)
            .keep_alive_interval(limits.keepalive)
            .keep_alive_timeout(limits.keepalive);
        // hyper waits for the first bytes (HTTP/1 or the HTTP/2 preface) without a
        // timeout of its own: a client silent after its handshake is closed here.
        let (first, spoke) = tokio::sync::oneshot::channel();
        let io = FirstBytes {
            io,
            first: Some(first),
        };
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        let silent = async {
            match tokio::time::timeout(limits.header_read_timeout, spoke).await {
                Err(_) => {}
                Ok(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = watcher.watch(conn.into_owned()) => if let Err(e) = r {
                tracing::debug!(server = what, %peer, error = %e, "connection ended");
            },
            () = silent => {
                tracing::debug!(server = what, %peer, "no request after the connection opened; closing");
            }
        }
    }
}

/// The connection's I/O, reporting the first bytes the client sends.
struct FirstBytes<I> {
    io: I,
    first: Option<tokio::sync::oneshot::Sender<()>>,
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for FirstBytes<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            if let Some(first) = self.first.take() {
                let _ = first.send(());
            }
        }
        polled
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for FirstBytes<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
