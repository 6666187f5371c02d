//! `kube-system/extension-apiserver-authentication` (kube-apiserver's
//! `ClusterAuthenticationTrustController`): the client CA and the request-header settings
//! published for extension API servers, which read them (through the
//! `extension-apiserver-authentication-reader` Role, also kept here) to trust this server's
//! front proxy and client certificates.
//!
//! # Guarantees
//! - The ConfigMap holds exactly this server's settings, written again when they differ
//!   (checked at start and every [`RESYNC`]); the Role is created when missing.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// The ConfigMap's and the Role's namespace and names (upstream's).
pub const NAMESPACE: &str = "kube-system";
pub const CONFIG_MAP: &str = "extension-apiserver-authentication";
pub const READER_ROLE: &str = "extension-apiserver-authentication-reader";
/// How often the ConfigMap is checked.
pub const RESYNC: Duration = Duration::from_secs(60);

/// What the ConfigMap publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticationTrust {
    /// The client CA bundle (PEM).
    pub client_ca_pem: String,
    /// The request-header CA (PEM).
    pub request_header_ca_pem: String,
    pub allowed_names: Vec<String>,
    pub headers: k3rs_auth::request_header::Headers,
}

impl AuthenticationTrust {
    /// The ConfigMap's `data` (lists as JSON arrays, as upstream writes them).
    pub fn data(&self) -> Value {
        let list = |v: &[String]| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
        json!({
            "client-ca-file": self.client_ca_pem,
            "requestheader-client-ca-file": self.request_header_ca_pem,
            "requestheader-allowed-names": list(&self.allowed_names),
            "requestheader-username-headers": list(&self.headers.username),
            "requestheader-uid-headers": list(&self.headers.uid),
            "requestheader-group-headers": list(&self.headers.group),
            "requestheader-extra-headers-prefix": list(&self.headers.extra_prefix),
        })
    }

    /// Writes the ConfigMap and the Role until `stop`.
    pub async fn run(self, client: kube::Client, stop: CancellationToken) {
        loop {
            if let Err(e) = self.ensure(&client).await {
                tracing::debug!(error = %e, "publishing {NAMESPACE}/{CONFIG_MAP}");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    async fn ensure(&self, client: &kube::Client) -> Result<(), kube::Error> {
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        let data = self.data();
        match maps.get_opt(CONFIG_MAP).await? {
            Some(mut cm) => {
                if serde_json::to_value(&cm.data).ok().as_ref() != Some(&data) {
                    cm.data = serde_json::from_value(data).ok();
                    maps.replace(CONFIG_MAP, &PostParams::default(), &cm)
                        .await?;
                }
            }
            None => {
                let cm = json!({"metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
                    "data": data});
                if let Ok(cm) = serde_json::from_value::<ConfigMap>(cm) {
                    maps.create(&PostParams::default(), &cm).await?;
                }
            }
        }
        let roles: Api<Role> = Api::namespaced(client.clone(), NAMESPACE);
        if roles.get_opt(READER_ROLE).await?.is_none() {
            if let Ok(role) = serde_json::from_value::<Role>(reader_role()) {
                roles.create(&PostParams::default(), &role).await?;
            }
        }
        Ok(())
    }
}

/// The Role that lets extension servers read the ConfigMap (upstream's bootstrap policy).
pub fn reader_role() -> Value {
    json!({"metadata": {"name": READER_ROLE, "namespace": NAMESPACE,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
            "resourceNames": [CONFIG_MAP], "verbs": ["get", "list", "watch"]}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_as_upstream_publishes_it() {
        let trust = AuthenticationTrust {
            client_ca_pem: "CLIENT".into(),
            request_header_ca_pem: "PROXY".into(),
            allowed_names: vec!["system:auth-proxy".into()],
            headers: Default::default(),
        };
        assert_eq!(
            trust.data(),
            json!({
                "client-ca-file": "CLIENT",
                "requestheader-client-ca-file": "PROXY",
                "requestheader-allowed-names": "[\"system:auth-proxy\"]",
                "requestheader-username-headers": "[\"X-Remote-User\"]",
                "requestheader-uid-headers": "[]",
                "requestheader-group-headers": "[\"X-Remote-Group\"]",
                "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
            })
        );
        assert!(serde_json::from_value::<Role>(reader_role()).is_ok());
    }
}
