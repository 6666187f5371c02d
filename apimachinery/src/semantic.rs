//! Equality of built-in objects as kube-apiserver sees them (`apiequality.Semantic.DeepEqual`
//! on typed objects), for JSON: what a typed decode erases is no difference.
//!
//! - A field set to `null` equals the field left out (Go decodes both to the zero value; a
//!   client round-tripping an object through its own types drops `creationTimestamp: null`
//!   in pod templates).
//! - An empty list equals a missing or `null` one (the forked `DeepEqual` treats nil and empty
//!   slices and maps alike).
//! - An empty object stays different from a missing one: it may be a pointer to an empty
//!   struct (`securityContext: {}`), which Go tells apart from nil.

use serde_json::Value;

/// Whether `a` and `b` are the same object once decoded (see the module docs).
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let present = |m: &serde_json::Map<String, Value>,
                           other: &serde_json::Map<String, Value>| {
                m.iter().all(|(k, v)| match other.get(k) {
                    Some(w) => equal(v, w),
                    None => erased(v),
                })
            };
            present(x, y) && present(y, x)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| equal(v, w))
        }
        (Value::Null, v) | (v, Value::Null) => erased(v),
        _ => a == b,
    }
}

/// Whether a field holding `v` decodes like a missing field.
fn erased(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_and_empty_lists_are_missing_fields() {
        let stored = json!({"template": {"metadata": {"creationTimestamp": null, "labels": {"a": "b"}},
                            "spec": {"containers": [{"name": "c", "args": []}]}}});
        let round_tripped = json!({"template": {"metadata": {"labels": {"a": "b"}},
                                   "spec": {"containers": [{"name": "c"}]}}});
        assert!(equal(&stored, &round_tripped));
        assert!(equal(&round_tripped, &stored));
        assert!(equal(&json!({"a": null}), &json!({"a": []})));
        assert!(equal(&json!(null), &json!([])));
    }

    #[test]
    fn real_differences_stay() {
        for (a, b) in [
            (json!({"a": 1}), json!({"a": 2})),
            (json!({"a": 1}), json!({})),
            (json!({"a": {}}), json!({})),
            (json!({"a": [1]}), json!({})),
            (json!({"a": [1, 2]}), json!({"a": [2, 1]})),
            (json!({"a": ""}), json!({})),
            (json!({"a": 0}), json!({"a": null})),
            (json!({"a": {"b": null}}), json!({"a": {"b": false}})),
        ] {
            assert!(!equal(&a, &b), "{a} vs {b}");
            assert!(!equal(&b, &a), "{b} vs {a}");
        }
    }
}
