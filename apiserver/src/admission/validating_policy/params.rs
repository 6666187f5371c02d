//! The parameter objects of a binding (upstream's `CollectParams`): what `params` is bound to
//! in each evaluation of a policy.
//!
//! # Guarantees
//! - No `paramKind`, or a binding without `paramRef`: one evaluation with `params` null.
//! - A namespaced `paramKind` is read in `paramRef.namespace`, else in the request's
//!   namespace (an error for a cluster-scoped request); a cluster-scoped one must not name a
//!   namespace.
//! - `paramRef.name` reads one object, `paramRef.selector` every object it selects; none
//!   found is an error with `parameterNotFoundAction: Deny`, no evaluation with `Allow`.

use serde_json::Value;

use super::model::{Binding, ParamKind};
use crate::registry::{keys, Registry, Target};
use k3rs_apimachinery::catalog::{self, Resource};

/// The served resource of a `paramKind`.
pub fn resource_of(pk: &ParamKind) -> Option<&'static Resource> {
    let (group, version) = pk
        .api_version
        .split_once('/')
        .unwrap_or(("", &pk.api_version));
    catalog::all()
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.kind == pk.kind)
}

fn labels_match(sel: &k3rs_apimachinery::selector::label::LabelSelector, o: &Value) -> bool {
    sel.matches(&super::matcher::labels(Some(o)).unwrap_or_default())
}

/// A configuration error of a binding's parameters (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// The policy's `paramKind` is not a served kind.
    #[error("paramKind kind `{api_version}, Kind={kind}` not known")]
    UnknownKind {
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
    /// A namespaced `paramRef` without a namespace for a cluster-scoped request.
    #[error(
        "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
    )]
    NoNamespace,
    /// A namespace on a cluster-scoped `paramKind`.
    #[error("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")]
    ClusterScopedNamespace,
    /// Reading the parameters failed (the store's message).
    #[error("{0}")]
    Read(String),
    /// No parameters, and the binding denies then.
    #[error("no params found for policy binding with `Deny` parameterNotFoundAction")]
    NotFound,
}

/// The parameter objects to evaluate with (`Value::Null` for "no params"); `Err` is a
/// configuration error of the binding.
pub async fn collect(
    reg: &Registry,
    param_kind: Option<&ParamKind>,
    binding: &Binding,
    request_namespace: &str,
) -> Result<Vec<Value>, ParamsError> {
    let (Some(pk), Some(pr)) = (param_kind, binding.param_ref.as_ref()) else {
        return Ok(vec![Value::Null]);
    };
    let Some(r) = resource_of(pk) else {
        return Err(ParamsError::UnknownKind {
            api_version: pk.api_version.clone(),
            kind: pk.kind.clone(),
        });
    };
    let namespace = if r.namespaced {
        match (pr.namespace.as_str(), request_namespace) {
            ("", "") => return Err(ParamsError::NoNamespace),
            ("", ns) | (ns, _) => Some(ns.to_string()),
        }
    } else if !pr.namespace.is_empty() {
        return Err(ParamsError::ClusterScopedNamespace);
    } else {
        None
    };
    let found = if !pr.name.is_empty() {
        let t = Target {
            resource: r,
            namespace: namespace.clone(),
            name: Some(pr.name.clone()),
            subresource: None,
        };
        match reg.get(&t).await {
            Ok(o) => vec![o],
            Err(e) if e.code == 404 => Vec::new(),
            Err(e) => return Err(ParamsError::Read(e.message)),
        }
    } else {
        let sel = pr.selector.clone().unwrap_or_default();
        let kvs = reg
            .all_under(keys::list_prefix(r, namespace.as_deref()))
            .await
            .map_err(|e| ParamsError::Read(e.message))?;
        let mut out = Vec::new();
        for kv in &kvs {
            let o = crate::registry::decode_as(r, kv).map_err(|e| ParamsError::Read(e.message))?;
            if labels_match(&sel, &o) {
                out.push(o);
            }
        }
        out
    };
    if found.is_empty() && pr.deny_when_missing {
        return Err(ParamsError::NotFound);
    }
    Ok(found
        .into_iter()
        .map(|mut o| {
            // Typed objects carry their apiVersion and kind, as upstream wraps them.
            o["apiVersion"] = Value::from(pk.api_version.clone());
            o["kind"] = Value::from(pk.kind.clone());
            o
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_kinds_resolve_to_served_resources() {
        let pk = |v: &str, k: &str| ParamKind {
            api_version: v.into(),
            kind: k.into(),
        };
        assert_eq!(
            resource_of(&pk("v1", "ConfigMap")).map(|r| r.plural),
            Some("configmaps")
        );
        assert_eq!(
            resource_of(&pk("rbac.authorization.k8s.io/v1", "ClusterRole")).map(|r| r.plural),
            Some("clusterroles")
        );
        assert!(resource_of(&pk("v2", "ConfigMap")).is_none());
        assert!(resource_of(&pk("example.com/v1", "Nothing")).is_none());
    }
}
