//! The webhooks' HTTP client, configured by a kubeconfig file as kube-apiserver's
//! (`clusters[].cluster`: `server`, `certificate-authority[-data]`,
//! `insecure-skip-tls-verify`, `tls-server-name`; `users[].user`: `client-certificate[-data]`,
//! `client-key[-data]`, `token`, `tokenFile`). The current context picks the cluster and
//! user; without one, the first of each. Relative file names are relative to the kubeconfig's
//! directory.
//!
//! The OIDC authenticator uses the same client for plain GETs of an `https` URL
//! ([`WebhookClient::for_url`], [`WebhookClient::get`]).
//!
//! # Guarantees
//! - Requests go to `server` exactly (its path included).
//! - One client keeps a pool of HTTP/1.1 keep-alive connections (idle ones closed after
//!   [`IDLE_TIMEOUT`]); its clones share it, so a webhook called again reuses a connection
//!   instead of a new TCP and TLS handshake.
//! - An answer's body larger than [`MAX_RESPONSE_BYTES`] is an error, read no further.
//! - Transport failures, `429` and `5xx` answers are retried with upstream's backoff
//!   (0.5 s, ×1.5, 5 attempts); any other non-2xx answer is an error at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Deserialize;

/// How long one attempt may take (upstream's webhook request timeout is 30 s).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// Upstream's `DefaultRequestRetry`: 500 ms, factor 1.5, 5 steps.
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The largest answer body read (an AdmissionReview with a patch of the largest storable
/// object, 1.5 MiB, base64-encoded, fits several times over; key sets and TokenReviews are
/// far smaller). kube-apiserver reads webhook answers unbounded; k3rs does not.
pub const MAX_RESPONSE_BYTES: usize = 10 << 20;
/// How long an idle pooled connection is kept (Go's `http.Transport` default).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle connections kept per endpoint.
const MAX_IDLE: usize = 8;

/// Why the kubeconfig could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The kubeconfig file could not be read.
    #[error("reading the webhook kubeconfig {path}: {source}")]
    Read {
        /// The kubeconfig's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig does not describe a usable client.
    #[error("the webhook kubeconfig {path}: {reason}")]
    Invalid {
        /// The kubeconfig's path.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        reason: ClientError,
    },
}

/// Why a client could not be built from a kubeconfig or URL.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig is not YAML of the expected shape.
    #[error("{0}")]
    Parse(#[source] serde_norway::Error),
    /// The kubeconfig names no cluster.
    #[error("no cluster")]
    NoCluster,
    /// The server is not an `http(s)://` URL.
    #[error("server {0:?}: expected an http(s) URL")]
    Scheme(String),
    /// The server URL's host or port is invalid.
    #[error("server {url:?}: {source}")]
    Address {
        /// The URL.
        url: String,
        /// What is wrong with its authority.
        #[source]
        source: k3rs_apimachinery::https::AddressError,
    },
    /// A file the kubeconfig names could not be read.
    #[error("reading {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// A `*-data` field is not base64.
    #[error("{what}: not base64: {source}")]
    Base64 {
        /// The field.
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: base64::DecodeError,
    },
    /// `tls-server-name` (or a service's name) is not a DNS name or IP.
    #[error("server name {name:?}: {source}")]
    ServerName {
        /// The name.
        name: String,
        /// Why it is invalid.
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// An https server without roots to verify it.
    #[error("an https server needs certificate-authority(-data) or insecure-skip-tls-verify")]
    NoRoots,
    /// An https URL for a client without a TLS configuration.
    #[error("{0:?}: https needs a TLS configuration")]
    NoTls(String),
    /// The TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
}

/// Why a TLS client configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// rustls refused the default protocol versions.
    #[error("{0}")]
    Versions(#[source] rustls::Error),
    /// The CA bundle is not PEM.
    #[error("certificate-authority: {0}")]
    CaPem(#[source] rustls::pki_types::pem::Error),
    /// A CA certificate was refused.
    #[error("certificate-authority: {0}")]
    CaCertificate(#[source] rustls::Error),
    /// The system trust store holds no usable certificate (the loader's errors, debug-printed).
    #[error("no trusted certificates in the system store ({0})")]
    NoSystemRoots(String),
    /// The client certificate chain is not PEM.
    #[error("client-certificate: {0}")]
    ClientCertificatePem(#[source] rustls::pki_types::pem::Error),
    /// The client key is not PEM.
    #[error("client-key: {0}")]
    ClientKeyPem(#[source] rustls::pki_types::pem::Error),
    /// rustls refused the client certificate and key.
    #[error("client certificate: {0}")]
    ClientCertificate(#[source] rustls::Error),
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Connecting, TLS, or sending the request failed, or it timed out (why).
    #[error("calling the webhook: {0}")]
    Transport(String),
    /// The webhook answered with a non-2xx status.
    #[error("the webhook answered {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The response body, as text.
        body: String,
    },
    /// The answer exceeded [`MAX_RESPONSE_BYTES`].
    #[error("the webhook's answer is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
}

impl CallError {
    fn retryable(&self) -> bool {
        match self {
            CallError::Transport(_) => true,
            CallError::Status { status, .. } => *status == 429 || *status >= 500,
            CallError::TooLarge => false,
        }
    }
}

/// The pooled HTTP(S) client of one endpoint.
type Pool =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Where and how to POST reviews; clones share the connection pool.
#[derive(Clone)]
pub struct WebhookClient {
    host: String,
    port: u16,
    path: String,
    https: bool,
    /// What an `https` server is checked against; the name overrides the URL's host.
    tls: Option<(Arc<rustls::ClientConfig>, Option<ServerName<'static>>)>,
    token: Option<String>,
    pool: Pool,
}

impl std::fmt::Debug for WebhookClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookClient")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default, rename = "current-context")]
    current_context: String,
}

#[derive(Debug, Default, Deserialize)]
struct NamedCluster {
    #[serde(default)]
    name: String,
    cluster: Cluster,
}

#[derive(Debug, Default, Deserialize)]
struct NamedUser {
    #[serde(default)]
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Debug, Default, Deserialize)]
struct NamedContext {
    #[serde(default)]
    name: String,
    context: Context,
}

#[derive(Debug, Default, Deserialize)]
struct Context {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    #[serde(default)]
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
}

impl WebhookClient {
    /// Reads the kubeconfig at `path`.
    pub fn load(path: &Path) -> Result<WebhookClient, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        WebhookClient::from_kubeconfig(&text, dir).map_err(|reason| ConfigError::Invalid {
            path: path.to_path_buf(),
            reason,
        })
    }

    /// The client a kubeconfig describes; `dir` anchors relative file names.
    pub fn from_kubeconfig(text: &str, dir: &Path) -> Result<WebhookClient, ClientError> {
        let kc: Kubeconfig = serde_norway::from_str(text).map_err(ClientError::Parse)?;
        let context = kc
            .contexts
            .iter()
            .find(|c| !kc.current_context.is_empty() && c.name == kc.current_context)
            .map(|c| &c.context);
        let cluster = match context {
            Some(c) => kc.clusters.iter().find(|n| n.name == c.cluster),
            None => kc.clusters.first(),
        }
        .map(|n| &n.cluster)
        .ok_or(ClientError::NoCluster)?;
        let default_user = User::default();
        let user = match context {
            Some(c) => kc.users.iter().find(|n| n.name == c.user).map(|n| &n.user),
            None => kc.users.first().map(|n| &n.user),
        }
        .unwrap_or(&default_user);
        let (https, host, port, path) = split_url(&cluster.server)?;
        let file = |p: &Path| {
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            };
            std::fs::read(&p).map_err(|source| ClientError::Read { path: p, source })
        };
        let data = |d: &str, what: &'static str| {
            B64.decode(d.trim())
                .map_err(|source| ClientError::Base64 { what, source })
        };
        let either = |f: &Option<PathBuf>, d: &Option<String>, what: &'static str| match (d, f) {
            (Some(d), _) => data(d, what).map(Some),
            (None, Some(f)) => file(f).map(Some),
            (None, None) => Ok(None),
        };
        let ca = either(
            &cluster.certificate_authority,
            &cluster.certificate_authority_data,
            "certificate-authority-data",
        )?;
        let cert = either(
            &user.client_certificate,
            &user.client_certificate_data,
            "client-certificate-data",
        )?;
        let key = either(&user.client_key, &user.client_key_data, "client-key-data")?;
        let token = match (&user.token, &user.token_file) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(f)) => Some(String::from_utf8_lossy(&file(f)?).trim().to_string()),
            (None, None) => None,
        };
        let tls = if https {
            let name = match &cluster.tls_server_name {
                Some(name) => Some(ServerName::try_from(name.clone()).map_err(|source| {
                    ClientError::ServerName {
                        name: name.clone(),
                        source,
                    }
                })?),
                None => None,
            };
            let roots = match (cluster.insecure_skip_tls_verify, ca.as_deref()) {
                (true, _) => Roots::Insecure,
                (false, Some(pem)) => Roots::Pem(pem),
                (false, None) => return Err(ClientError::NoRoots),
            };
            let config = tls_config(roots, cert.as_deref().zip(key.as_deref()))?;
            Some((Arc::new(config), name))
        } else {
            None
        };
        Ok(WebhookClient {
            pool: pool(tls.as_ref())?,
            host,
            port,
            path,
            https,
            tls,
            token,
        })
    }

    /// A client for `url` (no credentials); `tls` is required for an `https` URL.
    pub fn for_url(
        url: &str,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<WebhookClient, ClientError> {
        let (https, host, port, path) = split_url(url)?;
        let tls = match (https, tls) {
            (false, _) => None,
            (true, None) => return Err(ClientError::NoTls(url.to_string())),
            (true, Some(config)) => Some((config, None)),
        };
        Ok(WebhookClient {
            pool: pool(tls.as_ref())?,
            host,
            port,
            path,
            https,
            tls,
            token: None,
        })
    }

    /// The same client (its pool and credentials) for another URL: an `https` one is
    /// checked against the same roots.
    pub fn at(&self, url: &str) -> Result<WebhookClient, ClientError> {
        let (https, host, port, path) = split_url(url)?;
        if https && self.tls.is_none() {
            return Err(ClientError::NoTls(url.to_string()));
        }
        Ok(WebhookClient {
            host,
            port,
            path,
            https,
            ..self.clone()
        })
    }

    /// The same client verifying the server's certificate for `name` (a service's
    /// `<name>.<namespace>.svc`) while connecting to the URL's address (a new pool).
    pub fn with_server_name(mut self, name: &str) -> Result<WebhookClient, ClientError> {
        if let Some((_, n)) = &mut self.tls {
            *n = Some(ServerName::try_from(name.to_string()).map_err(|source| {
                ClientError::ServerName {
                    name: name.to_string(),
                    source,
                }
            })?);
            self.pool = pool(self.tls.as_ref())?;
        }
        Ok(self)
    }

    /// POSTs `body` (JSON) once, without retries (the caller bounds the time).
    pub async fn post_once(&self, body: &[u8]) -> Result<Vec<u8>, CallError> {
        self.send_once("POST", Some(body)).await
    }

    /// GETs the URL once (no retries) and returns the 2xx answer's body.
    pub async fn get(&self) -> Result<Vec<u8>, CallError> {
        match tokio::time::timeout(ATTEMPT_TIMEOUT, self.send_once("GET", None)).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Transport(format!(
                "no answer in {ATTEMPT_TIMEOUT:?}"
            ))),
        }
    }

    /// POSTs `body` (JSON) and returns the 2xx answer's body, retrying as upstream.
    pub async fn post(&self, body: &[u8]) -> Result<Vec<u8>, CallError> {
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            let result =
                match tokio::time::timeout(ATTEMPT_TIMEOUT, self.send_once("POST", Some(body)))
                    .await
                {
                    Ok(r) => r,
                    Err(_) => Err(CallError::Transport(format!(
                        "no answer in {ATTEMPT_TIMEOUT:?}"
                    ))),
                };
            match result {
                Err(e) if e.retryable() && attempt < ATTEMPTS => {
                    tracing::debug!(error = %e, attempt, "webhook call failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.mul_f64(1.5);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The URL requests go to.
    fn uri(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{host}:{}{}", self.port, self.path)
    }

    async fn send_once(&self, method: &str, body: Option<&[u8]>) -> Result<Vec<u8>, CallError> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(self.uri())
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::USER_AGENT, "k3rs-apiserver");
        if let Some(t) = &self.token {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
            .map_err(|e| CallError::Transport(format!("building the request: {e}")))?;
        let resp = self
            .pool
            .request(req)
            .await
            .map_err(|e| CallError::Transport(describe(&e)))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    CallError::TooLarge
                } else {
                    CallError::Transport(format!("HTTP: {e}"))
                }
            })?
            .to_bytes()
            .to_vec();
        if !(200..300).contains(&status) {
            let mut text = String::from_utf8_lossy(&body).into_owned();
            text.truncate(512);
            return Err(CallError::Status { status, body: text });
        }
        Ok(body)
    }
}

