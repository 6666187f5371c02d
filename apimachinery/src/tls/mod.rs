//! HTTP and HTTPS serving for the API server, the kubelet, the supervisor and the ingress
//! ([`serve`]): one accept loop, tokio-rustls + hyper-util, one task per connection, bounded
//! by [`Limits`]. The client certificate chain of each connection (verified against the client
//! CA during the handshake) is put into every request's extensions as [`PeerCertificates`],
//! for authentication, and its address as [`PeerAddr`].
//!
//! The server configurations here ([`server_config`], [`server_config_with_resolver`]) all
//! use the ring provider, the safe default protocol versions and ALPN `h2`, `http/1.1`.

mod serve;

pub use serve::{serve, Limits, Transport};

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ResolvesServerCert;

/// The verified client certificate chain of the connection (empty when none was presented,
/// and on plain HTTP).
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
    let config = builder(provider)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(cert)?, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(with_alpn(config))
}

/// Server TLS whose certificate `resolver` picks per handshake (by SNI, say); no client
/// certificates are asked for.
pub fn server_config_with_resolver(
    resolver: Arc<dyn ResolvesServerCert>,
) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = builder(provider)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    Ok(with_alpn(config))
}

/// The start of every server configuration here: `provider`, safe protocol versions.
fn builder(
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<rustls::ConfigBuilder<rustls::ServerConfig, rustls::WantsVerifier>, TlsError> {
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))
}

/// `config` offering HTTP/2 and HTTP/1.1 by ALPN.
fn with_alpn(mut config: rustls::ServerConfig) -> rustls::ServerConfig {
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
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
