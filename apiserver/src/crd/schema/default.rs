//! Defaulting from a structural schema's `default`s (kube-apiserver's `structuraldefaulting`):
//! a missing property, or a `null` one whose schema is not `nullable`, gets a copy of its
//! default; objects and arrays are walked so nested defaults apply too.

use serde_json::Value;

use super::field_schema;

/// Applies the defaults of `schema` to `v` in place.
pub fn apply(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(fields) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, s) in props {
                    let Some(d) = s.get("default") else { continue };
                    match fields.get_mut(k) {
                        None => {
                            fields.insert(k.clone(), d.clone());
                        }
                        Some(slot) if slot.is_null() && s["nullable"] != true => *slot = d.clone(),
                        Some(_) => {}
                    }
                }
            }
            for (k, val) in fields.iter_mut() {
                if let Some(s) = field_schema(schema, k) {
                    apply(s, val);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    apply(s, item);
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
    fn fills_missing_and_null_fields_recursively() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "default": {},
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "opt": {"type": "string", "nullable": true, "default": "x"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {"proto": {"type": "string", "default": "TCP"}}}}}}}});
        let mut empty = json!({"metadata": {"name": "a"}});
        apply(&schema, &mut empty);
        assert_eq!(
            empty["spec"],
            json!({"replicas": 1, "mode": "fast", "opt": "x"})
        );
        let mut given = json!({"spec": {"replicas": 3, "mode": null, "opt": null, "ports": [{"proto": "UDP"}, {}]}});
        apply(&schema, &mut given);
        assert_eq!(
            given["spec"],
            json!({"replicas": 3, "mode": "fast", "opt": null, "ports": [{"proto": "UDP"}, {"proto": "TCP"}]})
        );
    }
}
