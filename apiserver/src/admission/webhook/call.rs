//! Calling one webhook: where its endpoint is (a URL, or a Service's ClusterIP with the
//! certificate checked for `<service>.<namespace>.svc`, as kube-apiserver's default service
//! resolver does), what it trusts (its `caBundle`, else the system roots), and its timeout.

use std::sync::Arc;

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

/// POSTs `review` to the webhook and returns its answer's body, within its timeout.
pub async fn call(reg: &Registry, w: &Webhook, review: &Value) -> Result<Vec<u8>, String> {
    let (url, server_name) = resolve(reg, w).await?;
    let roots = if w.ca_bundle.is_empty() {
        Roots::System
    } else {
        Roots::Pem(&w.ca_bundle)
    };
    let tls = Arc::new(tls_config(roots, None)?);
    let mut client = WebhookClient::for_url(&url, Some(tls))?;
    if let Some(name) = server_name {
        client = client.with_server_name(&name)?;
    }
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    match tokio::time::timeout(w.timeout, client.post_once(&body)).await {
        Ok(r) => r.map_err(|e| format!("failed to call webhook: Post \"{url}\": {e}")),
        Err(_) => Err(format!(
            "failed to call webhook: Post \"{url}\": context deadline exceeded (timeout {}s)",
            w.timeout.as_secs()
        )),
    }
}
