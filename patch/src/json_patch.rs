//! RFC 6902 JSON patch (`application/json-patch+json`) with the `json-patch` crate, errors
//! mapped as kube-apiserver maps them: a body that is not a JSON array of objects is 400, an
//! operation that cannot be applied (a `test` that does not match, a path that does not exist,
//! an unknown `op`, a missing `path`) is 422, more than 10,000 operations is 413, and `copy`
//! operations that together copy more than 3 MiB are 413 (upstream's
//! `AccumulatedCopySizeLimit`), so a short patch cannot double an object until memory runs out.

use serde_json::Value;

use super::PatchError;

/// kube-apiserver's `maxJSONPatchOperations`.
pub const MAX_OPERATIONS: usize = 10_000;

/// How many bytes (as JSON) all `copy` operations of one patch may copy: kube-apiserver's
/// request body limit.
pub const MAX_COPIED_BYTES: usize = 3 * 1024 * 1024;

/// Applies a JSON patch body to `live`; atomic: on error nothing is applied.
///
/// # Errors
/// [`PatchError::BadRequest`] when the body is not a JSON array of objects,
/// [`PatchError::TooLarge`] past [`MAX_OPERATIONS`], [`PatchError::TestFailed`] when a `test`
/// operation fails and [`PatchError::Invalid`] when another operation is malformed or cannot
/// be applied.
pub fn apply(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let raw: Vec<serde_json::Map<String, Value>> =
        serde_json::from_slice(body).map_err(|e| PatchError::BadRequest(e.to_string()))?;
    if raw.len() > MAX_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
            raw.len()
        )));
    }
    let ops = raw
        .into_iter()
        .enumerate()
        .map(|(i, op)| {
            serde_json::from_value(Value::Object(op))
                .map_err(|e| PatchError::Invalid(format!("operation {i}: {e}")))
        })
        .collect::<Result<Vec<json_patch::PatchOperation>, _>>()?;
    let mut doc = live.clone();
    let mut copied = 0usize;
    // One operation at a time, so that the copy budget is checked before each copy is made.
    for op in &ops {
        if let json_patch::PatchOperation::Copy(c) = op {
            if let Some(from) = doc.pointer(c.from.as_str()) {
                copied = copied.saturating_add(json_size(from, MAX_COPIED_BYTES - copied));
                if copied > MAX_COPIED_BYTES {
                    return Err(PatchError::TooLarge(format!(
                        "Unable to copy {} to {}: the patch copies more than {MAX_COPIED_BYTES} bytes",
                        c.from, c.path
                    )));
                }
            }
        }
        json_patch::patch(&mut doc, std::slice::from_ref(op)).map_err(|e| match e.kind {
            json_patch::PatchErrorKind::TestFailed => PatchError::TestFailed(e.to_string()),
            _ => PatchError::Invalid(e.to_string()),
        })?;
    }
    Ok(doc)
}

