//! RFC 7386 JSON merge patch (`application/merge-patch+json`) with the `json-patch` crate:
//! objects merge recursively, `null` deletes, everything else (lists included) replaces.

use serde_json::Value;

use super::PatchError;

/// Applies a merge patch body to `live`.
///
/// # Errors
/// [`PatchError::BadRequest`] when the body is not JSON, or is not an object (the result would
/// not be an object).
pub fn apply(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::BadRequest(e.to_string()))?;
    if !patch.is_object() {
        return Err(PatchError::BadRequest(
            "a merge patch must be a JSON object".to_string(),
        ));
    }
    Ok(merge(live, &patch))
}

/// RFC 7386 `MergePatch(target, patch)`.
pub fn merge(target: &Value, patch: &Value) -> Value {
    let mut doc = target.clone();
    json_patch::merge(&mut doc, patch);
    doc
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// The examples of RFC 7386 appendix A (target, patch, result).
    #[test]
    fn rfc7386_appendix_a() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (target, patch, result) in cases {
            assert_eq!(merge(&target, &patch), result, "{target} + {patch}");
        }
    }

    #[test]
    fn kubectl_label_and_scale() {
        let live = json!({"metadata": {"name": "d", "labels": {"app": "x", "old": "1"}},
                          "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}});
        let body = br#"{"metadata":{"labels":{"new":"2","old":null}},"spec":{"replicas":3}}"#;
        assert_eq!(
            apply(&live, body).unwrap(),
            json!({"metadata": {"name": "d", "labels": {"app": "x", "new": "2"}},
                   "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c"}]}}}})
        );
    }

    #[test]
    fn lists_are_replaced() {
        let live = json!({"metadata": {"finalizers": ["a", "b"]}});
        let out = apply(&live, br#"{"metadata":{"finalizers":["c"]}}"#).unwrap();
        assert_eq!(out, json!({"metadata": {"finalizers": ["c"]}}));
    }

    #[test]
    fn malformed_and_non_object_bodies_are_bad_requests() {
        for body in [&b"{"[..], b"[1]", b"\"x\"", b"null"] {
            let err = apply(&json!({}), body).unwrap_err();
            assert_eq!(err.status_code(), 400, "{}", String::from_utf8_lossy(body));
        }
    }

    pub(crate) fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0i64..100).prop_map(Value::from),
            "[a-c]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Applying the same merge patch twice gives the same result as once.
        #[test]
        fn merge_patch_is_idempotent(target in json_value(), patch in json_value()) {
            let once = merge(&target, &patch);
            prop_assert_eq!(merge(&once, &patch), once);
        }
    }
}
