//! Namespace defaulting: the `kubernetes.io/metadata.name` label and the `kubernetes`
//! finalizer.

use serde_json::{json, Value};

pub fn defaults(ns: &mut Value) {
    let name = ns["metadata"]["name"].as_str().unwrap_or("").to_string();
    if !name.is_empty() {
        if !ns["metadata"]["labels"].is_object() {
            ns["metadata"]["labels"] = json!({});
        }
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
    }
    if !ns["spec"]["finalizers"].is_array() {
        ns["spec"] = json!({ "finalizers": ["kubernetes"] });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_and_finalizer() {
        let mut ns =
            json!({"metadata": {"name": "x", "labels": {"kubernetes.io/metadata.name": "y"}}});
        defaults(&mut ns);
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "x");
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    }
}
