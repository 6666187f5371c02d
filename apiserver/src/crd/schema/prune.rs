//! Pruning: fields a structural schema does not declare are dropped (kube-apiserver's
//! `structuralpruning`), unless `x-kubernetes-preserve-unknown-fields` keeps them. At the
//! root and in embedded resources `apiVersion`, `kind` and `metadata` are always kept.

use serde_json::Value;

use super::{child, embedded, field_schema, index, preserves_unknown};

/// Removes the undeclared fields of `obj` (a whole custom resource); returns their paths in
/// document order (kube's `unknown field "spec.x"` warnings and Strict errors use them).
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, obj, "", true, &mut out);
    out
}

fn walk(schema: &Value, v: &mut Value, at: &str, is_root: bool, out: &mut Vec<String>) {
    match v {
        Value::Object(fields) => {
            let keep_meta = is_root || embedded(schema);
            let preserve = preserves_unknown(schema);
            let mut dropped = Vec::new();
            for (k, val) in fields.iter_mut() {
                if keep_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match field_schema(schema, k) {
                    Some(s) => walk(s, val, &child(at, k), false, out),
                    None if preserve || schema["additionalProperties"] == true => {}
                    None => dropped.push(k.clone()),
                }
            }
            for k in dropped {
                fields.remove(&k);
                out.push(child(at, &k));
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(s, item, &index(at, i), false, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_undeclared_fields_and_keeps_preserved_ones() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "pod": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}},
            "status": {"type": "object"}}});
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"},
            "spec": {"size": 1, "bogus": true, "items": [{"name": "x", "extra": 1}],
                     "free": {"any": {"thing": 1}}, "labels": {"a": "b"},
                     "pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "junk": 1}},
            "top": 1});
        let dropped = prune(&schema, &mut obj);
        assert_eq!(
            dropped,
            ["spec.items[0].extra", "spec.pod.junk", "spec.bogus", "top"]
        );
        assert_eq!(obj["spec"]["free"], json!({"any": {"thing": 1}}));
        assert_eq!(obj["spec"]["labels"], json!({"a": "b"}));
        assert_eq!(obj["spec"]["pod"]["kind"], "Pod");
        assert_eq!(obj["spec"]["items"], json!([{"name": "x"}]));
        assert_eq!(obj["metadata"]["name"], "a");
    }
}
