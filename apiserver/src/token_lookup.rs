//! The objects service-account tokens refer to, read through the registry (the API
//! server's [`Lookup`] for the token authenticator).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::registry::{Registry, Target};
use k3rs_apimachinery::catalog;
use k3rs_auth::serviceaccount::authenticator::{Kind, Lookup, LookupError};

/// [`Lookup`] over the API server's registry.
#[derive(Debug, Clone)]
pub struct RegistryLookup(pub Arc<Registry>);

impl Lookup for RegistryLookup {
    fn object<'a>(
        &'a self,
        kind: Kind,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async move {
            let plural = match kind {
                Kind::ServiceAccount => "serviceaccounts",
                Kind::Secret => "secrets",
                Kind::Pod => "pods",
                Kind::Node => "nodes",
            };
            let resource = catalog::lookup("", "v1", plural)
                .ok_or_else(|| LookupError(format!("{plural} are not served")))?;
            let target = Target {
                resource,
                namespace: resource.namespaced.then(|| namespace.to_string()),
                name: Some(name.to_string()),
                subresource: None,
            };
            match self.0.get(&target).await {
                Ok(v) => Ok(Some(v)),
                Err(e) if e.code == 404 => Ok(None),
                Err(e) => Err(LookupError(e.message)),
            }
        })
    }
}