/// A pooled client for one endpoint: TLS with `tls` (roots and the certificate name) for
/// `https`, plain TCP for `http`.
fn pool(
    tls: Option<&(Arc<rustls::ClientConfig>, Option<ServerName<'static>>)>,
) -> Result<Pool, TlsConfigError> {
    let (config, name) = match tls {
        Some((config, name)) => (config.as_ref().clone(), name.clone()),
        // Never used for `http`; an `https` URL then fails its handshake.
        None => (tls_config(Roots::Pem(b""), None)?, None),
    };
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http();
    let builder = match name {
        Some(name) => {
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    let connector = builder.enable_http1().build();
    Ok(
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(MAX_IDLE)
            .build(connector),
    )
}

/// A client error with its causes (`connecting: …` when no connection was made).
fn describe(e: &hyper_util::client::legacy::Error) -> String {
    let mut out = if e.is_connect() { "connecting" } else { "HTTP" }.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = std::error::Error::source(c);
    }
    out
}

/// `http(s)://host[:port][/path]` → (https, host, port, path).
fn split_url(url: &str) -> Result<(bool, String, u16, String), ClientError> {
    let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(ClientError::Scheme(url.to_string()));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    let (host, port) = k3rs_apimachinery::https::host_port(authority, if https { 443 } else { 80 })
        .map_err(|source| ClientError::Address {
            url: url.to_string(),
            source,
        })?;
    Ok((https, host, port, path))
}

/// What an https client trusts.
#[derive(Debug, Clone, Copy)]
pub enum Roots<'a> {
    /// These PEM certificates.
    Pem(&'a [u8]),
    /// The operating system's trust store.
    System,
    /// Anything (`insecure-skip-tls-verify`).
    Insecure,
}

/// A TLS client configuration trusting `roots`, presenting `client` (PEM certificate chain
/// and key) when given.
pub fn tls_config(
    roots: Roots<'_>,
    client: Option<(&[u8], &[u8])>,
) -> Result<rustls::ClientConfig, TlsConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsConfigError::Versions)?;
    let builder = match roots {
        Roots::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(k3rs_apimachinery::https::AcceptAny::new(
                provider,
            ))),
        Roots::Pem(pem) => {
            let mut store = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(TlsConfigError::CaPem)?;
                store.add(cert).map_err(TlsConfigError::CaCertificate)?;
            }
            builder.with_root_certificates(store)
        }
        Roots::System => {
            let mut store = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(TlsConfigError::NoSystemRoots(format!("{:?}", found.errors)));
            }
            builder.with_root_certificates(store)
        }
    };
    match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(TlsConfigError::ClientCertificatePem)?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(TlsConfigError::ClientKeyPem)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(TlsConfigError::ClientCertificate)
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("https://127.0.0.1:8443/authenticate").unwrap(),
            (true, "127.0.0.1".into(), 8443, "/authenticate".into())
        );
        assert_eq!(
            split_url("https://authn.example").unwrap(),
            (true, "authn.example".into(), 443, "/".into())
        );
        assert_eq!(
            split_url("http://[::1]/a?b=c").unwrap(),
            (false, "::1".into(), 80, "/a?b=c".into())
        );
        assert!(split_url("ftp://x").is_err());
        assert!(split_url("https://:1/").is_err());
        assert!(split_url("https://h:x/").is_err());
    }

    #[test]
    fn kubeconfig_picks_the_current_context_else_the_first_entries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tok"), "file-token\n").unwrap();
        let yaml = r#"
