//! The API calls the pod executor makes, behind a trait so the worker can be tested without a
//! server: status patches, the final delete, and the ConfigMaps and Secrets a container's
//! environment refers to. [`KubeApi`] makes them with the node's own (rotating) client.
//!
//! [`status_patch`] is the pure part: the merge patch from the status the API has to the one
//! the kubelet computed, or nothing when they agree (upstream's status manager only writes
//! changes).

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, PodStatus, Secret, ServiceAccount,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::Value;
use tokio::sync::watch;

/// A failed API call (the worker only logs it and retries on its next sync).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or could not be reached.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// A TokenRequest answered without a token.
    #[error("the TokenRequest answer has no token")]
    NoToken,
}

/// What the pod executor asks of the API server.
pub trait PodApi: Send + Sync {
    /// Merge-patches `pods/<name>/status` with `patch` (a `{"status": …}` object), only for the
    /// pod with `uid`. A pod already gone is success.
    fn patch_status(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        patch: Value,
    ) -> BoxFuture<'_, Result<(), Error>>;
    /// Deletes the pod with grace period 0, only if its UID is still `uid`. A pod already gone
    /// is success.
    fn delete(&self, namespace: &str, name: &str, uid: &str) -> BoxFuture<'_, Result<(), Error>>;
    /// A ConfigMap, `None` when it does not exist.
    fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<ConfigMap>, Error>>;
    /// A Secret, `None` when it does not exist.
    fn secret(&self, namespace: &str, name: &str) -> BoxFuture<'_, Result<Option<Secret>, Error>>;
    /// A token of `service_account` bound to `pod` (TokenRequest); no audience: the API
    /// server's.
    fn token<'a>(
        &'a self,
        namespace: &'a str,
        service_account: &'a str,
        audience: Option<&'a str>,
        expiration_seconds: Option<i64>,
        pod: &'a Pod,
    ) -> BoxFuture<'a, Result<String, Error>>;
    /// A PersistentVolumeClaim and the PersistentVolume it is bound to (each `None` when it
    /// does not exist or the claim names none).
    fn claim_and_volume<'a>(&'a self, namespace: &'a str, name: &'a str) -> ClaimAndVolume<'a> {
        let _ = (namespace, name);
        Box::pin(async { Ok((None, None)) })
    }
}

/// What [`PodApi::claim_and_volume`] returns.
pub type ClaimAndVolume<'a> =
    BoxFuture<'a, Result<(Option<PersistentVolumeClaim>, Option<PersistentVolume>), Error>>;

/// The TokenRequest body for a token bound to `pod`.
pub fn token_request(audience: Option<&str>, expiration_seconds: Option<i64>, pod: &Pod) -> Value {
    let audiences: Vec<&str> = audience.filter(|a| !a.is_empty()).into_iter().collect();
    serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": audiences,
            "expirationSeconds": expiration_seconds.unwrap_or(3600),
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
            },
        },
    })
}

/// Whether two statuses are the same as the API stores them (times in whole seconds).
pub fn same_status(a: &PodStatus, b: &PodStatus) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

/// The merge patch that turns `old` into `new` at the top level of the status (fields `new`
/// drops are set to null), or `None` when nothing changed as the API would store it. `uid`
/// goes into the patch's metadata so a recreated pod of the same name is never patched.
pub fn status_patch(old: Option<&PodStatus>, new: &PodStatus, uid: &str) -> Option<Value> {
    if old.is_some_and(|o| same_status(o, new)) {
        return None;
    }
    let mut status = serde_json::to_value(new).ok()?;
    let fields = status.as_object_mut()?;
    if let Some(Value::Object(before)) = old.and_then(|o| serde_json::to_value(o).ok()) {
        for key in before.keys() {
            if !fields.contains_key(key) {
                fields.insert(key.clone(), Value::Null);
            }
        }
    }
    Some(serde_json::json!({"metadata": {"uid": uid}, "status": status}))
}

