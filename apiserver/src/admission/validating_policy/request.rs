//! The `request` and `namespaceObject` values policy expressions see (upstream's
//! `CreateAdmissionRequest` and `CreateNamespaceObject`).

use serde_json::{json, Map, Value};

use crate::admission::Attributes;
use k3rs_apimachinery::catalog::Resource;

/// The kind a request writes: the subresource's (`pods/binding` → `Binding`) or the
/// resource's.
fn kind_of(a: &Attributes) -> (&'static str, &'static str, &'static str) {
    let r = a.resource;
    match a
        .subresource
        .as_deref()
        .and_then(|s| r.subresources.iter().find(|x| x.name == s))
    {
        Some(s) => (s.group, s.version, s.kind),
        None => (r.group, r.version, r.kind),
    }
}

/// `request`: an `admission.k8s.io/v1 AdmissionRequest` without the objects; `matched` is
/// the resource the policy's rules matched the request as.
pub fn admission_request(a: &Attributes, matched: &Resource, uid: &str) -> Value {
    let (group, version, kind) = kind_of(a);
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let resource =
        |r: &Resource| json!({"group": r.group, "version": r.version, "resource": r.plural});
    let mut m = Map::new();
    m.insert("uid".into(), json!(uid));
    m.insert("kind".into(), gvk.clone());
    m.insert("resource".into(), resource(matched));
    m.insert("requestKind".into(), gvk);
    m.insert("requestResource".into(), resource(a.resource));
    if let Some(sub) = a.subresource.as_deref().filter(|s| !s.is_empty()) {
        m.insert("subResource".into(), json!(sub));
        m.insert("requestSubResource".into(), json!(sub));
    }
    let name = super::matcher::request_name(a);
    if !name.is_empty() {
        m.insert("name".into(), json!(name));
    }
    if !a.namespace.is_empty() {
        m.insert("namespace".into(), json!(a.namespace));
    }
    m.insert("operation".into(), json!(a.operation.as_str()));
    let user = a
        .user
        .as_ref()
        .map(|u| serde_json::to_value(u.as_ref()).unwrap_or_default())
        .unwrap_or_else(|| json!({}));
    m.insert("userInfo".into(), user);
    m.insert("dryRun".into(), json!(a.dry_run));
    Value::Object(m)
}

/// `namespaceObject`: the namespace's metadata (without managedFields), spec and status.
pub fn namespace_object(ns: &Value) -> Value {
    let mut metadata = ns["metadata"].clone();
    if let Some(m) = metadata.as_object_mut() {
        m.remove("managedFields");
    }
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": metadata, "spec": ns["spec"], "status": ns["status"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use k3rs_apimachinery::catalog;
    use std::sync::Arc;

    #[test]
    fn requests_carry_kind_resource_user_and_omit_empty_fields() {
        let a = Attributes {
            operation: Operation::Create,
            resource: catalog::lookup("", "v1", "pods").unwrap(),
            subresource: Some("binding".into()),
            namespace: "n".into(),
            name: "p".into(),
            object: None,
            old_object: None,
            user: Some(Arc::new(k3rs_auth::UserInfo::authenticated(
                "alice",
                vec!["dev".into()],
            ))),
            dry_run: false,
            reinvocation: Default::default(),
        };
        let r = admission_request(&a, a.resource, "u1");
        assert_eq!(
            r["kind"],
            json!({"group": "", "version": "v1", "kind": "Binding"})
        );
        assert_eq!(
            r["resource"],
            json!({"group": "", "version": "v1", "resource": "pods"})
        );
        assert_eq!(r["subResource"], "binding");
        assert_eq!(r["operation"], "CREATE");
        assert_eq!(r["userInfo"]["username"], "alice");
        assert_eq!(r["name"], "p");
        let mut cluster = a.clone();
        cluster.resource = catalog::lookup("", "v1", "nodes").unwrap();
        cluster.subresource = None;
        cluster.namespace = String::new();
        let r = admission_request(&cluster, cluster.resource, "u2");
        assert!(r.get("namespace").is_none() && r.get("subResource").is_none());
        assert_eq!(r["kind"]["kind"], "Node");
    }

    #[test]
    fn namespace_objects_drop_managed_fields() {
        let ns = json!({"metadata": {"name": "n", "labels": {"a": "b"}, "managedFields": [{}]},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let o = namespace_object(&ns);
        assert!(o["metadata"].get("managedFields").is_none());
        assert_eq!(o["metadata"]["labels"]["a"], "b");
        assert_eq!(o["status"]["phase"], "Active");
    }
}
