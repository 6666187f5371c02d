//! A minimal HTTPS client for the join: one request per connection (HTTP/1.1 over rustls),
//! trusting either a given CA or, only to download `/cacerts` before the token's hash is
//! checked, any certificate.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// How long one request may take, connection included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a `--server` URL or an address cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// An IPv6 literal without its `]`.
    #[error("unclosed '['")]
    UnclosedBracket,
    /// A port that is not a number in range (given).
    #[error("invalid port {0:?}")]
    Port(String),
    /// An empty host.
    #[error("no host")]
    NoHost,
    /// A `--server` (given) that is not `https://host:port`.
    #[error("--server {0:?}: expected https://host:port")]
    NotHttps(String),
    /// A `--server` (given) with a bad address (why).
    #[error("--server {0:?}: {1}")]
    Server(String, Box<AddressError>),
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// No answer within the time given.
    #[error("no answer in {0:?}")]
    Timeout(Duration),
    /// The host (given) is not a DNS name or IP.
    #[error("server name {0:?}: {1}")]
    ServerName(String, rustls::pki_types::InvalidDnsNameError),
    /// The TCP connection failed.
    #[error("connecting: {0}")]
    Connect(std::io::Error),
    /// The TLS handshake failed.
    #[error("TLS: {0}")]
    Tls(std::io::Error),
    /// The HTTP exchange failed.
    #[error("HTTP: {0}")]
    Http(hyper::Error),
    /// The request could not be built.
    #[error("building the request: {0}")]
    Build(hyper::http::Error),
    /// Reading the answer failed.
    #[error("reading the answer: {0}")]
    Body(hyper::Error),
    /// rustls refused the client configuration.
    #[error("{0}")]
    Rustls(rustls::Error),
    /// The cluster CA is unusable (why).
    #[error("the cluster CA: {0}")]
    Ca(String),
}

/// Whom to trust.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Any certificate: only for `/cacerts`, whose content the caller checks against the token.
    Any,
    /// Certificates signed by this CA (PEM).
    Ca(Vec<u8>),
}

/// `https://host[:port][/]`, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// The host (an IPv6 literal without brackets).
    pub host: String,
    /// The port (443 when not given).
    pub port: u16,
}

impl ServerUrl {
    /// Parses the `--server` URL (port 6443 when none is given).
    pub fn parse(url: &str) -> Result<ServerUrl, AddressError> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| AddressError::NotHttps(url.to_string()))?;
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(AddressError::NotHttps(url.to_string()));
        }
        let (host, port) = host_port(authority, 6443)
            .map_err(|e| AddressError::Server(url.to_string(), Box::new(e)))?;
        Ok(ServerUrl { host, port })
    }
}

/// `host[:port]` or `[v6][:port]` → (host, port), `default_port` when none is given.
pub fn host_port(authority: &str, default_port: u16) -> Result<(String, u16), AddressError> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or(AddressError::UnclosedBracket)?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| AddressError::Port(p.to_string()))?,
        None => default_port,
    };
    if host.is_empty() {
        return Err(AddressError::NoHost);
    }
    Ok((host, port))
}

/// A response: status and body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

/// Sends one request. `Err` is a transport failure (connect, TLS, timeout), with the reason.
pub async fn request(
    server: &ServerUrl,
    trust: &Trust,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<Vec<u8>>,
) -> Result<Reply, RequestError> {
    tokio::time::timeout(
        REQUEST_TIMEOUT,
        send(server, trust, method, path, authorization, body),
    )
    .await
    .map_err(|_| RequestError::Timeout(REQUEST_TIMEOUT))?
}

async fn send(
    server: &ServerUrl,
    trust: &Trust,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<Vec<u8>>,
) -> Result<Reply, RequestError> {
    let config = client_config(trust)?;
    let name = ServerName::try_from(server.host.clone())
        .map_err(|e| RequestError::ServerName(server.host.clone(), e))?;
    let tcp = tokio::net::TcpStream::connect((server.host.as_str(), server.port))
        .await
        .map_err(RequestError::Connect)?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(RequestError::Tls)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(RequestError::Http)?;
    let conn = tokio::spawn(conn);
    let mut req = hyper::Request::builder().method(method).uri(path).header(
        hyper::header::HOST,
        format!("{}:{}", server.host, server.port),
    );
    if let Some(a) = authorization {
        req = req.header(hyper::header::AUTHORIZATION, a);
    }
    if body.is_some() {
        req = req.header(hyper::header::CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(RequestError::Build)?;
    let resp = sender.send_request(req).await.map_err(RequestError::Http)?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(RequestError::Body)?
        .to_bytes()
        .to_vec();
    conn.abort();
    Ok(Reply { status, body })
}

fn client_config(trust: &Trust) -> Result<rustls::ClientConfig, RequestError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(RequestError::Rustls)?;
    let config = match trust {
        Trust::Any => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth(),
        Trust::Ca(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| RequestError::Ca(e.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|e| RequestError::Ca(e.to_string()))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(config)
}

/// Accepts any server certificate (signatures are still checked, so the handshake is sound).
#[derive(Debug)]
pub struct AcceptAny(Arc<CryptoProvider>);

impl AcceptAny {
    /// A verifier accepting any certificate, checking signatures with `provider`.
    pub fn new(provider: Arc<CryptoProvider>) -> AcceptAny {
        AcceptAny(provider)
    }
}

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_server_urls() {
        let u = |s: &str| ServerUrl::parse(s);
        assert_eq!(
            u("https://10.0.0.1:6443").unwrap(),
            ServerUrl {
                host: "10.0.0.1".into(),
                port: 6443
            }
        );
        assert_eq!(u("https://k3rs.example/").unwrap().port, 6443);
        assert_eq!(u("https://[::1]:7443").unwrap().host, "::1");
        // The messages users see on the command line.
        let e = |s: &str| u(s).unwrap_err().to_string();
        assert_eq!(
            e("http://10.0.0.1:6443"),
            "--server \"http://10.0.0.1:6443\": expected https://host:port"
        );
        assert_eq!(
            e("https://10.0.0.1:x"),
            "--server \"https://10.0.0.1:x\": invalid port \"x\""
        );
        assert_eq!(
            e("https://[::1:1"),
            "--server \"https://[::1:1\": unclosed '['"
        );
        assert_eq!(e("https://:1"), "--server \"https://:1\": no host");
        assert!(matches!(
            u("https://h:1/path"),
            Err(AddressError::NotHttps(_))
        ));
        assert!(matches!(u("https://"), Err(AddressError::NotHttps(_))));
    }
}
