//! The OIDC provider's keys: discovered from `<issuer>/.well-known/openid-configuration`,
//! fetched from its `jwks_uri`, in the background from the start (retried with backoff while
//! the issuer cannot be reached), and fetched again when a token names a key the set lacks.
//!
//! # Guarantees
//! - The discovery document is used only when its `issuer` is exactly the configured issuer.
//! - Until a key set has been fetched, [`Provider::keys`] is `None` (tokens are refused).
//! - Token-triggered refreshes run one at a time and at most once per
//!   [`MIN_REFRESH_INTERVAL`]; a failed refresh keeps the previous keys.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::jws::{KeySet, KeySetError};
use crate::webhook::client::{CallError, ClientError, WebhookClient};

/// Why the provider's discovery document or keys could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The discovery document is not JSON.
    #[error("not JSON: {0}")]
    DiscoveryJson(#[source] serde_json::Error),
    /// The discovery document names another issuer.
    #[error("oidc: issuer did not match the issuer returned by provider, expected {expected:?} got {got:?}")]
    IssuerMismatch {
        /// The configured issuer.
        expected: String,
        /// The document's issuer.
        got: String,
    },
    /// The discovery document has no usable `jwks_uri`.
    #[error("the discovery document has no jwks_uri URL")]
    NoJwksUri,
    /// No client could be made for a URL.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A GET failed.
    #[error("{url}: {source}")]
    Get {
        /// The URL.
        url: String,
        /// The failure.
        #[source]
        source: CallError,
    },
    /// The key set at `uri` is unreadable.
    #[error("{uri}: {source}")]
    Keys {
        /// The `jwks_uri`.
        uri: String,
        /// Why it is unreadable.
        #[source]
        source: KeySetError,
    },
}

/// The least time between two token-triggered key fetches.
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// First and longest wait between attempts while the issuer is unreachable at start.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The `jwks_uri` of a discovery document, which must name `issuer`.
pub fn jwks_uri(doc: &[u8], issuer: &str) -> Result<String, ProviderError> {
    let v: Value = serde_json::from_slice(doc).map_err(ProviderError::DiscoveryJson)?;
    let got = v.get("issuer").and_then(Value::as_str).unwrap_or_default();
    if got != issuer {
        return Err(ProviderError::IssuerMismatch {
            expected: issuer.to_string(),
            got: got.to_string(),
        });
    }
    match v.get("jwks_uri").and_then(Value::as_str) {
        Some(u) if u.starts_with("https://") || u.starts_with("http://") => Ok(u.to_string()),
        _ => Err(ProviderError::NoJwksUri),
    }
}

/// The discovery document's URL (go-oidc trims a trailing `/` of the issuer).
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

/// One provider's keys.
#[derive(Debug)]
pub struct Provider {
    issuer: String,
    discovery: String,
    tls: Arc<rustls::ClientConfig>,
    /// One pooled client for the discovery document and the keys (made on first use).
    client: Mutex<Option<WebhookClient>>,
    keys: RwLock<Option<Arc<KeySet>>>,
    jwks_uri: Mutex<Option<String>>,
    last_refresh: Mutex<Option<Instant>>,
    refreshing: tokio::sync::Mutex<()>,
}

impl Provider {
    /// A provider of `issuer` (its discovery document at `discovery`, or the well-known
    /// place) reached with `tls`; nothing is fetched before [`Provider::start`].
    pub fn new(
        issuer: &str,
        discovery: Option<&str>,
        tls: Arc<rustls::ClientConfig>,
    ) -> Arc<Provider> {
        Arc::new(Provider {
            issuer: issuer.to_string(),
            discovery: discovery.map_or_else(|| discovery_url(issuer), str::to_string),
            tls,
            client: Mutex::new(None),
            keys: RwLock::new(None),
            jwks_uri: Mutex::new(None),
            last_refresh: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// A provider whose keys are already known (tests; refreshes still fetch).
    #[cfg(test)]
    pub fn preloaded(issuer: &str, tls: Arc<rustls::ClientConfig>, keys: KeySet) -> Arc<Provider> {
        let p = Provider::new(issuer, None, tls);
        *p.keys.write().unwrap() = Some(Arc::new(keys));
        p
    }

    /// Fetches the keys in the background until it succeeds once.
    pub fn start(self: &Arc<Provider>) {
        let p = self.clone();
        tokio::spawn(async move {
            let mut backoff = FIRST_BACKOFF;
            loop {
                let result = {
                    let _one = p.refreshing.lock().await;
                    p.fetch().await
                };
                match result {
                    Ok(n) => {
                        tracing::info!(issuer = %p.issuer, keys = n, "oidc: provider keys loaded");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(issuer = %p.issuer, error = %e, "oidc: initializing the provider failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        });
    }

    /// The current key set (`None` before the first fetch succeeded).
    pub fn keys(&self) -> Option<Arc<KeySet>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Fetches the keys again unless another refresh ran in the last
    /// [`MIN_REFRESH_INTERVAL`]; returns the keys afterwards.
    pub async fn refresh(&self) -> Option<Arc<KeySet>> {
        let _one = self.refreshing.lock().await;
        {
            let mut last = self.last_refresh.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < MIN_REFRESH_INTERVAL) {
                drop(last);
                return self.keys();
            }
            *last = Some(Instant::now());
        }
        if let Err(e) = self.fetch().await {
            tracing::warn!(issuer = %self.issuer, error = %e, "oidc: refreshing the provider's keys failed");
        }
        self.keys()
    }

    /// Discovers the key set's URL (once) and fetches the keys; the number of usable keys.
    async fn fetch(&self) -> Result<usize, ProviderError> {
        let known = self
            .jwks_uri
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let uri = match known {
            Some(u) => u,
            None => {
                let doc = self.get(&self.discovery).await?;
                let u = jwks_uri(&doc, &self.issuer)?;
                *self.jwks_uri.lock().unwrap_or_else(|e| e.into_inner()) = Some(u.clone());
                u
            }
        };
        let set = KeySet::parse(&self.get(&uri).await?).map_err(|source| ProviderError::Keys {
            uri: uri.clone(),
            source,
        })?;
        let n = set.keys.len();
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(set));
        Ok(n)
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, ProviderError> {
        let client = {
            let mut pooled = self.client.lock().unwrap_or_else(|e| e.into_inner());
            match &*pooled {
                Some(c) => c.at(url)?,
                None => {
                    let c = WebhookClient::for_url(url, Some(self.tls.clone()))?;
                    *pooled = Some(c.clone());
                    c
                }
            }
        };
        client.get().await.map_err(|source| ProviderError::Get {
            url: url.to_string(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_documents() {
        let doc = |v: Value| v.to_string().into_bytes();
        let issuer = "https://issuer.example";
        assert_eq!(
            jwks_uri(
                &doc(serde_json::json!({"issuer": issuer, "jwks_uri": "https://keys.example/k"})),
                issuer
            )
            .ok(),
            Some("https://keys.example/k".into())
        );
        let other =
            doc(serde_json::json!({"issuer": "https://issuer.example/", "jwks_uri": "https://k"}));
        assert!(jwks_uri(&other, issuer)
            .unwrap_err()
            .to_string()
            .starts_with("oidc: issuer did not match"));
        assert!(jwks_uri(&doc(serde_json::json!({"issuer": issuer})), issuer).is_err());
        assert!(jwks_uri(b"<html>", issuer).is_err());
        assert_eq!(
            discovery_url("https://i.example/realm/"),
            "https://i.example/realm/.well-known/openid-configuration"
        );
    }
}
