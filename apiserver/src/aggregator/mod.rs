//! The aggregation layer (kube-aggregator inside the API server): `apiregistration.k8s.io/v1`
//! APIServices register group/versions, either served here (`Local`, one per built-in and
//! custom group/version, kept by [`local`]) or by an extension API server behind a Service.
//! Requests for a service-backed group/version are proxied there ([`proxy`]) after this
//! server's authentication and authorization; the availability controller ([`availability`])
//! checks each one and keeps its `Available` condition and its discovery; discovery
//! ([`crate::discovery`]) lists the groups of the available ones.
//!
//! # Guarantees
//! - A service-backed APIService is proxied from the controller's first pass after it is
//!   created, available or not (an unreachable one answers 503 with the reason).
//! - Its group is in `/apis` (legacy and aggregated discovery) only while its last check
//!   passed: an unavailable extension server never fails a discovery call.
//! - Extension servers see the front-proxy client certificate (CN `system:auth-proxy`, from
//!   the request-header CA) and never the client's own credentials.

pub mod availability;
pub mod backend;
pub mod discovery;
pub mod local;
pub mod proxy;
pub mod resolve;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use backend::Backend;
use k3rs_auth::webhook::client::{tls_config, Roots, TlsConfigError};

/// How an extension server's certificate is checked: against a `caBundle` (empty: the
/// system roots), or not at all (`insecureSkipTLSVerify`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trust {
    CaBundle(Vec<u8>),
    Insecure,
}

impl Trust {
    pub fn of(a: &backend::ApiService) -> Trust {
        if a.insecure_skip_tls_verify {
            Trust::Insecure
        } else {
            Trust::CaBundle(a.ca_bundle.clone())
        }
    }
}

/// The TLS client configurations kept; past this, the cache starts over.
const MAX_TLS_CONFIGS: usize = 64;

/// `(group, version)` of the service-backed APIServices, with their state.
pub type Backends = BTreeMap<(String, String), Backend>;

/// Failures setting the aggregation layer up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the front-proxy client certificate {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the front-proxy client certificate: {0}")]
    Tls(#[from] TlsConfigError),
}

/// The aggregation layer's shared state: the front-proxy identity and the service-backed
/// APIServices as the availability controller last saw them.
pub struct Aggregator {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    tls: Mutex<HashMap<Trust, Arc<rustls::ClientConfig>>>,
    backends: RwLock<Arc<Backends>>,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("backends", &self.backends().len())
            .finish()
    }
}

impl Aggregator {
    /// Presents `cert`/`key` (PEM) to extension servers; checks that they make a client
    /// configuration.
    pub fn load(cert: &Path, key: &Path) -> Result<Aggregator, Error> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| Error::Read {
                path: p.display().to_string(),
                source,
            })
        };
        let agg = Aggregator {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            tls: Mutex::default(),
            backends: RwLock::default(),
        };
        agg.tls_for(&Trust::Insecure)?;
        Ok(agg)
    }

    /// The client configuration for `trust`, presenting the front-proxy certificate.
    pub fn tls_for(&self, trust: &Trust) -> Result<Arc<rustls::ClientConfig>, TlsConfigError> {
        let mut cache = self.tls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.get(trust) {
            return Ok(c.clone());
        }
        let roots = match trust {
            Trust::Insecure => Roots::Insecure,
            Trust::CaBundle(b) if b.is_empty() => Roots::System,
            Trust::CaBundle(b) => Roots::Pem(b),
        };
        let mut config = tls_config(roots, Some((&self.cert_pem, &self.key_pem)))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        if cache.len() >= MAX_TLS_CONFIGS {
            cache.clear();
        }
        cache.insert(trust.clone(), config.clone());
        Ok(config)
    }

    /// The service-backed APIServices now.
    pub fn backends(&self) -> Arc<Backends> {
        self.backends
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces them (the availability controller, after each pass).
    pub fn set_backends(&self, backends: Backends) {
        *self.backends.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(backends);
    }

    /// The backend serving `path` (`/apis/<group>/<version>[/…]`), if it is aggregated.
    pub fn backend_for(&self, path: &str) -> Option<Backend> {
        let (group, version) = group_version_of(path)?;
        self.backends()
            .get(&(group.to_string(), version.to_string()))
            .cloned()
    }
}

/// `(group, version)` of `/apis/<group>/<version>[/…]`.
fn group_version_of(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/apis/")?;
    let mut parts = rest.splitn(3, '/');
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some((group, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_of_paths() {
        assert_eq!(
            group_version_of("/apis/wardle.example.com/v1alpha1"),
            Some(("wardle.example.com", "v1alpha1"))
        );
        assert_eq!(
            group_version_of("/apis/wardle.example.com/v1alpha1/namespaces/a/flunders"),
            Some(("wardle.example.com", "v1alpha1"))
        );
        assert_eq!(group_version_of("/apis/wardle.example.com"), None);
        assert_eq!(group_version_of("/apis/wardle.example.com/"), None);
        assert_eq!(group_version_of("/api/v1/pods"), None);
    }
}