/// [`PodApi`] over the node's client (the newest one the certificate rotation produced).
#[derive(Clone)]
pub struct KubeApi {
    pub client: watch::Receiver<kube::Client>,
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl KubeApi {
    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.borrow().clone(), namespace)
    }

    async fn get_opt<K>(&self, namespace: &str, name: &str) -> Result<Option<K>, Error>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(self.client.borrow().clone(), namespace);
        match api.get(name).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl PodApi for KubeApi {
    fn claim_and_volume<'a>(&'a self, namespace: &'a str, name: &'a str) -> ClaimAndVolume<'a> {
        Box::pin(async move {
            let claim: Option<PersistentVolumeClaim> = self.get_opt(namespace, name).await?;
            let pv_name = claim
                .as_ref()
                .and_then(|c| c.spec.as_ref())
                .and_then(|s| s.volume_name.clone())
                .filter(|n| !n.is_empty());
            let Some(pv_name) = pv_name else {
                return Ok((claim, None));
            };
            let api: Api<PersistentVolume> = Api::all(self.client.borrow().clone());
            match api.get(&pv_name).await {
                Ok(v) => Ok((claim, Some(v))),
                Err(e) if is_not_found(&e) => Ok((claim, None)),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn patch_status(
        &self,
        namespace: &str,
        name: &str,
        _uid: &str,
        patch: Value,
    ) -> BoxFuture<'_, Result<(), Error>> {
        let api = self.pods(namespace);
        let name = name.to_string();
        Box::pin(async move {
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => Ok(()),
                // Deleted meanwhile: there is nobody to report to.
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn delete(&self, namespace: &str, name: &str, uid: &str) -> BoxFuture<'_, Result<(), Error>> {
        let api = self.pods(namespace);
        let name = name.to_string();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        Box::pin(async move {
            match api.delete(&name, &params).await {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<ConfigMap>, Error>> {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        Box::pin(async move { self.get_opt(&namespace, &name).await })
    }

    fn secret(&self, namespace: &str, name: &str) -> BoxFuture<'_, Result<Option<Secret>, Error>> {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        Box::pin(async move { self.get_opt(&namespace, &name).await })
    }

    fn token<'a>(
        &'a self,
        namespace: &'a str,
        service_account: &'a str,
        audience: Option<&'a str>,
        expiration_seconds: Option<i64>,
        pod: &'a Pod,
    ) -> BoxFuture<'a, Result<String, Error>> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.borrow().clone(), namespace);
        let body = token_request(audience, expiration_seconds, pod);
        Box::pin(async move {
            let reply: Value = api
                .create_subresource("token", service_account, &PostParams::default(), &body)
                .await?;
            reply["status"]["token"]
                .as_str()
                .map(str::to_string)
                .ok_or(Error::NoToken)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(v: Value) -> PodStatus {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn no_patch_without_a_change() {
        let s = status(json!({"phase": "Running", "podIP": "10.42.0.5"}));
        assert_eq!(status_patch(Some(&s), &s, "u1"), None);
        // Sub-second precision the API does not keep is no change.
        let stored = status(json!({"startTime": "2026-01-01T00:00:01Z"}));
        let mut computed = stored.clone();
        computed.start_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:01.5Z".parse().unwrap(),
        ));
        assert_eq!(status_patch(Some(&stored), &computed, "u1"), None);
    }

    #[test]
    fn a_change_is_patched_and_dropped_fields_are_nulled() {
        let old = status(json!({"phase": "Pending", "reason": "X", "podIP": "10.42.0.5"}));
        let new = status(json!({"phase": "Running", "podIP": "10.42.0.5"}));
        assert_eq!(
            status_patch(Some(&old), &new, "u1"),
            Some(json!({"metadata": {"uid": "u1"},
                "status": {"phase": "Running", "podIP": "10.42.0.5", "reason": null}}))
        );
        assert_eq!(
            status_patch(None, &new, "u1"),
            Some(json!({"metadata": {"uid": "u1"},
                "status": {"phase": "Running", "podIP": "10.42.0.5"}}))
        );
    }
}
