//! HTTPS serving for the API server and the kubelet: tokio-rustls + hyper-util, one task per
//! connection, bounded by [`Limits`]. The client certificate chain of each connection
//! (verified against the client CA during the handshake) is put into every request's
//! extensions as [`PeerCertificates`], for authentication, and its address as [`PeerAddr`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The verified client certificate chain of the connection (empty when none was presented).
#[derive(Debug, Clone, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// The connection's remote address.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// TLS setup failures.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file (named) does not parse.
    #[error("reading {path}: {source}")]
    Pem {
        /// The file.
        path: String,
        /// The parser's error.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// rustls refused the configuration (why).
    #[error("tls configuration: {0}")]
    Config(String),
}

/// The PEM certificates in a file, in order.
pub fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem {
        path: path.display().to_string(),
        source,
    };
    CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)
}

/// Server TLS: the serving certificate; client certificates optional, but verified against
/// `client_ca` when presented. ALPN h2 and http/1.1.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: &Path,
) -> Result<rustls::ServerConfig, TlsError> {
    server_config_for(cert, key, &[client_ca])
}

/// [`server_config`] accepting client certificates from any of `client_cas` (the client CA
/// and the request-header CA; the authenticators tell them apart).
pub fn server_config_for(
    cert: &Path,
    key: &Path,
    client_cas: &[&Path],
) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = client_verifier_for(client_cas, provider.clone())?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Pem {
        path: key.display().to_string(),
        source,
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(cert)?, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The client-certificate verifier of [`server_config`]: a presented certificate must chain
/// to `client_ca`; none at all is allowed (the request is then anonymous or uses a token).
pub fn client_verifier(
    client_ca: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    client_verifier_for(&[client_ca], provider)
}

/// [`client_verifier`] for certificates of any of `cas`.
pub fn client_verifier_for(
    cas: &[&Path],
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for path in cas {
        for ca in certs(path)? {
            roots
                .add(ca)
                .map_err(|e| TlsError::Config(format!("client CA {}: {e}", path.display())))?;
        }
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))
}

/// What one HTTPS server allows its clients (the same for the API server and the kubelet).
///
/// # Guarantees
/// - A connection that has not finished its TLS handshake after `handshake_timeout` is
///   closed (half-open and slow clients cost a task each, for that long at most).
/// - A connection that sends nothing for `header_read_timeout` after its handshake is
///   closed (HTTP/1 and HTTP/2 alike).
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

/// Accepts connections until `stop`, then lets open connections finish for `limits.drain`
/// and closes the rest. `what` names the server in logs.
pub async fn serve(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    app: Router,
    stop: CancellationToken,
    limits: &Limits,
    what: &'static str,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(server = what, error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
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
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        let stop = stop.clone();
        let limits = limits.clone();
        conns.spawn(async move {
            let _permit = permit;
            let tls = tokio::select! {
                _ = stop.cancelled() => return,
                r = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)) => match r {
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
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(chain.clone());
                    req.extensions_mut().insert(PeerAddr(peer));
                    app.clone().oneshot(req.map(axum::body::Body::new))
                },
            );
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
                io: tls,
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
                    tracing::debug!(server = what, %peer, "no request after the TLS handshake; closing");
                }
            }
        });
    }
    if tokio::time::timeout(limits.drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(server = what, drain = ?limits.drain, "open connections did not drain; closing them");
    }
    conns.abort_all();
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
