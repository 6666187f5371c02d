//! HTTPS serving: tokio-rustls + hyper-util, one task per connection. The client certificate
//! chain of each connection (verified against the client CA during the handshake) is put into
//! every request's extensions as [`PeerCertificates`], for authentication.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Concurrent streams per HTTP/2 connection.
const HTTP2_MAX_STREAMS: u32 = 1000;

/// The verified client certificate chain of the connection (empty when none was presented).
#[derive(Debug, Clone, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// The connection's remote address.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// TLS setup failures.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Pem {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
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

/// Accepts connections until `stop`, then lets open connections finish for `drain` and
/// closes the rest.
pub async fn serve(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    app: Router,
    stop: CancellationToken,
    drain: Duration,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let graceful = GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an API connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        let stop = stop.clone();
        tokio::spawn(async move {
            let tls = tokio::select! {
                _ = stop.cancelled() => return,
                r = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)) => match r {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
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
            // Clients multiplex their watches on one HTTP/2 connection (kube-apiserver's
            // --http2-max-streams-per-connection is 1000; hyper's default is 200).
            builder.http2().max_concurrent_streams(HTTP2_MAX_STREAMS);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%peer, error = %e, "API connection ended");
            }
        });
    }
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("open API connections did not drain in {drain:?}; closing them");
    }
}
