//! Joining a cluster (the kubelet's TLS bootstrap, with k3s's CA pinning):
//!
//! 1. fetch `/cacerts` and check its sha256 against the join token's `K10<hash>` ([`cacerts`]);
//! 2. with the bootstrap token as bearer, submit a `CertificateSigningRequest` for
//!    `system:node:<name>` in `system:nodes` (key made here, [`csr`]) carrying the node's
//!    password ([`password`]; the server refuses it when the node name is registered with
//!    another one) and wait, bounded, for the server's auto-approver and signer to issue it;
//! 3. store the CA, the pair and `kubelet.kubeconfig` under `<data-dir>/agent` ([`files`]) and
//!    from then on authenticate with the client certificate only.
//!
//! The kubelet serving certificate is requested afterwards with the node's own identity
//! ([`serving`]); like upstream kubelet's `serverTLSBootstrap`, it is not auto-approved and
//! does not hold up the node.
//!
//! # Guarantees
//! - No credential file is written unless the CA was pinned (or the token had no hash) and the
//!   server issued the client certificate: a wrong hash, a wrong token, a denied or never
//!   issued request leave `<data-dir>/agent` as it was.
//! - A restart reuses the stored identity while it is valid and before its rotation deadline
//!   ([`renew`]): no new request is made.
//! - Past the deadline the identity renews itself (the request is made as the node, which the
//!   server approves as self renewal); a failed renewal keeps the still valid identity.

pub mod cacerts;
pub mod csr;
pub mod files;
pub mod password;
pub mod renew;
pub mod rotation;
pub mod serving;
pub mod token;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::PostParams;
use kube::Api;

pub use files::Layout;
pub use renew::{Decision, Validity};
pub use token::JoinToken;

/// What joining needs.
#[derive(Debug, Clone)]
pub struct JoinConfig {
    /// `https://<server>:6443`.
    pub server: String,
    /// Needed when no usable identity is stored.
    pub token: Option<JoinToken>,
    /// The Node's name (`system:node:<name>`).
    pub node_name: String,
    /// The node's addresses (serving certificate SANs).
    pub node_ips: Vec<IpAddr>,
    /// `--data-dir` (credentials go under `agent/`).
    pub data_dir: PathBuf,
    /// How long to wait for a request to be issued.
    pub csr_timeout: Duration,
}

