//! From the OpenAPI v3 group-version documents to the one Swagger 2.0 document of
//! `/openapi/v2`, as kube-apiserver writes it: every path of every group-version, every
//! definition under `#/definitions/`, parameters with their type in place, request bodies as
//! `in: body` parameters with the operation's `consumes`, responses with one `schema` and the
//! operation's `produces`, `schemes: [https]`.
//!
//! Schemas keep only what Swagger 2.0 has (`nullable`, `oneOf`, `anyOf`, `not` and the other
//! v3-only keys are dropped; an `allOf` of one `$ref` becomes that `$ref`, as kube writes it).
//! Custom resources' schemas are first made fit for kubectl's v2 reader as
//! apiextensions-apiserver does (`ToStructuralOpenAPIV2`, [`structural_v2`]).

use serde_json::{json, Map, Value};

use crate::openapi::schemas::REF_PREFIX as V3_REF;

/// Prefix of every `$ref` in the v2 document.
pub const V2_REF: &str = "#/definitions/";

/// The keys of a Swagger 2.0 schema object (besides `x-…` extensions).
const SCHEMA_KEYS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "readOnly",
    "example",
];

const VERBS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];

/// The paths and definitions of one or more v3 documents, merged.
#[derive(Debug, Default, Clone)]
pub struct Parts {
    pub paths: Map<String, Value>,
    pub definitions: Map<String, Value>,
}

impl Parts {
    /// Adds one v3 document. `custom` marks a custom resources' document: its definitions
    /// not already present get [`structural_v2`] first. Definitions present in several
    /// documents are merged key by key (the first value of a key wins), so one annotated
    /// with patch extensions in one document keeps them.
    pub fn add(&mut self, doc: &Value, custom: bool) {
        if let Some(paths) = doc["paths"].as_object() {
            for (p, item) in paths {
                self.paths.insert(p.clone(), path_item(item));
            }
        }
        let Some(schemas) = doc["components"]["schemas"].as_object() else {
            return;
        };
        for (name, def) in schemas {
            let mut def = def.clone();
            match self.definitions.get_mut(name) {
                Some(existing) => merge(existing, schema(&def)),
                None => {
                    if custom {
                        structural_v2(&mut def);
                    }
                    self.definitions.insert(name.clone(), schema(&def));
                }
            }
        }
    }

    /// The Swagger 2.0 document.
    pub fn document(&self, version: &str) -> Value {
        json!({
            "swagger": "2.0",
            "info": { "title": "Kubernetes", "version": version },
            "paths": self.paths,
            "definitions": self.definitions,
            "securityDefinitions": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                },
            },
            "security": [{ "BearerToken": [] }],
        })
    }
}

/// Adds the keys of `other` that `into` lacks, recursively through objects.
fn merge(into: &mut Value, other: Value) {
    if let (Value::Object(a), Value::Object(b)) = (into, other) {
        for (k, v) in b {
            match a.get_mut(&k) {
                Some(existing) => merge(existing, v),
                None => {
                    a.insert(k, v);
                }
            }
        }
    }
}

fn v2_ref(r: &str) -> String {
    match r.strip_prefix(V3_REF) {
        Some(name) => format!("{V2_REF}{name}"),
        None => r.to_string(),
    }
}

/// `Some($ref)` for `allOf: [{$ref}]`.
fn single_ref(all_of: Option<&Value>) -> Option<&str> {
    match all_of?.as_array()?.as_slice() {
        [only] if only.as_object().is_some_and(|o| o.len() == 1) => only["$ref"].as_str(),
        _ => None,
    }
}