clusters:
- name: a
  cluster: {server: "https://a.example:1/x", insecure-skip-tls-verify: true}
- name: b
  cluster: {server: "http://b.example:2/review"}
users:
- name: u1
  user: {token: t1}
- name: u2
  user: {tokenFile: tok}
contexts:
- name: c
  context: {cluster: b, user: u2}
current-context: c
"#;
        let c = WebhookClient::from_kubeconfig(yaml, dir.path()).unwrap();
        assert_eq!(
            (c.tls.is_some(), c.host.as_str(), c.port, c.path.as_str()),
            (false, "b.example", 2, "/review")
        );
        assert_eq!(c.token.as_deref(), Some("file-token"));
        let first = yaml.replace("current-context: c", "");
        let c = WebhookClient::from_kubeconfig(&first, dir.path()).unwrap();
        assert_eq!((c.host.as_str(), c.tls.is_some()), ("a.example", true));
        assert_eq!(c.token.as_deref(), Some("t1"));
    }

    #[test]
    fn bad_kubeconfigs() {
        let dir = Path::new("/");
        let err = |y: &str| {
            WebhookClient::from_kubeconfig(y, dir)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err("users: []"), "no cluster");
        assert_eq!(
            err("clusters: [{name: a, cluster: {server: 'https://h:1'}}]"),
            "an https server needs certificate-authority(-data) or insecure-skip-tls-verify"
        );
        assert!(err(
            "clusters: [{name: a, cluster: {server: 'https://h:1', certificate-authority-data: '%%'}}]"
        )
        .starts_with("certificate-authority-data: not base64"));
    }

    #[tokio::test]
    async fn refused_connections_are_transport_errors_after_retries_about_4s() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let yaml = format!("clusters: [{{cluster: {{server: 'http://127.0.0.1:{port}/'}}}}]");
        let c = WebhookClient::from_kubeconfig(&yaml, Path::new("/")).unwrap();
        let err = c.post(b"{}").await.unwrap_err();
        assert!(matches!(err, CallError::Transport(ref m) if m.starts_with("connecting")));
    }
}
