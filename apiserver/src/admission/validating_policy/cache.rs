//! The policies and bindings the plugin decides on, read from two shared informers (as the
//! RBAC cache is) and compiled once per stored version.
//!
//! # Guarantees
//! - A policy's expressions are compiled when a request first needs that version of it
//!   (its `resourceVersion` changed), never per request.
//! - Until both kinds have been listed once, [`PolicyCache::ready`] is false.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k3rs_apimachinery::informers::{Informer, SharedInformerFactory};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};

use super::model::{Binding, Policy};

/// A policy with the bindings that name it.
#[derive(Debug, Clone)]
pub struct Hook {
    pub policy: Arc<Policy>,
    pub bindings: Vec<Arc<Binding>>,
}

type Compiled<T> = Mutex<HashMap<String, (String, Arc<T>)>>;

/// The plugin's view of the two kinds' shared informers, with the compiled forms.
#[derive(Clone)]
pub struct PolicyCache {
    policies: Informer<ValidatingAdmissionPolicy>,
    bindings: Informer<ValidatingAdmissionPolicyBinding>,
    compiled_policies: Arc<Compiled<Policy>>,
    compiled_bindings: Arc<Compiled<Binding>>,
}

impl std::fmt::Debug for PolicyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyCache")
            .field("policies", &self.policies.list().len())
            .field("bindings", &self.bindings.list().len())
            .finish()
    }
}

impl PolicyCache {
    /// The two kinds' informers of `informers` (which watch once it is started).
    pub fn new(informers: &SharedInformerFactory) -> PolicyCache {
        PolicyCache {
            policies: informers.informer(),
            bindings: informers.informer(),
            compiled_policies: Default::default(),
            compiled_bindings: Default::default(),
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
        self.policies.has_synced() && self.bindings.has_synced()
    }

    /// Waits until both kinds have been listed once (any number of requests may wait).
    pub async fn wait_until_ready(&self) {
        self.policies.wait_synced().await;
        self.bindings.wait_synced().await;
    }

    /// Every policy that has bindings, with them, by policy name.
    pub fn hooks(&self) -> Vec<Hook> {
        let bindings = self.bindings.list();
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
        let policies = self.policies.list();
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
