//! Server-side field validation (`fieldValidation=Strict|Warn|Ignore`) against the OpenAPI
//! schemas: the fields of a body that its kind's schema does not declare, as kube names them
//! (`spec.template.spec.containers[0].imagee`), found or dropped (kube's decoder drops them).

use serde_json::{Map, Value};

use super::schemas::REF_PREFIX;

/// The unknown fields of `obj`, whose definition is `root` in `schemas`, sorted.
pub fn unknown_fields(schemas: &Map<String, Value>, root: &str, obj: &Value) -> Vec<String> {
    prune_unknown(schemas, root, &mut obj.clone())
}

/// Removes the unknown fields of `obj`; returns their paths, sorted.
pub fn prune_unknown(schemas: &Map<String, Value>, root: &str, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = schemas.get(root) {
        walk(schemas, s, obj, "", &mut out);
    }
    out.sort();
    out
}

/// Follows `$ref` and single-element `allOf` to the schema that describes a value.
fn resolve<'a>(schemas: &'a Map<String, Value>, mut s: &'a Value) -> &'a Value {
    for _ in 0..8 {
        let r = s
            .get("$ref")
            .or_else(|| s.get("allOf")?.get(0)?.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(REF_PREFIX));
        match r.and_then(|name| schemas.get(name)) {
            Some(next) => s = next,
            None => break,
        }
    }
    s
}

fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

fn walk(
    schemas: &Map<String, Value>,
    schema: &Value,
    v: &mut Value,
    at: &str,
    out: &mut Vec<String>,
) {
    let schema = resolve(schemas, schema);
    match v {
        Value::Object(fields) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                fields.retain(|k, _| {
                    let known = props.contains_key(k);
                    if !known {
                        out.push(join(at, k));
                    }
                    known
                });
                for (k, child) in fields.iter_mut() {
                    if let Some(p) = props.get(k) {
                        walk(schemas, p, child, &join(at, k), out);
                    }
                }
            } else if let Some(items @ Value::Object(_)) = schema.get("additionalProperties") {
                for (k, child) in fields.iter_mut() {
                    walk(schemas, items, child, &join(at, k), out);
                }
            }
            // Neither: a free-form object (RawExtension, FieldsV1, …).
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, child) in items.iter_mut().enumerate() {
                    walk(schemas, item_schema, child, &format!("{at}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::schemas::components;
    use super::*;
    use k3rs_apimachinery::catalog::in_group_version;
    use serde_json::json;

    #[test]
    fn finds_unknown_fields_at_every_depth() {
        let apps = components(&in_group_version("apps", "v1").collect::<Vec<_>>());
        let d = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "x", "labels": {"a": "b"}, "bogus": 1, "managedFields": [{"fieldsV1": {"f:x": {}}}]},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"spec": {"containers": [{"name": "c", "imagee": "nginx", "resources": {"limits": {"cpu": "1"}}}]}},
                "replicaz": 3,
            },
        });
        assert_eq!(
            unknown_fields(&apps.schemas, "io.k8s.api.apps.v1.Deployment", &d),
            [
                "metadata.bogus",
                "spec.replicaz",
                "spec.template.spec.containers[0].imagee"
            ]
        );
        let mut pruned = d.clone();
        prune_unknown(&apps.schemas, "io.k8s.api.apps.v1.Deployment", &mut pruned);
        assert!(pruned["metadata"].get("bogus").is_none());
        assert!(pruned["spec"].get("replicaz").is_none());
        assert_eq!(
            pruned["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "c", "resources": {"limits": {"cpu": "1"}}})
        );
        assert_eq!(
            pruned["metadata"]["managedFields"],
            d["metadata"]["managedFields"]
        );
        let ok = json!({"metadata": {"name": "x"}, "spec": {"replicas": 1, "strategy": {"type": "Recreate"}}});
        assert!(unknown_fields(&apps.schemas, "io.k8s.api.apps.v1.Deployment", &ok).is_empty());
    }
}
