//! The ValidatingAdmissionPolicy plugin: CEL policies (`admissionregistration.k8s.io/v1`)
//! that accept or reject writes, bound to the requests they apply to by bindings.
//!
//! # Guarantees
//! - Policies and bindings come from an in-memory cache fed by a watch ([`cache`]); each
//!   policy version is compiled once. Until the cache has its first lists, requests wait
//!   (at most [`READY_WAIT`]) and are then refused (`not yet ready to handle request`).
//! - The admissionregistration resources themselves are never subject to policies (so a bad
//!   policy can always be fixed), nor are the server's own bootstrap writes (no user).
//! - For each policy with bindings (by name), in order: its matchConstraints; its
//!   configuration errors; each binding's matchResources and parameters; one evaluation per
//!   parameter ([`evaluate`]); the decisions go where [`outcome`] says.
//! - A request whose namespace must be read for a selector or `namespaceObject` reads it at
//!   most once.

pub mod authorizer;
pub mod cache;
pub mod definition;
pub mod evaluate;
pub mod matcher;
pub mod model;
pub mod outcome;
pub mod params;
pub mod request;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use super::{forbidden, Attributes, Validating};
use crate::registry::{Registry, Target};
use cache::{Hook, PolicyCache};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::status::ApiResult;
use outcome::Outcome;

/// How long a request waits for the cache's first lists.
pub const READY_WAIT: Duration = Duration::from_secs(10);

/// The plugin.
#[derive(Debug, Clone)]
pub struct ValidatingAdmissionPolicy {
    pub cache: PolicyCache,
    /// Answers the expressions' `authorizer` checks (none: `authorizer` is unbound).
    pub authorizer: Option<k3rs_auth::authz::Chain>,
}

/// Whether the request writes admission configuration (never subject to policies or
/// webhooks).
pub(crate) fn exempt(a: &Attributes) -> bool {
    a.resource.group == "admissionregistration.k8s.io"
}

/// The request's namespace, read once when first needed.
pub(crate) struct Namespace<'a> {
    reg: &'a Registry,
    name: &'a str,
    read: Option<Option<Value>>,
}

impl<'a> Namespace<'a> {
    /// The namespace of `a` (none for cluster-scoped requests and Namespaces themselves).
    pub(crate) fn of(a: &'a Attributes, reg: &'a Registry) -> Namespace<'a> {
        Namespace {
            reg,
            name: if in_namespace(a) { &a.namespace } else { "" },
            read: None,
        }
    }

    pub(crate) async fn get(&mut self) -> Option<&Value> {
        if self.read.is_none() {
            let value = match catalog::lookup("", "v1", "namespaces") {
                Some(r) if !self.name.is_empty() => {
                    let t = Target {
                        resource: r,
                        namespace: None,
                        name: Some(self.name.to_string()),
                        subresource: None,
                    };
                    self.reg.get(&t).await.ok()
                }
                _ => None,
            };
            self.read = Some(value);
        }
        self.read.as_ref().and_then(Option::as_ref)
    }

    pub(crate) async fn labels(&mut self) -> Option<BTreeMap<String, String>> {
        let ns = self.get().await?;
        matcher::labels(Some(ns))
    }
}

/// Whether `a` is about a namespaced object (not a Namespace itself).
pub(crate) fn in_namespace(a: &Attributes) -> bool {
    a.resource.namespaced && !a.namespace.is_empty()
}

async fn dispatch(
    a: &Attributes,
    reg: &Registry,
    hooks: Vec<Hook>,
    authz: Option<&k3rs_auth::authz::Chain>,
) -> Outcome {
    let mut out = Outcome::default();
    let authorizer = authz.and_then(|c| authorizer::variable(c, a));
    let mut ns = Namespace::of(a, reg);
    let uid = uuid::Uuid::new_v4().to_string();
    for hook in hooks {
        let policy = &hook.policy;
        let labels = if in_namespace(a) && !policy.constraints.namespace_selector.is_empty() {
            ns.labels().await
        } else {
            None
        };
        let matched = match matcher::matches(&policy.constraints, a, labels.as_ref()) {
            Err(e) => {
                out.config_error(policy, None, &e.to_string());
                continue;
            }
            Ok(None) => continue,
            Ok(Some(r)) => r,
        };
        if let Some(e) = &policy.config_error {
            out.config_error(policy, None, e);
            continue;
        }
        let request = request::admission_request(a, matched, &uid);
        for binding in &hook.bindings {
            if let Some(e) = &binding.config_error {
                out.config_error(policy, Some(binding), e);
                continue;
            }
            if let Some(m) = &binding.match_resources {
                let labels = if in_namespace(a) && !m.namespace_selector.is_empty() {
                    ns.labels().await
                } else {
                    None
                };
                match matcher::matches(m, a, labels.as_ref()) {
                    Err(e) => {
                        out.config_error(policy, Some(binding), &e.to_string());
                        continue;
                    }
                    Ok(None) => continue,
                    Ok(Some(_)) => {}
                }
            }
            let params =
                match params::collect(reg, policy.param_kind.as_ref(), binding, &a.namespace).await
                {
                    Ok(p) => p,
                    Err(e) => {
                        out.config_error(policy, Some(binding), &e.to_string());
                        continue;
                    }
                };
            let namespace_object = match ns.get().await {
                Some(n) => request::namespace_object(n),
                None => Value::Null,
            };
            for p in params {
                let input = evaluate::Input {
                    object: a.object.clone().unwrap_or(Value::Null),
                    old_object: a.old_object.as_deref().cloned().unwrap_or(Value::Null),
                    request: request.clone(),
                    namespace_object: namespace_object.clone(),
                    params: p,
                    authorizer: authorizer.clone(),
                };
                let policy = policy.clone();
                let eval = evaluate::evaluate_on_pool(policy, input).await;
                out.record(&hook.policy, binding, eval);
            }
        }
    }
    out
}

impl Validating for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.user.is_none() || exempt(a) {
                return Ok(());
            }
            if !self.cache.ready()
                && tokio::time::timeout(READY_WAIT, self.cache.wait_until_ready())
                    .await
                    .is_err()
            {
                return Err(forbidden(a, "not yet ready to handle request"));
            }
            let hooks = self.cache.hooks();
            if hooks.is_empty() {
                return Ok(());
            }
            let out = dispatch(a, reg, hooks, self.authorizer.as_ref()).await;
            for w in &out.warnings {
                crate::warning::add(w.clone());
            }
            for (k, v) in &out.audit {
                crate::audit::annotations::add(k.clone(), v.clone());
            }
            match out.error(a) {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })
    }
}
