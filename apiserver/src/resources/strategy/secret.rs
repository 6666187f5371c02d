//! Secret decoding and defaulting: `stringData` is write-only (kube's v1 conversion merges it
//! into `data`, base64-encoded, winning over `data`, and drops it), and `type` defaults to
//! `Opaque`.

use base64::Engine;
use serde_json::{json, Map, Value};

pub fn defaults(secret: &mut Value) {
    let Some(obj) = secret.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(strings)) = obj.remove("stringData") {
        let data = obj
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (k, v) in strings {
                let text = v.as_str().unwrap_or_default();
                let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                data.insert(k, json!(encoded));
            }
        }
    }
    if obj
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        obj.insert("type".into(), json!("Opaque"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_moves_into_data_and_type_defaults() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eQ=="},
            "stringData": {"b": "new", "c": "s3cret"}});
        defaults(&mut s);
        assert_eq!(
            s,
            json!({"metadata": {"name": "s"}, "type": "Opaque",
                "data": {"a": "eA==", "b": "bmV3", "c": "czNjcmV0"}})
        );
        let mut typed = json!({"type": "kubernetes.io/tls", "stringData": {"x": ""}});
        defaults(&mut typed);
        assert_eq!(
            typed,
            json!({"type": "kubernetes.io/tls", "data": {"x": ""}})
        );
    }
}
