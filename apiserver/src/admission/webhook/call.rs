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
use k3rs_auth::webhook::client::{tls_config, Roots, WebhookClient};

/// The URL to call and the name its certificate must carry (for services).
async fn resolve(reg: &Registry, w: &Webhook) -> Result<(String, Option<String>), String> {
    match &w.endpoint {
        Endpoint::Url(u) => Ok((u.clone(), None)),
        Endpoint::Service {
            namespace,
            name,
            path,
            port,
        } => {
            let services = catalog::lookup("", "v1", "services")
                .ok_or_else(|| "services are not served".to_string())?;
            let t = Target {
                resource: services,
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                subresource: None,
            };
            let svc = reg
                .get(&t)
                .await
                .map_err(|_| format!("service \"{namespace}/{name}\" not found"))?;
            let ip = svc["spec"]["clusterIP"].as_str().unwrap_or("");
            if ip.is_empty() || ip == "None" {
                return Err(format!(
                    "service \"{namespace}/{name}\" has no cluster IP to call"
                ));
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
    ) -> Result<WebhookClient, String> {
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
) -> Result<Vec<u8>, String> {
    let (url, server_name) = resolve(reg, w).await?;
    let client = clients.client(&url, server_name.as_deref(), &w.ca_bundle)?;
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    match tokio::time::timeout(w.timeout, client.post_once(&body)).await {
        Ok(r) => r.map_err(|e| format!("failed to call webhook: Post \"{url}\": {e}")),
        Err(_) => Err(format!(
            "failed to call webhook: Post \"{url}\": context deadline exceeded (timeout {}s)",
            w.timeout.as_secs()
        )),
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
