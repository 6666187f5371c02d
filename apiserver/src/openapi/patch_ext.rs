//! Patch extensions on the schemas (`x-kubernetes-patch-merge-key`,
//! `x-kubernetes-patch-strategy`, `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`), read from the patch module's built-in table
//! ([`BuiltinPatchMeta`]) so that the table stays the one source: kubectl's client-side apply
//! computes its strategic merge patch from these.
//!
//! The table is keyed by field paths of a kind; schemas are shared definitions. Each kind's
//! schema is walked from its root, and the first path reaching a definition decides its
//! properties' extensions (the table gives the same answer for every path to a definition).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::schemas::REF_PREFIX;
use k3rs_apimachinery::catalog::Resource;
use k3rs_patch::meta::{BuiltinPatchMeta, FieldMeta, ListKind, MapKind, PatchMeta};

/// Adds the extensions of kind `r` (whose definition is `root`) to `schemas`.
pub fn annotate(schemas: &mut Map<String, Value>, r: &Resource, root: &str) {
    let Some(meta) = BuiltinPatchMeta::for_kind(&r.group_version(), r.kind) else {
        return;
    };
    let mut visited = HashSet::new();
    walk(schemas, &meta, root, &mut Vec::new(), &mut visited);
}

/// The definition a property points to, through `$ref`, `allOf[0]`, `items` or
/// `additionalProperties`.
fn target(prop: &Value) -> Option<String> {
    let direct = |v: &Value| {
        v.get("$ref")
            .or_else(|| v.get("allOf")?.get(0)?.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(REF_PREFIX))
            .map(str::to_string)
    };
    direct(prop)
        .or_else(|| prop.get("items").and_then(direct))
        .or_else(|| prop.get("additionalProperties").and_then(direct))
}

fn walk(
    schemas: &mut Map<String, Value>,
    meta: &BuiltinPatchMeta,
    def: &str,
    path: &mut Vec<String>,
    visited: &mut HashSet<String>,
) {
    if !visited.insert(def.to_string()) {
        return;
    }
    let fields: Vec<String> = match schemas.get(def).and_then(|d| d.get("properties")) {
        Some(Value::Object(p)) => p.keys().cloned().collect(),
        _ => return,
    };
    for field in fields {
        path.push(field.clone());
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let field_meta = meta.field(&refs);
        let Some(Value::Object(prop)) = schemas
            .get_mut(def)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(&field))
        else {
            path.pop();
            continue;
        };
        let is_list = prop.get("type").and_then(Value::as_str) == Some("array");
        for (k, v) in extensions(&field_meta, is_list) {
            prop.insert(k.to_string(), v);
        }
        let next = target(&Value::Object(prop.clone()));
        if let Some(next) = next {
            walk(schemas, meta, &next, path, visited);
        }
        path.pop();
    }
}

/// The extensions kube's schemas carry for a field's patch metadata.
pub fn extensions(m: &FieldMeta, is_list: bool) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    let mut strategy = Vec::new();
    if is_list {
        match &m.list {
            ListKind::Map { merge_key, keys } => {
                out.push((
                    "x-kubernetes-patch-merge-key",
                    Value::from(merge_key.as_str()),
                ));
                strategy.push("merge");
                out.push(("x-kubernetes-list-type", Value::from("map")));
                let keys: Vec<Value> = keys.iter().map(|(k, _)| Value::from(k.as_str())).collect();
                out.push(("x-kubernetes-list-map-keys", Value::Array(keys)));
            }
            ListKind::Set => {
                strategy.push("merge");
                out.push(("x-kubernetes-list-type", Value::from("set")));
            }
            ListKind::Atomic => {}
        }
    }
    if m.retain_keys {
        strategy.push("retainKeys");
    }
    if !strategy.is_empty() {
        out.push((
            "x-kubernetes-patch-strategy",
            Value::from(strategy.join(",")),
        ));
    }
    if !is_list && m.map == MapKind::Atomic {
        out.push(("x-kubernetes-map-type", Value::from("atomic")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::schemas::components;
    use k3rs_apimachinery::catalog::in_group_version;
    use serde_json::json;

    #[test]
    fn pod_and_workload_merge_keys() {
        let core = components(&in_group_version("", "v1").collect::<Vec<_>>());
        let spec = &core.schemas["io.k8s.api.core.v1.PodSpec"]["properties"];
        assert_eq!(spec["containers"]["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(spec["containers"]["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(spec["containers"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            spec["containers"]["x-kubernetes-list-map-keys"],
            json!(["name"])
        );
        assert_eq!(
            spec["volumes"]["x-kubernetes-patch-strategy"],
            "merge,retainKeys"
        );
        assert!(spec["tolerations"]
            .get("x-kubernetes-patch-strategy")
            .is_none());
        let container = &core.schemas["io.k8s.api.core.v1.Container"]["properties"];
        assert_eq!(
            container["ports"]["x-kubernetes-patch-merge-key"],
            "containerPort"
        );
        assert_eq!(
            container["ports"]["x-kubernetes-list-map-keys"],
            json!(["containerPort", "protocol"])
        );
        assert_eq!(
            container["volumeMounts"]["x-kubernetes-patch-merge-key"],
            "mountPath"
        );
        let meta = &core.schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"];
        assert_eq!(meta["finalizers"]["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(meta["finalizers"]["x-kubernetes-list-type"], "set");
        assert_eq!(
            meta["ownerReferences"]["x-kubernetes-patch-merge-key"],
            "uid"
        );
        let svc = &core.schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"];
        assert_eq!(svc["ports"]["x-kubernetes-patch-merge-key"], "port");

        let apps = components(&in_group_version("apps", "v1").collect::<Vec<_>>());
        let d = &apps.schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"];
        assert_eq!(d["strategy"]["x-kubernetes-patch-strategy"], "retainKeys");
        let spec = &apps.schemas["io.k8s.api.core.v1.PodSpec"]["properties"];
        assert_eq!(
            spec["initContainers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
    }
}