/// Why the node has no identity.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `/cacerts` could not be fetched.
    #[error(transparent)]
    Fetch(#[from] cacerts::FetchError),
    /// The server's CA is not the one the token pins.
    #[error(transparent)]
    Pin(#[from] cacerts::PinError),
    /// No stored identity and no token.
    #[error(
        "no usable node identity in {dir} and no token to bootstrap one: pass --token or \
         --token-file"
    )]
    NoToken {
        /// Where the identity is looked for.
        dir: PathBuf,
    },
    /// The bootstrap token is not accepted.
    #[error("the server refused the bootstrap token (401 Unauthorized): check --token")]
    Unauthorized,
    /// The server refused to take the request (the node password, RBAC).
    #[error("the server refused the {kind:?} certificate request (403 Forbidden): {message}")]
    Forbidden {
        /// Which certificate.
        kind: csr::Kind,
        /// The server's message.
        message: String,
    },
    /// The node password could not be read or made.
    #[error(transparent)]
    Password(#[from] password::PasswordError),
    /// The request could not be submitted.
    #[error("submitting the {kind:?} certificate request: {source}")]
    Submit {
        /// Which certificate.
        kind: csr::Kind,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The request could not be watched.
    #[error("watching certificate request {name}: {source}")]
    Poll {
        /// The CertificateSigningRequest.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The request was denied or failed.
    #[error("certificate request {name} was not issued: {why}")]
    Refused {
        /// The CertificateSigningRequest.
        name: String,
        /// The condition's reason and message.
        why: String,
    },
    /// The request was not issued in time.
    #[error(
        "certificate request {name} was not issued within {timeout:?} (is the server's \
         certificate controller running?)"
    )]
    Timeout {
        /// The CertificateSigningRequest.
        name: String,
        /// `--csr-timeout`.
        timeout: Duration,
    },
    /// The issued certificate does not parse or does not match the key.
    #[error("the issued certificate of {name} is unusable: {source}")]
    Issued {
        /// The CertificateSigningRequest.
        name: String,
        /// What is wrong with it.
        #[source]
        source: csr::CsrError,
    },
    /// The key or request could not be made.
    #[error(transparent)]
    Csr(#[from] csr::CsrError),
    /// A credential file could not be read or written.
    #[error(transparent)]
    Io(#[from] files::IoError),
    /// No client could be made with the credentials.
    #[error(transparent)]
    Client(#[from] crate::client::Error),
}

/// The node's identity in use.
#[derive(Clone)]
pub struct Identity {
    /// Authenticates as `system:node:<name>` with the stored client certificate.
    pub client: kube::Client,
    /// The client certificate's validity (when it is renewed).
    pub validity: Validity,
    /// Whether this run made a new identity (false: the stored one was reused).
    pub fresh: bool,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("validity", &self.validity)
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}

/// The stored client identity's validity, if it is usable for `node`: the CA, certificate and
/// key exist, the certificate is for the key and names the node, and (when the token pins a
/// CA) the stored CA is that one.
pub fn stored_validity(layout: &Layout, node: &str, pin: Option<&str>) -> Option<Validity> {
    let ca = files::read_optional(&layout.server_ca()).ok()??;
    if pin.is_some_and(|h| !h.eq_ignore_ascii_case(&cacerts::ca_hash(&ca))) {
        return None;
    }
    let cert = files::read_optional(&layout.client_cert()).ok()??;
    let key = files::read_optional(&layout.client_key()).ok()??;
    let v = csr::validity_of_pair(&cert, &key).ok()?;
    (csr::common_name(&cert).ok()? == csr::node_user(node)).then_some(v)
}

/// A jitter in `[0, 1)` for the rotation deadline.
pub fn jitter() -> f64 {
    rand::random::<f64>()
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Makes sure the node has a client identity (reusing, renewing or bootstrapping it) and
/// returns a client that uses it.
pub async fn ensure_identity(cfg: &JoinConfig) -> Result<Identity, Error> {
    let layout = Layout::new(&cfg.data_dir);
    let pin = cfg.token.as_ref().and_then(|t| t.ca_hash.as_deref());
    let stored = stored_validity(&layout, &cfg.node_name, pin);
    match renew::decide(stored, unix_now(), jitter()) {
        Decision::Use { .. } => {
            tracing::info!(node = %cfg.node_name, "using the stored node identity");
            Ok(Identity {
                client: node_client(cfg, &layout).await?,
                validity: stored.expect("Use implies a stored identity"),
                fresh: false,
            })
        }
        Decision::Renew => {
            let current = node_client(cfg, &layout).await?;
            match request_client_identity(cfg, &layout, &current, None).await {
                Ok(validity) => Ok(Identity {
                    client: node_client(cfg, &layout).await?,
                    validity,
                    fresh: true,
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "renewing the node identity; keeping the valid one");
                    Ok(Identity {
                        client: current,
                        validity: stored.expect("Renew implies a stored identity"),
                        fresh: false,
                    })
                }
            }
        }
        Decision::Bootstrap => bootstrap(cfg, &layout).await,
    }
}

/// Fetches and pins the CA, then requests the identity with the bootstrap token.
async fn bootstrap(cfg: &JoinConfig, layout: &Layout) -> Result<Identity, Error> {
    let token = cfg.token.as_ref().ok_or_else(|| Error::NoToken {
        dir: layout.dir.clone(),
    })?;
    let ca = cacerts::fetch(&cfg.server).await?;
    match cacerts::check(&ca, token.ca_hash.as_deref())? {
        cacerts::Pinned::Verified => tracing::info!("the server CA matches the token's hash"),
        cacerts::Pinned::Unverified { actual } => tracing::warn!(
            ca_hash = %actual,
            "the token has no CA hash: trusting the server's CA without verification; use the \
             full token (K10<hash>::<id>.<secret>) from the server's agent-token file"
        ),
    }
    let bootstrap = crate::client::from_token(&cfg.server, &token.bearer, Some(ca.clone()))?;
    let password = password::ensure(layout)?;
    // Only what the server issued is stored, and the CA only with it.
    let staged = Staged {
        ca: &ca,
        password: &password,
    };
    let validity = request_client_identity(cfg, layout, &bootstrap, Some(staged)).await?;
    tracing::info!(node = %cfg.node_name, "node identity issued and stored");
    Ok(Identity {
        client: node_client(cfg, layout).await?,
        validity,
        fresh: true,
    })
}

/// What a bootstrap carries: the CA to store with the identity, the node password to send.
#[derive(Clone, Copy)]
pub(crate) struct Staged<'a> {
    ca: &'a [u8],
    password: &'a str,
}

/// Requests a new client identity with `client` and stores it (with the CA, when staged).
pub(crate) async fn request_client_identity(
    cfg: &JoinConfig,
    layout: &Layout,
    client: &kube::Client,
    staged: Option<Staged<'_>>,
) -> Result<Validity, Error> {
    let req = csr::generate(csr::Kind::Client, &cfg.node_name, &[])?;
    let password = staged.map(|s| s.password);
    let (name, cert) = submit_and_wait(
        client,
        csr::Kind::Client,
        &req.request_pem,
        password,
        cfg.csr_timeout,
    )
    .await?;
    let validity = csr::validity_of_pair(&cert, req.key_pem.as_bytes())
        .map_err(|source| Error::Issued { name, source })?;
    if let Some(s) = staged {
        files::write_atomic(&layout.server_ca(), s.ca, files::PUBLIC)?;
    }
    files::write_pair(
        &layout.client_cert(),
        &cert,
        &layout.client_key(),
        req.key_pem.as_bytes(),
    )?;
    Ok(validity)
}

/// Writes `kubelet.kubeconfig` (when it changed) and builds a client from it.
pub(crate) async fn node_client(cfg: &JoinConfig, layout: &Layout) -> Result<kube::Client, Error> {
    let text = files::kubeconfig(&cfg.server, layout);
    let path = layout.kubeconfig();
    if files::read_optional(&path)?.as_deref() != Some(text.as_bytes()) {
        files::write_atomic(&path, text.as_bytes(), files::PRIVATE)?;
    }
    Ok(crate::client::from_kubeconfig(&path, None).await?)
}

/// Submits a request (with the node `password`, when given) and waits until it is issued
/// (its name and the certificate PEM).
pub(crate) async fn submit_and_wait(
    client: &kube::Client,
    kind: csr::Kind,
    request_pem: &str,
    password: Option<&str>,
    timeout: Duration,
) -> Result<(String, Vec<u8>), Error> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &csr::object(kind, request_pem, password),
        )
        .await
        .map_err(|source| match source {
            kube::Error::Api(s) if s.code == 401 => Error::Unauthorized,
            kube::Error::Api(s) if s.code == 403 => Error::Forbidden {
                kind,
                message: s.message,
            },
            source => Error::Submit { kind, source },
        })?;
    let name = created.metadata.name.clone().unwrap_or_default();
    tracing::info!(csr = %name, ?kind, "certificate request submitted");
    let deadline = tokio::time::Instant::now() + timeout;
    let mut current = created;
    loop {
        match csr::outcome(&current) {
            csr::Outcome::Issued(cert) => return Ok((name, cert)),
            csr::Outcome::Refused(why) => return Err(Error::Refused { name, why }),
            csr::Outcome::Pending => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout { name, timeout });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        current = api.get(&name).await.map_err(|source| Error::Poll {
            name: name.clone(),
            source,
        })?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stores a CA and a self-signed client pair for `cn`, valid for an hour from now.
    fn store(layout: &Layout, cn: &str) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now - time::Duration::minutes(1);
        p.not_after = now + time::Duration::hours(1);
        let cert = p.self_signed(&key).unwrap().pem();
        files::write_atomic(&layout.server_ca(), b"the CA", files::PUBLIC).unwrap();
        files::write_pair(
            &layout.client_cert(),
            cert.as_bytes(),
            &layout.client_key(),
            key.serialize_pem().as_bytes(),
        )
        .unwrap();
    }

    #[test]
    fn a_stored_identity_is_reused_only_for_its_node_and_pinned_ca() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout::new(d.path());
        assert_eq!(stored_validity(&layout, "n1", None), None);
        store(&layout, "system:node:n1");
        let v = stored_validity(&layout, "n1", None).unwrap();
        assert!(matches!(
            renew::decide(Some(v), unix_now(), 0.0),
            Decision::Use { .. }
        ));
        let pin = cacerts::ca_hash(b"the CA");
        assert_eq!(stored_validity(&layout, "n1", Some(&pin)), Some(v));
        assert_eq!(stored_validity(&layout, "n1", Some(&"0".repeat(64))), None);
        assert_eq!(stored_validity(&layout, "n2", None), None);
        std::fs::write(layout.client_key(), b"junk").unwrap();
        assert_eq!(stored_validity(&layout, "n1", None), None);
    }
}
