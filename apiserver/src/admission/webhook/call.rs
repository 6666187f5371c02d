//! Calling one webhook: where its endpoint is (a URL, or a Service's ClusterIP with the
//! certificate checked for `<service>.<namespace>.svc`, as kube-apiserver's default service
//! resolver does), what it trusts (its `caBundle`, else the system roots), and its timeout.
//!
//! # Guarantees
//! - Calls to one endpoint (URL, certificate name and `caBundle`) share one pooled client
//!   ([`Clients`]): keep-alive connections are reused, not a TLS handshake per call.
//! - An answer larger than [`MAX_RESPONSE_BYTES`](k3rs_auth::webhook::client::MAX_RESPONSE_BYTES)
//!   is a failed call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::model::{Endpoint, Webhook};
use crate::registry::{Registry, Target};
use k3rs_apimachinery::catalog;
use k3rs_auth::webhook::client::{tls_config, ClientError, Roots, TlsConfigError, WebhookClient};

/// Why a webhook could not be called (the failure policy decides what it means).
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    /// Services are not in the catalog.
    #[error("services are not served")]
    ServicesNotServed,
    /// The webhook's Service does not exist.
    #[error("service \"{namespace}/{name}\" not found")]
    ServiceNotFound {
        /// The Service's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The Service has no ClusterIP (headless).
    #[error("service \"{namespace}/{name}\" has no cluster IP to call")]
    NoClusterIp {
        /// The Service's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// No client for the endpoint.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// No TLS configuration for the `caBundle`.
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
    /// The review did not serialize.
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
    /// The POST failed.
    #[error("failed to call webhook: Post \"{url}\": {source}")]
    Post {
        /// The URL.
        url: String,
        /// The failure.
        #[source]
        source: k3rs_auth::webhook::client::CallError,
    },
    /// No answer within the webhook's timeout (seconds).
    #[error(
        "failed to call webhook: Post \"{url}\": context deadline exceeded (timeout {seconds}s)"
    )]
    Timeout {
        /// The URL.
        url: String,
        /// The timeout.
        seconds: u64,
    },
}

/// The URL to call and the name its certificate must carry (for services).
async fn resolve(reg: &Registry, w: &Webhook) -> Result<(String, Option<String>), CallFailure> {
    match &w.endpoint {
        Endpoint::Url(u) => Ok((u.clone(), None)),
        Endpoint::Service {
            namespace,
            name,
            path,
            port,
        } => {
            let services =
                catalog::lookup("", "v1", "services").ok_or(CallFailure::ServicesNotServed)?;
            let t = Target {
                resource: services,
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                subresource: None,
            };
            let svc = reg
                .get(&t)
                .await
                .map_err(|_| CallFailure::ServiceNotFound {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })?;
            let ip = svc["spec"]["clusterIP"].as_str().unwrap_or("");
            if ip.is_empty() || ip == "None" {
                return Err(CallFailure::NoClusterIp {
                    namespace: namespace.clone(),
                    name: name.clone(),
                });
            }
            let host = if ip.contains(':') {
                format!("[{ip}]")
            } else {
                ip.to_string()
            };
            Ok((
                format!("https://{host}:{port}{path}"),
                Some(format!("{name}.{namespace}.svc")),
            ))
        }
    }
}

/// Endpoints whose clients are kept; past this, the cache starts over (configurations
/// that changed leave their old endpoints behind).
const MAX_CLIENTS: usize = 256;

/// What identifies an endpoint's client: URL, certificate name, `caBundle`.
type EndpointKey = (String, Option<String>, Vec<u8>);

/// The webhooks' pooled clients, one per endpoint; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Clients(Arc<Mutex<HashMap<EndpointKey, WebhookClient>>>);

impl Clients {
    /// The client of `url` checked for `server_name` against `ca_bundle` (empty: the system
    /// roots), made on first use.
    fn client(
        &self,
        url: &str,
        server_name: Option<&str>,
        ca_bundle: &[u8],
    ) -> Result<WebhookClient, CallFailure> {
        let key = (
            url.to_string(),
            server_name.map(str::to_string),
            ca_bundle.to_vec(),
        );
        let mut clients = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let roots = if ca_bundle.is_empty() {
            Roots::System
        } else {
            Roots::Pem(ca_bundle)
        };
        let tls = Arc::new(tls_config(roots, None)?);
        let mut client = WebhookClient::for_url(url, Some(tls))?;
        if let Some(name) = server_name {
            client = client.with_server_name(name)?;
        }
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// How many endpoints have a client.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// POSTs `review` to the webhook and returns its answer's body, within its timeout.
pub async fn call(
    clients: &Clients,
    reg: &Registry,
    w: &Webhook,
    review: &Value,
) -> Result<Vec<u8>, CallFailure> {
    let (url, server_name) = resolve(reg, w).await?;
    let client = clients.client(&url, server_name.as_deref(), &w.ca_bundle)?;
    let body = serde_json::to_vec(review)?;
    match tokio::time::timeout(w.timeout, client.post_once(&body)).await {
        Ok(r) => r.map_err(|source| CallFailure::Post { url, source }),
        Err(_) => Err(CallFailure::Timeout {
            url,
            seconds: w.timeout.as_secs(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_per_endpoint() {
        // A bundle without certificates: nothing is trusted, but the clients are made.
        let clients = Clients::default();
        let a = "https://10.0.0.1:443/validate";
        clients.client(a, Some("hook.ns.svc"), b"x").unwrap();
        clients.client(a, Some("hook.ns.svc"), b"x").unwrap();
        assert_eq!(clients.len(), 1);
        clients.client(a, Some("other.ns.svc"), b"x").unwrap();
        clients
            .client("https://10.0.0.2:443/validate", Some("hook.ns.svc"), b"x")
            .unwrap();
        assert_eq!(clients.len(), 3);
        for i in 0..MAX_CLIENTS {
            clients
                .client(&format!("https://10.1.0.1:{}/", i + 1), None, b"x")
                .unwrap();
        }
        assert!(clients.len() <= MAX_CLIENTS, "the cache stays bounded");
    }
}
