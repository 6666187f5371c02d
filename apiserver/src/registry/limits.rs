//! What the store accepts: objects of at most 1.5 MiB encoded (etcd's request limit, which
//! kube-apiserver answers with 413) and nested no deeper than a JSON body may be, so that what
//! is stored can always be read back, served and sent again.

use serde_json::Value;

use k3rs_apimachinery::status::{ApiError, ApiResult};

/// etcd's default `--max-request-bytes`.
pub const MAX_OBJECT_BYTES: usize = 3 * 512 * 1024;

/// The deepest nesting of arrays and objects a JSON body may have (serde_json's limit): a
/// patch must not store an object that no client could send back.
pub const MAX_DEPTH: usize = 127;

/// The nesting depth of `v`: 0 for a scalar, 1 for `{}` or `[]`. Iterative, so a deep value
/// cannot exhaust the stack; stops counting past `limit`.
pub fn depth(v: &Value, limit: usize) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        let d = d + 1;
        deepest = deepest.max(d);
        if deepest > limit {
            return deepest;
        }
        stack.extend(children.map(|c| (c, d)));
    }
    deepest
}

/// Refuses an object nested deeper than [`MAX_DEPTH`] (422).
pub fn check_depth(obj: &Value) -> ApiResult<()> {
    if depth(obj, MAX_DEPTH) > MAX_DEPTH {
        return Err(ApiError::new(
            422,
            "Invalid",
            format!("the object is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    Ok(())
}

/// Refuses an encoded object larger than [`MAX_OBJECT_BYTES`] (413, as etcd's limit surfaces).
pub fn check_size(encoded: &[u8]) -> ApiResult<()> {
    if encoded.len() > MAX_OBJECT_BYTES {
        return Err(ApiError::too_large(format!(
            "etcdserver: request is too large: the object is {} bytes encoded, the limit is {MAX_OBJECT_BYTES}",
            encoded.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `levels` nested arrays, built without the parser so values past its limit can be made.
    fn nested(levels: usize) -> Value {
        (1..levels).fold(Value::Array(vec![]), |v, _| Value::Array(vec![v]))
    }

    #[test]
    fn the_storable_depth_is_the_parsable_depth() {
        let deepest = nested(MAX_DEPTH);
        assert_eq!(depth(&deepest, usize::MAX), MAX_DEPTH);
        check_depth(&deepest).unwrap();
        assert!(serde_json::from_str::<Value>(&deepest.to_string()).is_ok());

        let deeper = nested(MAX_DEPTH + 1);
        assert_eq!(check_depth(&deeper).unwrap_err().code, 422);
        assert!(serde_json::from_str::<Value>(&deeper.to_string()).is_err());

        // Counting stops past the limit.
        assert_eq!(depth(&nested(5_000), 10), 11);
    }

    #[test]
    fn scalars_and_wide_values() {
        assert_eq!(depth(&Value::from(1), 10), 0);
        let wide = serde_json::json!({"a": [1, 2, {"b": {}}], "c": {}});
        assert_eq!(depth(&wide, 10), 4);
    }

    #[test]
    fn sizes() {
        check_size(&vec![0; MAX_OBJECT_BYTES]).unwrap();
        let err = check_size(&vec![0; MAX_OBJECT_BYTES + 1]).unwrap_err();
        assert_eq!(err.code, 413);
    }
}
