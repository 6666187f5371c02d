//! The OpenAPI v3 document of a custom group-version: the operations of its resources (as
//! for built-ins) and each kind's definition from its `openAPIV3Schema`, named as kube names
//! them (`com.example.v1.Widget`), with `apiVersion`, `kind`, `metadata` and
//! `x-kubernetes-group-version-kind`, so `kubectl explain` and validation work.

use serde_json::{json, Value};

use super::model::CustomVersion;
use crate::openapi::schemas::{self, KindSchema, REF_PREFIX};
use k3rs_apimachinery::catalog::Resource;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const STRATEGIC_MERGE: &str = "application/strategic-merge-patch+json";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// `com.example.v1.Widget` for group `example.com`.
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{ "group": group, "version": version, "kind": kind }])
}

fn kind_schema(cv: &CustomVersion) -> Value {
    let mut s = cv
        .schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if !s["properties"].is_object() {
        s["properties"] = json!({});
    }
    s["properties"]["apiVersion"] = json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"});
    s["properties"]["kind"] = json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"});
    s["properties"]["metadata"] = json!({"allOf": [{"$ref": format!("{REF_PREFIX}{OBJECT_META}")}], "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"});
    s["x-kubernetes-group-version-kind"] = gvk(&cv.group, &cv.version, &cv.kind);
    s
}

fn list_schema(cv: &CustomVersion, item: &str) -> Value {
    json!({
        "type": "object",
        "description": format!("{} is a list of {}", cv.list_kind, cv.kind),
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": format!("{REF_PREFIX}{item}")}},
            "metadata": {"allOf": [{"$ref": format!("{REF_PREFIX}{LIST_META}")}]},
        },
        "x-kubernetes-group-version-kind": gvk(&cv.group, &cv.version, &cv.list_kind),
    })
}

/// The document of one custom group-version (all `rows` share it).
pub fn document(rows: &[(&'static Resource, &CustomVersion)]) -> Value {
    let resources: Vec<&'static Resource> = rows.iter().map(|(r, _)| *r).collect();
    let mut c = schemas::components(&resources);
    for (name, def) in crate::openapi::Definitions::get().closure(OBJECT_META) {
        c.schemas.insert(name, def);
    }
    for (r, cv) in rows {
        let name = definition_name(&cv.group, &cv.version, &cv.kind);
        c.schemas
            .insert(format!("{name}List"), list_schema(cv, &name));
        c.schemas.insert(name.clone(), kind_schema(cv));
        c.kinds.push(KindSchema {
            group: r.group,
            version: r.version,
            kind: r.kind,
            name,
        });
    }
    let mut doc = crate::openapi::document(&c, &resources);
    // Custom resources take no strategic merge patch (kubectl then sends merge patches).
    for item in doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|p| p.values_mut())
    {
        // (`get_mut`, not indexing: indexing would add `"patch": null` to items without one.)
        let content = item
            .get_mut("patch")
            .and_then(|p| p.get_mut("requestBody"))
            .and_then(|b| b.get_mut("content"))
            .and_then(Value::as_object_mut);
        if let Some(content) = content {
            content.remove(STRATEGIC_MERGE);
        }
    }
    doc
}
