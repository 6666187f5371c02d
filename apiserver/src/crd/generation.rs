//! `metadata.generation` of custom resources, as apiextensions-apiserver's strategy bumps it:
//! on any change outside `metadata` (and `apiVersion`/`kind`, which only say through which
//! version it was written) and, when the status subresource is enabled, outside
//! `status`.

use serde_json::Value;

/// Whether an update from `old` to `new` bumps the generation.
pub fn bumps(has_status: bool, old: &Value, new: &Value) -> bool {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let counted = |k: &String| {
        let ignored = matches!(k.as_str(), "metadata" | "apiVersion" | "kind");
        !(ignored || has_status && k == "status")
    };
    let differs = |a: &serde_json::Map<String, Value>, b: &serde_json::Map<String, Value>| {
        a.iter()
            .filter(|(k, _)| counted(k))
            .any(|(k, v)| b.get(k) != Some(v))
    };
    differs(o, n) || differs(n, o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn any_change_but_metadata_and_status_bumps() {
        let old = json!({"apiVersion": "v", "metadata": {"labels": {}}, "spec": {"a": 1}, "data": 1, "status": {"x": 1}});
        let mut labels = old.clone();
        labels["metadata"]["labels"]["b"] = json!("c");
        assert!(!bumps(true, &old, &labels));
        let mut status = old.clone();
        status["status"]["x"] = json!(2);
        assert!(!bumps(true, &old, &status));
        assert!(bumps(false, &old, &status));
        let mut data = old.clone();
        data["data"] = json!(2);
        assert!(bumps(true, &old, &data));
        let mut removed = old.clone();
        removed.as_object_mut().unwrap().remove("spec");
        assert!(bumps(true, &old, &removed));
        let mut added = old.clone();
        added["extra"] = json!(true);
        assert!(bumps(true, &old, &added));
    }
}
