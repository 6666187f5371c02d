//! The admission chain (kube-apiserver's `admission.Interface`): after authentication and
//! authorization, every create, update, delete and connect passes the mutating plugins in
//! order, then — once the registry has defaulted and validated the object — the validating
//! plugins in order. The first error ends the request.
//!
//! # Guarantees
//! - Mutating plugins run before the strategy's validation; what they change is validated and
//!   stored like the client's own fields.
//! - Validating plugins see the final object (after defaulting and validation) and may not
//!   change it; they run on every attempt of a write that the registry retries.
//! - Plugin denials leave as kube-apiserver's: mostly 403 Forbidden with the plugin's message
//!   (see [`forbidden`]).
//!
//! # Adding a plugin
//! Implement [`Mutating`] and/or [`Validating`] and add it to [`Chain::standard`] at the
//! position kube-apiserver's recommended plugin order gives it.

#[cfg(test)]
mod cached_reads_tests;
pub mod cel_pool;
pub mod default_storage_class;
pub mod default_toleration_seconds;
pub mod limit_ranger;
pub mod lister;
pub mod namespace_lifecycle;
pub mod node_password;
pub mod node_restriction;
pub mod pod_security;
pub mod priority;
pub mod quota;
pub mod reinvocation;
pub mod service_account;
pub mod storage_protection;
pub mod validating_policy;
pub mod webhook;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::registry::Registry;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};
use k3rs_auth::UserInfo;

/// What a request does (`admission.Operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// The upper-case name kube-apiserver uses (`CREATE`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// `admission.Attributes`: everything a plugin decides on.
#[derive(Debug, Clone)]
pub struct Attributes {
    pub operation: Operation,
    pub resource: &'static Resource,
    /// `status`, `binding`, `exec`…; `None` for the main resource.
    pub subresource: Option<String>,
    /// "" for cluster-scoped resources.
    pub namespace: String,
    /// "" on a create whose name is still to be generated.
    pub name: String,
    /// The object being written (create, update); mutating plugins change it in place.
    /// `None` for delete and connect.
    pub object: Option<Value>,
    /// The stored object (update, delete), shared with the write that reads it (an update
    /// does not copy it for admission).
    pub old_object: Option<Arc<Value>>,
    /// Who asks; `None` for the server's own bootstrap writes.
    pub user: Option<Arc<UserInfo>>,
    pub dry_run: bool,
    /// Whether the mutating plugins run a second time ([`reinvocation`]).
    pub reinvocation: reinvocation::Reinvocation,
}

impl Attributes {
    /// The attributes of a write to `t` (no object yet).
    pub fn of_write(
        operation: Operation,
        t: &crate::registry::Target,
        opts: &crate::registry::WriteOptions,
    ) -> Attributes {
        Attributes {
            operation,
            resource: t.resource,
            subresource: t.subresource.clone(),
            namespace: t.namespace.clone().unwrap_or_default(),
            name: t.name().to_string(),
            object: None,
            old_object: None,
            user: opts.user.clone(),
            dry_run: opts.dry_run,
            reinvocation: Default::default(),
        }
    }

    /// Whether this is `kind` of the core group (`""`) or of `group`, with no subresource.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.resource.group == group && self.resource.kind == kind && self.subresource.is_none()
    }

    /// The name an error is about: the object's name, else its generateName, else `Unknown`
    /// (kube-apiserver's `extractResourceName`); the request's name when there is no object.
    pub fn subject_name(&self) -> String {
        let Some(obj) = &self.object else {
            return if self.name.is_empty() {
                "Unknown".into()
            } else {
                self.name.clone()
            };
        };
        let m = &obj["metadata"];
        [&m["name"], &m["generateName"]]
            .into_iter()
            .filter_map(Value::as_str)
            .find(|s| !s.is_empty())
            .unwrap_or("Unknown")
            .to_string()
    }
}

/// `admission.NewForbidden`: `<resource> "<name>" is forbidden: <why>`.
pub fn forbidden(a: &Attributes, why: &str) -> ApiError {
    let name = a.subject_name();
    ApiError::forbidden(
        Subject {
            group: a.resource.group,
            kind: a.resource.plural,
            name: &name,
        },
        why,
    )
}

