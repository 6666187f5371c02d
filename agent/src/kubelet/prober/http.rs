//! The HTTP GET of httpGet probes and lifecycle hooks: HTTP/1.1 over TCP, or over TLS without
//! verifying the server's certificate (as upstream's prober), `User-Agent: kube-probe/1.32` and
//! `Accept: */*` unless the probe sets them. Only the status line is read.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where a GET goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Target {
    /// `host:port`, bracketing IPv6 addresses.
    pub fn authority(&self) -> String {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{}]:{}", self.host, self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }

    /// The URL, as upstream's messages show it.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        let path = if self.path.starts_with('/') {
            self.path.clone()
        } else {
            format!("/{}", self.path)
        };
        format!("{scheme}://{}{path}", self.authority())
    }

    /// The request bytes.
    pub fn request(&self) -> String {
        let path = if self.path.starts_with('/') {
            self.path.clone()
        } else {
            format!("/{}", self.path)
        };
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        let mut r = format!("GET {path} HTTP/1.1\r\n");
        if !has("host") {
            r.push_str(&format!("Host: {}\r\n", self.authority()));
        }
        if !has("user-agent") {
            r.push_str("User-Agent: kube-probe/1.32\r\n");
        }
        if !has("accept") {
            r.push_str("Accept: */*\r\n");
        }
        for (k, v) in &self.headers {
            r.push_str(&format!("{k}: {v}\r\n"));
        }
        r.push_str("Connection: close\r\n\r\n");
        r
    }
}

/// The status code of a response's status line (`HTTP/1.1 200 OK`).
pub fn status_code(head: &[u8]) -> Option<u16> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    let code = parts.next()?;
    (code.len() == 3).then(|| code.parse().ok())?
}

/// Why a probe's GET has no status code.
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    /// The connection was refused or failed (`authority` is `host:port`).
    #[error("dial tcp {authority}: {source}")]
    Dial {
        /// Where.
        authority: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing the request or reading the answer (or the TLS handshake) failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The host is not a DNS name or IP (https).
    #[error("{0}")]
    ServerName(#[from] rustls::pki_types::InvalidDnsNameError),
    /// rustls refused the client configuration.
    #[error("{0}")]
    Tls(#[from] rustls::Error),
    /// The answer does not start with an HTTP status line.
    #[error("malformed HTTP response")]
    Malformed,
    /// No answer within the probe's timeout.
    #[error("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")]
    Timeout,
}

/// A failed GET in Go's wording: `Get "<url>": <error>`.
#[derive(Debug, thiserror::Error)]
#[error("Get \"{url}\": {source}")]
pub struct GetFailure {
    /// The URL.
    pub url: String,
    /// Why.
    #[source]
    pub source: GetError,
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    request: &str,
) -> Result<u16, GetError> {
    s.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.contains(&b'\n') && head.len() < 10 * 1024 {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    status_code(&head).ok_or(GetError::Malformed)
}

/// GETs `t` within `timeout`: the status code, or why there is none.
pub async fn get(t: &Target, timeout: Duration) -> Result<u16, GetFailure> {
    let fail = |source: GetError| GetFailure {
        url: t.url(),
        source,
    };
    let run = async {
        let authority = t.authority();
        let tcp = TcpStream::connect(&authority)
            .await
            .map_err(|source| GetError::Dial {
                authority: authority.clone(),
                source,
            })?;
        if !t.https {
            return exchange(tcp, &t.request()).await;
        }
        let name = rustls::pki_types::ServerName::try_from(t.host.clone())?;
        let tls = tokio_rustls::TlsConnector::from(insecure_config()?)
            .connect(name, tcp)
            .await?;
        exchange(tls, &t.request()).await
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(r) => r.map_err(fail),
        Err(_) => Err(fail(GetError::Timeout)),
    }
}

fn insecure_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts any server certificate (probes do not verify, like upstream's).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            https: false,
            host: "10.42.0.5".into(),
            port: 8080,
            path: "healthz".into(),
            headers: vec![("X-Probe".into(), "1".into())],
        }
    }

    #[test]
    fn the_request_carries_upstreams_default_headers() {
        assert_eq!(
            target().request(),
            "GET /healthz HTTP/1.1\r\nHost: 10.42.0.5:8080\r\nUser-Agent: kube-probe/1.32\r\n\
             Accept: */*\r\nX-Probe: 1\r\nConnection: close\r\n\r\n"
        );
        let mut t = target();
        t.headers = vec![("host".into(), "example".into())];
        t.host = "fd00::5".into();
        t.https = true;
        assert_eq!(t.url(), "https://[fd00::5]:8080/healthz");
        assert_eq!(
            t.request(),
            "GET /healthz HTTP/1.1\r\nUser-Agent: kube-probe/1.32\r\nAccept: */*\r\n\
             host: example\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn the_status_line_gives_the_code() {
        assert_eq!(
            status_code(b"HTTP/1.1 404 Not Found\r\nA: b\r\n"),
            Some(404)
        );
        assert_eq!(status_code(b"HTTP/1.0 200\r\n"), Some(200));
        assert_eq!(status_code(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status_code(b"HTTP/1.1 20x OK\r\n"), None);
        assert_eq!(status_code(b""), None);
    }

    #[tokio::test]
    async fn a_get_reads_the_status_of_a_real_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            s.write_all(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
                .await
                .unwrap();
            String::from_utf8_lossy(&buf[..n]).to_string()
        });
        let mut t = target();
        t.host = "127.0.0.1".into();
        t.port = port;
        assert_eq!(get(&t, Duration::from_secs(5)).await.ok(), Some(503));
        assert!(server
            .await
            .unwrap()
            .starts_with("GET /healthz HTTP/1.1\r\n"));
        let err = get(&t, Duration::from_secs(5))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "Get \"http://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: "
            )),
            "{err}"
        );
    }
}
