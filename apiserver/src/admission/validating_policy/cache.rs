//! The policies and bindings the plugin decides on, kept in memory by two informers (as the
//! RBAC cache is) and compiled once per stored version.
//!
//! # Guarantees
//! - A policy's expressions are compiled when a request first needs that version of it
//!   (its `resourceVersion` changed), never per request.
//! - Until both kinds have been listed once, [`PolicyCache::ready`] is false.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::model::{Binding, Policy};

/// A policy with the bindings that name it.
#[derive(Debug, Clone)]
pub struct Hook {
    pub policy: Arc<Policy>,
    pub bindings: Vec<Arc<Binding>>,
}

type Compiled<T> = Mutex<HashMap<String, (String, Arc<T>)>>;

/// Read side of the informers, with the compiled forms.
#[derive(Clone)]
pub struct PolicyCache {
    policies: Store<ValidatingAdmissionPolicy>,
    bindings: Store<ValidatingAdmissionPolicyBinding>,
    compiled_policies: Arc<Compiled<Policy>>,
    compiled_bindings: Arc<Compiled<Binding>>,
}

impl std::fmt::Debug for PolicyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyCache")
            .field("policies", &self.policies.len())
            .field("bindings", &self.bindings.len())
            .finish()
    }
}

/// Write side: consumed by [`PolicyFeed::run`].
pub struct PolicyFeed {
    policies: reflector::store::Writer<ValidatingAdmissionPolicy>,
    bindings: reflector::store::Writer<ValidatingAdmissionPolicyBinding>,
}

impl std::fmt::Debug for PolicyFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyFeed")
    }
}

/// An empty cache and the feed that fills it.
pub fn policy_cache() -> (PolicyCache, PolicyFeed) {
    let (policies, policies_w) = reflector::store();
    let (bindings, bindings_w) = reflector::store();
    (
        PolicyCache {
            policies,
            bindings,
            compiled_policies: Default::default(),
            compiled_bindings: Default::default(),
        },
        PolicyFeed {
            policies: policies_w,
            bindings: bindings_w,
        },
    )
}

/// Lists and watches every `K` into `writer` until the stream ends (shared with the webhook
/// cache).
pub(crate) async fn inform<K>(client: kube::Client, writer: reflector::store::Writer<K>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let stream = watcher(Api::<K>::all(client), watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(reflector::reflector(writer, stream));
    while let Some(ev) = stream.next().await {
        if let Err(e) = ev {
            tracing::debug!(error = %e, kind = %K::kind(&()), "admission configuration informer");
        }
    }
}

impl PolicyFeed {
    /// Lists and watches policies and bindings through `client` until `stop`.
    pub async fn run(self, client: kube::Client, stop: CancellationToken) {
        let both = futures::future::join(
            inform(client.clone(), self.policies),
            inform(client, self.bindings),
        );
        tokio::select! {
            _ = both => {}
            _ = stop.cancelled() => {}
        }
    }
}

/// `cache[name]` for `obj` of `version`: reused when the version is the cached one.
fn compiled<T, S: serde::Serialize>(
    cache: &Compiled<T>,
    name: &str,
    version: &str,
    obj: &S,
    parse: impl Fn(&serde_json::Value) -> T,
) -> Arc<T> {
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((v, t)) = c.get(name) {
        if v == version {
            return t.clone();
        }
    }
    let t = Arc::new(parse(&serde_json::to_value(obj).unwrap_or_default()));
    c.insert(name.to_string(), (version.to_string(), t.clone()));
    t
}

fn forget_except<T>(cache: &Compiled<T>, names: &[String]) {
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if c.len() > names.len() {
        c.retain(|k, _| names.contains(k));
    }
}

impl PolicyCache {
    /// Whether both kinds have been listed once.
    pub fn ready(&self) -> bool {
        // A reflector store is ready once its first list has been applied.
        futures::FutureExt::now_or_never(self.policies.wait_until_ready()).is_some()
            && futures::FutureExt::now_or_never(self.bindings.wait_until_ready()).is_some()
    }

    /// Waits until both kinds have been listed once.
    pub async fn wait_until_ready(&self) {
        let _ = self.policies.wait_until_ready().await;
        let _ = self.bindings.wait_until_ready().await;
    }

    /// Every policy that has bindings, with them, by policy name.
    pub fn hooks(&self) -> Vec<Hook> {
        let bindings = self.bindings.state();
        if bindings.is_empty() {
            return Vec::new();
        }
        let version = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            m.resource_version.clone().unwrap_or_default()
        };
        let parsed: Vec<Arc<Binding>> = bindings
            .iter()
            .map(|b| {
                let name = b.metadata.name.clone().unwrap_or_default();
                compiled(
                    &self.compiled_bindings,
                    &name,
                    &version(&b.metadata),
                    b.as_ref(),
                    Binding::parse,
                )
            })
            .collect();
        forget_except(
            &self.compiled_bindings,
            &parsed.iter().map(|b| b.name.clone()).collect::<Vec<_>>(),
        );
        let policies = self.policies.state();
        let mut names = Vec::with_capacity(policies.len());
        let mut hooks: Vec<Hook> = Vec::new();
        for p in &policies {
            let name = p.metadata.name.clone().unwrap_or_default();
            names.push(name.clone());
            let bound: Vec<Arc<Binding>> = parsed
                .iter()
                .filter(|b| b.policy_name == name)
                .cloned()
                .collect();
            if bound.is_empty() {
                continue;
            }
            let policy = compiled(
                &self.compiled_policies,
                &name,
                &version(&p.metadata),
                p.as_ref(),
                Policy::parse,
            );
            hooks.push(Hook {
                policy,
                bindings: bound,
            });
        }
        forget_except(&self.compiled_policies, &names);
        hooks.sort_by(|a, b| a.policy.name.cmp(&b.policy.name));
        for h in &mut hooks {
            h.bindings.sort_by(|a, b| a.name.cmp(&b.name));
        }
        hooks
    }
}