/// Every stored object of `group/v1 plural` (in `namespace`, or all of a cluster-scoped
/// resource), read for a plugin's decision.
pub(crate) async fn stored(
    reg: &Registry,
    group: &str,
    plural: &str,
    namespace: Option<&str>,
) -> ApiResult<Vec<Value>> {
    let Some(r) = k3rs_apimachinery::catalog::lookup(group, "v1", plural) else {
        return Ok(Vec::new());
    };
    let prefix = crate::registry::keys::list_prefix(r, namespace);
    let kvs = reg.all_under(prefix).await?;
    kvs.iter().map(crate::registry::decode).collect()
}

/// A plugin that may change the object (`admission.MutationInterface`).
pub trait Mutating: Send + Sync {
    /// The plugin's name as `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;
    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>>;
}

/// A plugin that only accepts or rejects (`admission.ValidationInterface`).
pub trait Validating: Send + Sync {
    /// The plugin's name as `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;
    fn validate<'a>(&'a self, a: &'a Attributes, reg: &'a Registry)
        -> BoxFuture<'a, ApiResult<()>>;
}

/// The ordered plugins.
#[derive(Clone, Default)]
pub struct Chain {
    mutating: Vec<Arc<dyn Mutating>>,
    validating: Vec<Arc<dyn Validating>>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("mutating", &self.mutating_names())
            .field("validating", &self.validating_names())
            .finish()
    }
}

impl Chain {
    /// No plugins: every request is admitted.
    pub fn empty() -> Chain {
        Chain::default()
    }

    /// The plugins k3rs enables, in kube-apiserver's recommended order, with their defaults,
    /// reading the store.
    pub fn standard() -> Chain {
        Chain::standard_with(
            Default::default(),
            Default::default(),
            lister::Listers::default(),
        )
    }

    /// [`Chain::standard`] with the toleration seconds of `--kube-apiserver-arg`, a
    /// PodSecurity plugin (its configuration and namespace cache) and the caches the other
    /// plugins read first.
    pub fn standard_with(
        tolerations: default_toleration_seconds::DefaultTolerationSeconds,
        pod_security: pod_security::PodSecurity,
        listers: lister::Listers,
    ) -> Chain {
        let lifecycle = Arc::new(namespace_lifecycle::NamespaceLifecycle {
            namespaces: listers.namespaces,
        });
        let sa = Arc::new(service_account::ServiceAccount {
            accounts: listers.service_accounts,
        });
        let priority = Arc::new(priority::Priority {
            classes: listers.priority_classes,
        });
        let limits = Arc::new(limit_ranger::LimitRanger {
            ranges: listers.limit_ranges,
        });
        Chain {
            mutating: vec![
                lifecycle,
                limits.clone(),
                sa.clone(),
                priority.clone(),
                Arc::new(tolerations),
                Arc::new(default_storage_class::DefaultStorageClass {
                    classes: listers.storage_classes,
                }),
                Arc::new(storage_protection::StorageObjectInUseProtection),
                Arc::new(node_password::NodePassword),
            ],
            validating: vec![
                limits,
                sa,
                Arc::new(node_restriction::NodeRestriction),
                Arc::new(pod_security),
                priority,
                Arc::new(quota::ResourceQuota {
                    quotas: listers.resource_quotas,
                }),
            ],
        }
    }

    /// Adds the ValidatingAdmissionPolicy plugin where kube-apiserver runs it: after the
    /// other validating plugins, before ResourceQuota (so a denied write charges no quota).
    /// `authorizer` answers the policies' `authorizer` checks.
    pub fn with_policies(
        mut self,
        cache: validating_policy::cache::PolicyCache,
        authorizer: Option<k3rs_auth::authz::Chain>,
    ) -> Chain {
        let plugin = Arc::new(validating_policy::ValidatingAdmissionPolicy { cache, authorizer });
        let at = self
            .validating
            .iter()
            .position(|p| p.name() == "ResourceQuota")
            .unwrap_or(self.validating.len());
        self.validating.insert(at, plugin);
        self
    }

    /// Adds the admission webhook plugins where kube-apiserver runs them: the mutating one
    /// after the other mutating plugins, the validating one after ValidatingAdmissionPolicy,
    /// before ResourceQuota. `authorizer` answers match conditions' `authorizer` checks.
    pub fn with_webhooks(
        mut self,
        cache: webhook::cache::WebhookCache,
        authorizer: Option<k3rs_auth::authz::Chain>,
    ) -> Chain {
        self.mutating.push(Arc::new(webhook::MutatingWebhooks {
            cache: cache.clone(),
            authorizer: authorizer.clone(),
        }));
        let at = self
            .validating
            .iter()
            .position(|p| p.name() == "ResourceQuota")
            .unwrap_or(self.validating.len());
        self.validating.insert(
            at,
            Arc::new(webhook::ValidatingWebhooks { cache, authorizer }),
        );
        self
    }

