//! NamespaceLifecycle: nothing is created in a namespace that does not exist or is being
//! terminated, and the system namespaces cannot be deleted. The namespace is read from the
//! API server's cache ([`super::lister`]), else from the store (a namespace the cache lacks,
//! or one written through this server in the last 30 s: upstream's live lookup and
//! `forceLiveLookupCache`).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::lister::Lister;
use super::{forbidden, Attributes, Mutating, Operation};
use crate::registry::Registry;
use crate::registry::Target;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::ObjectRef;

/// Namespaces that may not be deleted (kube-apiserver's immortal namespaces).
pub const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

/// The plugin (mutating in kube-apiserver's order, though it only rejects).
#[derive(Debug, Clone, Default)]
pub struct NamespaceLifecycle {
    /// The namespaces it reads first.
    pub namespaces: Lister<Namespace>,
}

/// What the plugin needs to know about the request's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceState {
    Missing,
    Active,
    Terminating,
}

/// Whether the request needs the namespace looked up at all.
pub fn needs_namespace(a: &Attributes) -> bool {
    !a.namespace.is_empty()
        && !a.is("", "Namespace")
        && a.operation != Operation::Delete
        && !is_access_review(a)
}

/// Local access reviews answer about the namespace; they never leak its state.
fn is_access_review(a: &Attributes) -> bool {
    a.resource.group == "authorization.k8s.io"
}

/// The decision, given the namespace's state (`None` when [`needs_namespace`] is false).
pub fn decide(a: &Attributes, ns: Option<NamespaceState>) -> ApiResult<()> {
    if a.operation == Operation::Delete
        && a.is("", "Namespace")
        && IMMORTAL.contains(&a.name.as_str())
    {
        return Err(ApiError::forbidden(
            Subject {
                group: "",
                kind: "namespaces",
                name: &a.name,
            },
            "this namespace may not be deleted",
        ));
    }
    match ns {
        None | Some(NamespaceState::Active) => Ok(()),
        Some(NamespaceState::Missing) => Err(ApiError::not_found(Subject {
            group: "",
            kind: "namespaces",
            name: &a.namespace,
        })),
        Some(NamespaceState::Terminating) if a.operation == Operation::Create => {
            let mut e = forbidden(
                a,
                &format!(
                    "unable to create new content in namespace {} because it is being terminated",
                    a.namespace
                ),
            );
            if let Some(d) = e.details.as_mut() {
                d["causes"] = json!([{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {} is being terminated", a.namespace),
                    "field": "metadata.namespace",
                }]);
            }
            Err(e)
        }
        Some(NamespaceState::Terminating) => Ok(()),
    }
}

/// The state of namespace `name`: cached, else stored.
async fn namespace_state(
    cache: &Lister<Namespace>,
    reg: &Registry,
    name: &str,
) -> ApiResult<NamespaceState> {
    let cached = cache.cache(name).and_then(|c| c.get(&ObjectRef::new(name)));
    if let Some(ns) = cached {
        let phase = ns.status.as_ref().and_then(|s| s.phase.as_deref());
        return Ok(state(ns.metadata.deletion_timestamp.is_some(), phase));
    }
    let Some(namespaces) = catalog::lookup("", "v1", "namespaces") else {
        return Ok(NamespaceState::Active);
    };
    let t = Target {
        resource: namespaces,
        namespace: None,
        name: Some(name.to_string()),
        subresource: None,
    };
    match reg.get(&t).await {
        Ok(ns) => Ok(state_of(&ns)),
        Err(e) if e.code == 404 => Ok(NamespaceState::Missing),
        Err(e) => Err(e),
    }
}

fn state_of(ns: &Value) -> NamespaceState {
    state(meta::is_deleting(ns), ns["status"]["phase"].as_str())
}

/// A namespace being deleted, or in phase `Terminating`, is terminating.
fn state(deleting: bool, phase: Option<&str>) -> NamespaceState {
    if deleting || phase == Some("Terminating") {
        NamespaceState::Terminating
    } else {
        NamespaceState::Active
    }
}

impl Mutating for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            // Its subresources too: a `finalize` may end the namespace.
            if a.resource.group.is_empty() && a.resource.kind == "Namespace" {
                self.namespaces.note_write(&a.name);
            }
            let ns = if needs_namespace(a) {
                Some(namespace_state(&self.namespaces, reg, &a.namespace).await?)
            } else {
                None
            };
            decide(a, ns)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::attrs;
    use super::*;

    #[test]
    fn creates_need_a_live_namespace() {
        let a = attrs(
            Operation::Create,
            "configmaps",
            "gone",
            Some(json!({"metadata": {"name": "c"}})),
        );
        assert!(needs_namespace(&a));
        assert_eq!(decide(&a, Some(NamespaceState::Active)), Ok(()));
        let e = decide(&a, Some(NamespaceState::Missing)).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "namespaces \"gone\" not found")
        );
        let e = decide(&a, Some(NamespaceState::Terminating)).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "configmaps \"c\" is forbidden: unable to create new content in namespace gone because it is being terminated"
        );
        assert_eq!(
            e.details.unwrap()["causes"][0]["reason"],
            "NamespaceTerminating"
        );
    }

    #[test]
    fn updates_in_terminating_namespaces_pass_and_deletes_are_not_looked_up() {
        let a = attrs(Operation::Update, "configmaps", "n", Some(json!({})));
        assert_eq!(decide(&a, Some(NamespaceState::Terminating)), Ok(()));
        let e = decide(&a, Some(NamespaceState::Missing)).unwrap_err();
        assert_eq!(e.code, 404);
        let d = attrs(Operation::Delete, "configmaps", "n", None);
        assert!(!needs_namespace(&d));
        let ns = attrs(Operation::Create, "namespaces", "", Some(json!({})));
        assert!(!needs_namespace(&ns));
    }

    #[test]
    fn system_namespaces_are_immortal() {
        let mut a = attrs(Operation::Delete, "namespaces", "", None);
        a.name = "kube-system".into();
        let e = decide(&a, None).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                403,
                "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
            )
        );
        a.name = "scratch".into();
        assert_eq!(decide(&a, None), Ok(()));
    }

    #[test]
    fn terminating_is_a_deletion_timestamp_or_the_phase() {
        assert_eq!(
            state_of(&json!({"metadata": {"deletionTimestamp": "t"}})),
            NamespaceState::Terminating
        );
        assert_eq!(
            state_of(&json!({"status": {"phase": "Terminating"}})),
            NamespaceState::Terminating
        );
        assert_eq!(
            state_of(&json!({"status": {"phase": "Active"}})),
            NamespaceState::Active
        );
    }
}