/// A v3 schema as a Swagger 2.0 schema.
pub fn schema(v3: &Value) -> Value {
    let Some(m) = v3.as_object() else {
        return v3.clone();
    };
    let mut out = Map::new();
    let lone_ref = match m.get("$ref") {
        Some(_) => None,
        None => single_ref(m.get("allOf")),
    };
    if let Some(r) = lone_ref {
        out.insert("$ref".into(), v2_ref(r).into());
    }
    for (k, v) in m {
        let kept = SCHEMA_KEYS.contains(&k.as_str()) || k.starts_with("x-");
        if !kept || (k == "allOf" && lone_ref.is_some()) {
            continue;
        }
        let v = match k.as_str() {
            "$ref" => v.as_str().map(v2_ref).map(Value::from).unwrap_or(v.clone()),
            "properties" => match v.as_object() {
                Some(p) => p
                    .iter()
                    .map(|(name, s)| (name.clone(), schema(s)))
                    .collect::<Map<_, _>>()
                    .into(),
                None => v.clone(),
            },
            "items" | "additionalProperties" => schema(v),
            "allOf" => match v.as_array() {
                Some(a) => a.iter().map(schema).collect::<Vec<_>>().into(),
                None => v.clone(),
            },
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// apiextensions-apiserver's `ToStructuralOpenAPIV2`: junctors dropped (an `allOf` of one
/// `$ref`, which k3rs adds for `metadata`, stays); a nullable schema loses its type, items
/// and properties, and leaves its parent's `required`; a schema preserving unknown fields
/// loses its items and properties, and its type when `object`; an array without items loses
/// its type.
pub fn structural_v2(v: &mut Value) {
    let Some(s) = v.as_object_mut() else {
        return;
    };
    if single_ref(s.get("allOf")).is_none() {
        s.remove("allOf");
    }
    for junctor in ["oneOf", "anyOf", "not"] {
        s.remove(junctor);
    }
    let nullable = |s: &Value| s.get("nullable") == Some(&Value::Bool(true));
    if s.remove("nullable") == Some(Value::Bool(true)) {
        for k in ["type", "items", "properties"] {
            s.remove(k);
        }
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        s.remove("items");
        s.remove("properties");
        if s.get("type").and_then(Value::as_str) == Some("object") {
            s.remove("type");
        }
    }
    if !s.contains_key("items") && s.get("type").and_then(Value::as_str) == Some("array") {
        s.remove("type");
    }
    let nullable_fields: Vec<String> = s
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, f)| nullable(f))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    let nullable_values = s.get("additionalProperties").is_some_and(nullable);
    if let Some(Value::Array(required)) = s.get_mut("required") {
        required.retain(|r| !nullable_values && !nullable_fields.iter().any(|f| r == f));
        if required.is_empty() {
            s.remove("required");
        }
    }
    if let Some(Value::Object(p)) = s.get_mut("properties") {
        p.values_mut().for_each(structural_v2);
    }
    for k in ["items", "additionalProperties"] {
        if let Some(child) = s.get_mut(k) {
            structural_v2(child);
        }
    }
}

/// A v3 parameter (`schema: {type, …}`) as a v2 one (`type`, … in place).
fn parameter(p: &Value) -> Value {
    let mut out = Map::new();
    if let Some(m) = p.as_object() {
        for (k, v) in m {
            if k == "schema" {
                for (sk, sv) in v.as_object().into_iter().flatten() {
                    out.insert(sk.clone(), sv.clone());
                }
            } else {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn parameters(v: &Value) -> Vec<Value> {
    v.as_array()
        .map(|a| a.iter().map(parameter).collect())
        .unwrap_or_default()
}

fn path_item(item: &Value) -> Value {
    let mut out = Map::new();
    for (k, v) in item.as_object().into_iter().flatten() {
        if k == "parameters" {
            out.insert(k.clone(), parameters(v).into());
        } else if VERBS.contains(&k.as_str()) && v.is_object() {
            out.insert(k.clone(), operation(v));
        } else if k.starts_with("x-") {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// The media types of a v3 `content`, and the schema of the first.
fn content(c: &Value) -> (Vec<String>, Option<Value>) {
    let Some(m) = c.as_object() else {
        return (Vec::new(), None);
    };
    let types = m.keys().cloned().collect();
    let schema = m.values().next().map(|v| schema(&v["schema"]));
    (types, schema)
}

fn operation(op: &Value) -> Value {
    let mut out = Map::new();
    let mut params = Vec::new();
    let mut produces: Vec<String> = Vec::new();
    for (k, v) in op.as_object().into_iter().flatten() {
        match k.as_str() {
            "tags" | "summary" | "description" | "operationId" | "deprecated" => {
                out.insert(k.clone(), v.clone());
            }
            "parameters" => params.extend(parameters(v)),
            "requestBody" => {
                let (types, schema) = content(&v["content"]);
                let mut body = json!({ "name": "body", "in": "body" });
                if v["required"] == true {
                    body["required"] = true.into();
                }
                if let Some(s) = schema {
                    body["schema"] = s;
                }
                params.insert(0, body);
                out.insert("consumes".into(), types.into());
            }
            "responses" => {
                let mut responses = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let (types, schema) = content(&r["content"]);
                    for t in types {
                        if !produces.contains(&t) {
                            produces.push(t);
                        }
                    }
                    let mut resp = json!({ "description": r["description"] });
                    if let Some(s) = schema {
                        resp["schema"] = s;
                    }
                    responses.insert(code.clone(), resp);
                }
                out.insert(k.clone(), responses.into());
            }
            _ if k.starts_with("x-") => {
                out.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    if !params.is_empty() {
        out.insert("parameters".into(), params.into());
    }
    if !produces.is_empty() {
        out.insert("produces".into(), produces.into());
    }
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_take_the_swagger_2_shape() {
        let v3 = json!({
            "paths": {"/apis/apps/v1/namespaces/{namespace}/deployments/{name}": {
                "parameters": [{"name": "name", "in": "path", "description": "name of the Deployment", "required": true, "schema": {"type": "string", "uniqueItems": true}}],
                "patch": {
                    "tags": ["apps_v1"],
                    "description": "partially update the specified Deployment",
                    "operationId": "patchAppsV1NamespacedDeployment",
                    "parameters": [{"name": "fieldValidation", "in": "query", "description": "d", "schema": {"type": "string", "uniqueItems": true}}],
                    "requestBody": {"content": {
                        "application/apply-patch+yaml": {"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                        "application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                    }, "required": true},
                    "responses": {
                        "200": {"description": "OK", "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}},
                            "application/yaml": {"schema": {"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}},
                        }},
                        "401": {"description": "Unauthorized"},
                    },
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                },
            }},
        });
        let mut parts = Parts::default();
        parts.add(&v3, false);
        assert_eq!(
            parts.paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"],
            json!({
                "parameters": [{"name": "name", "in": "path", "description": "name of the Deployment", "required": true, "type": "string", "uniqueItems": true}],
                "patch": {
                    "tags": ["apps_v1"],
                    "description": "partially update the specified Deployment",
                    "operationId": "patchAppsV1NamespacedDeployment",
                    "consumes": ["application/apply-patch+yaml", "application/merge-patch+json"],
                    "produces": ["application/json", "application/yaml"],
                    "schemes": ["https"],
                    "parameters": [
                        {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                        {"name": "fieldValidation", "in": "query", "description": "d", "type": "string", "uniqueItems": true},
                    ],
                    "responses": {
                        "200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.api.apps.v1.Deployment"}},
                        "401": {"description": "Unauthorized"},
                    },
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                },
            })
        );
    }

    #[test]
    fn schemas_lose_v3_only_keys_and_single_ref_all_of() {
        let v3 = json!({
            "type": "object",
            "nullable": true,
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}, "description": "m"},
                "either": {"oneOf": [{"type": "string"}, {"type": "integer"}], "x-kubernetes-int-or-string": true},
                "list": {"type": "array", "items": {"$ref": "#/components/schemas/a.B"}},
                "map": {"type": "object", "additionalProperties": {"allOf": [{"$ref": "#/components/schemas/a.C"}], "writeOnly": true}},
            },
        });
        assert_eq!(
            schema(&v3),
            json!({
                "type": "object",
                "properties": {
                    "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "default": {}, "description": "m"},
                    "either": {"x-kubernetes-int-or-string": true},
                    "list": {"type": "array", "items": {"$ref": "#/definitions/a.B"}},
                    "map": {"type": "object", "additionalProperties": {"$ref": "#/definitions/a.C"}},
                },
            })
        );
    }

    #[test]
    fn custom_schemas_become_structural_v2_like_apiextensions() {
        let mut s = json!({
            "type": "object",
            "required": ["spec", "maybe"],
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/m.ObjectMeta"}]},
                "spec": {"type": "object", "anyOf": [{"required": ["a"]}], "properties": {
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"x": {"type": "string"}}},
                    "anything": {"type": "array", "x-kubernetes-preserve-unknown-fields": true, "items": {"type": "string"}},
                }},
                "maybe": {"type": "string", "nullable": true},
            },
        });
        structural_v2(&mut s);
        assert_eq!(
            s,
            json!({
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/m.ObjectMeta"}]},
                    "spec": {"type": "object", "properties": {
                        "free": {"x-kubernetes-preserve-unknown-fields": true},
                        "anything": {"x-kubernetes-preserve-unknown-fields": true},
                    }},
                    "maybe": {},
                },
            })
        );
    }

    #[test]
    fn shared_definitions_merge_extensions() {
        let doc = |ext: bool| {
            let mut owner = json!({"type": "array", "items": {"type": "string"}});
            if ext {
                owner["x-kubernetes-patch-merge-key"] = "uid".into();
            }
            json!({"components": {"schemas": {"m.ObjectMeta": {"type": "object", "properties": {"ownerReferences": owner}}}}})
        };
        let mut parts = Parts::default();
        parts.add(&doc(false), false);
        parts.add(&doc(true), false);
        assert_eq!(
            parts.definitions["m.ObjectMeta"]["properties"]["ownerReferences"]
                ["x-kubernetes-patch-merge-key"],
            "uid"
        );
    }
}
