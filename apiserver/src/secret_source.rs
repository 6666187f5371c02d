//! The registry as the authenticators' source of Secrets (bootstrap tokens).

use futures::future::BoxFuture;
use serde_json::Value;

use super::registry::{Registry, Target};
use k3rs_apimachinery::catalog;
use k3rs_auth::bootstrap_token::SecretSource;

impl SecretSource for Registry {
    fn secret<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Option<Value>> {
        Box::pin(async move {
            let t = Target {
                resource: catalog::lookup("", "v1", "secrets")?,
                namespace: Some(namespace.to_string()),
                name: Some(name.to_string()),
                subresource: None,
            };
            self.get(&t).await.ok()
        })
    }
}