/// The length of `v` as JSON, counted only up to `budget + 1` bytes (serializing stops there).
fn json_size(v: &Value, budget: usize) -> usize {
    struct Counter {
        n: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.limit {
                return Err(std::io::Error::other("over budget"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter {
        n: 0,
        limit: budget,
    };
    let _ = serde_json::to_writer(&mut c, v);
    c.n
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(live: Value, patch: Value) -> Result<Value, PatchError> {
        apply(&live, patch.to_string().as_bytes())
    }

    fn cm() -> Value {
        json!({"kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1"}},
               "data": {"k": "v"}, "list": [1, 2, 3]})
    }

    #[test]
    fn add_remove_replace_move_copy_test() {
        let out = run(
            cm(),
            json!([
                {"op": "test", "path": "/data/k", "value": "v"},
                {"op": "add", "path": "/data/new", "value": "n"},
                {"op": "remove", "path": "/metadata/labels/x"},
                {"op": "replace", "path": "/list/0", "value": 9},
                {"op": "add", "path": "/list/-", "value": 4},
                {"op": "move", "from": "/data/k", "path": "/data/moved"},
                {"op": "copy", "from": "/data/new", "path": "/metadata/labels/copy"}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"kind": "ConfigMap",
                   "metadata": {"name": "a", "labels": {"copy": "n"}},
                   "data": {"new": "n", "moved": "v"}, "list": [9, 2, 3, 4]})
        );
    }

    #[test]
    fn copies_that_double_the_object_are_refused_before_they_grow_it() {
        let live = json!({"data": {"a": "x".repeat(64 * 1024)}});
        // Each copy doubles `/data/d`: 64 KiB, 128 KiB, ... far past any limit after 40 ops.
        let mut ops = vec![json!({"op": "copy", "from": "/data/a", "path": "/data/d"})];
        for _ in 0..40 {
            ops.push(json!({"op": "copy", "from": "/data", "path": "/data/d"}));
        }
        let err = run(live.clone(), Value::Array(ops)).unwrap_err();
        assert!(matches!(err, PatchError::TooLarge(_)), "{err:?}");
        assert_eq!(err.status_code(), 413);

        // A few small copies are fine.
        let ops = json!([{"op": "copy", "from": "/data/a", "path": "/data/b"},
                         {"op": "copy", "from": "/data/a", "path": "/data/c"}]);
        let out = run(live, ops).unwrap();
        assert_eq!(out["data"]["b"], out["data"]["a"]);
    }

    #[test]
    fn escaped_pointer_segments() {
        let live = json!({"metadata": {"annotations": {"a/b": "1", "c~d": "2"}}});
        let out = run(
            live,
            json!([
                {"op": "remove", "path": "/metadata/annotations/a~1b"},
                {"op": "replace", "path": "/metadata/annotations/c~0d", "value": "3"}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"metadata": {"annotations": {"c~d": "3"}}}));
    }

    #[test]
    fn failed_test_is_its_own_error_and_nothing_is_applied() {
        let err = run(
            cm(),
            json!([
                {"op": "add", "path": "/data/x", "value": "y"},
                {"op": "test", "path": "/data/k", "value": "other"}
            ]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::TestFailed(_)), "{err:?}");
        assert_eq!(err.status_code(), 422);
        assert_eq!(err.reason(), "Invalid");
    }

    #[test]
    fn missing_paths_are_invalid() {
        for op in [
            json!({"op": "remove", "path": "/data/nope"}),
            json!({"op": "replace", "path": "/nope/x", "value": 1}),
            json!({"op": "add", "path": "/list/7", "value": 1}),
            json!({"op": "move", "from": "/nope", "path": "/data/x"}),
        ] {
            let err = run(cm(), json!([op])).unwrap_err();
            assert!(matches!(err, PatchError::Invalid(_)), "{op}: {err:?}");
            assert_eq!(err.status_code(), 422);
        }
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        for body in [&b"{\"op\": \"add\"}"[..], b"not json", b"[1]"] {
            let err = apply(&cm(), body).unwrap_err();
            assert!(matches!(err, PatchError::BadRequest(_)), "{err:?}");
            assert_eq!(err.status_code(), 400);
        }
    }

    #[test]
    fn malformed_operations_are_invalid() {
        for body in [
            &b"[{\"op\": \"frobnicate\", \"path\": \"/a\"}]"[..],
            b"[{\"op\": \"add\", \"value\": 1}]",
            b"[{\"op\": \"move\", \"path\": \"/a\"}]",
        ] {
            let err = apply(&cm(), body).unwrap_err();
            assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
        }
    }

    #[test]
    fn too_many_operations() {
        let ops: Vec<Value> = (0..=MAX_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"}))
            .collect();
        let err = run(cm(), Value::Array(ops)).unwrap_err();
        assert_eq!(err.status_code(), 413);
    }

    #[test]
    fn rollout_undo_replaces_the_template() {
        let live =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "v2"}]}}}});
        let template = json!({"spec": {"containers": [{"name": "a", "image": "v1"}]}});
        let out = run(
            live,
            json!([{"op": "replace", "path": "/spec/template", "value": template}]),
        )
        .unwrap();
        assert_eq!(out, json!({"spec": {"template": template}}));
    }
}