    /// Appends a mutating plugin (it runs after the ones already there).
    pub fn push_mutating(&mut self, p: Arc<dyn Mutating>) {
        self.mutating.push(p);
    }

    /// Appends a validating plugin (it runs after the ones already there).
    pub fn push_validating(&mut self, p: Arc<dyn Validating>) {
        self.validating.push(p);
    }

    pub fn mutating_names(&self) -> Vec<&'static str> {
        self.mutating.iter().map(|p| p.name()).collect()
    }

    pub fn validating_names(&self) -> Vec<&'static str> {
        self.validating.iter().map(|p| p.name()).collect()
    }

    /// Runs the mutating plugins in order, and once more when a webhook changed the object
    /// ([`reinvocation`]).
    pub async fn admit(&self, a: &mut Attributes, reg: &Registry) -> ApiResult<()> {
        for p in &self.mutating {
            p.admit(a, reg).await?;
        }
        if a.reinvocation.should_reinvoke && !a.reinvocation.is_reinvoke {
            a.reinvocation.is_reinvoke = true;
            for p in &self.mutating {
                p.admit(a, reg).await?;
            }
        }
        Ok(())
    }

    /// Runs the validating plugins in order.
    pub async fn validate(&self, a: &Attributes, reg: &Registry) -> ApiResult<()> {
        for p in &self.validating {
            p.validate(a, reg).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::catalog;
    use k3rs_apimachinery::informers::SharedInformerFactory;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    pub(crate) fn attrs(op: Operation, plural: &str, ns: &str, obj: Option<Value>) -> Attributes {
        Attributes {
            operation: op,
            resource: catalog::lookup("", "v1", plural).unwrap(),
            subresource: None,
            namespace: ns.into(),
            name: String::new(),
            object: obj,
            old_object: None,
            user: None,
            dry_run: false,
            reinvocation: Default::default(),
        }
    }

    #[test]
    fn forbidden_names_the_object_or_its_generate_name() {
        let a = attrs(
            Operation::Create,
            "pods",
            "n",
            Some(json!({"metadata": {"name": "p"}})),
        );
        assert_eq!(forbidden(&a, "no").message, "pods \"p\" is forbidden: no");
        let a = attrs(
            Operation::Create,
            "pods",
            "n",
            Some(json!({"metadata": {"generateName": "web-"}})),
        );
        assert_eq!(
            forbidden(&a, "no").message,
            "pods \"web-\" is forbidden: no"
        );
        let a = attrs(Operation::Create, "pods", "n", Some(json!({})));
        assert_eq!(
            forbidden(&a, "no").message,
            "pods \"Unknown\" is forbidden: no"
        );
        let e = forbidden(&a, "no");
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
    }

    #[test]
    fn policies_run_before_resource_quota() {
        let informers = SharedInformerFactory::unstarted(CancellationToken::new());
        let cache = validating_policy::cache::PolicyCache::new(&informers);
        let hooks = webhook::cache::WebhookCache::new(&informers);
        let c = Chain::standard()
            .with_policies(cache, None)
            .with_webhooks(hooks, None);
        let names = c.validating_names();
        assert_eq!(
            names[names.len() - 3..],
            [
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook",
                "ResourceQuota"
            ]
        );
        assert_eq!(c.mutating_names().last(), Some(&"MutatingAdmissionWebhook"));
    }

    #[test]
    fn standard_order() {
        let c = Chain::standard();
        assert_eq!(
            c.mutating_names(),
            vec![
                "NamespaceLifecycle",
                "LimitRanger",
                "ServiceAccount",
                "Priority",
                "DefaultTolerationSeconds",
                "DefaultStorageClass",
                "StorageObjectInUseProtection",
                "NodePassword"
            ]
        );
        assert_eq!(
            c.validating_names(),
            vec![
                "LimitRanger",
                "ServiceAccount",
                "NodeRestriction",
                "PodSecurity",
                "Priority",
                "ResourceQuota"
            ]
        );
    }
}
