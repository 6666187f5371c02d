//! Table columns of custom resources: NAME, then the version's `additionalPrinterColumns`
//! (or AGE when it declares none), cells computed with the JSONPath subset as kube-apiserver's
//! table convertor does: the first value found, `date` columns printed as an age.

use serde_json::{json, Value};

use super::jsonpath;
use super::model::CustomVersion;
use crate::table::{age, printers};

/// The column definitions (`metav1.TableColumnDefinition`s).
pub fn columns(cv: &CustomVersion) -> Vec<Value> {
    let mut out = vec![printers::NAME.to_json()];
    if cv.columns.is_empty() {
        out.push(printers::AGE.to_json());
        return out;
    }
    for c in &cv.columns {
        out.push(json!({
            "name": c.name,
            "type": c.kind,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }));
    }
    out
}

/// The cells of one object.
pub fn cells(cv: &CustomVersion, obj: &Value, now: i64) -> Vec<Value> {
    let mut out = vec![printers::name(obj)];
    if cv.columns.is_empty() {
        out.push(printers::age(obj, now));
        return out;
    }
    for c in &cv.columns {
        let found = jsonpath::parse(&c.json_path)
            .ok()
            .and_then(|steps| jsonpath::select(&steps, obj).into_iter().next().cloned());
        let cell = match found {
            None => Value::Null,
            Some(v) if c.kind == "date" => match age::parse_time(&v) {
                Some(_) => json!(age::since(&v, now)),
                None => v,
            },
            Some(v) => v,
        };
        out.push(cell);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::model::served_versions;

    #[test]
    fn printer_columns_and_cells() {
        let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status", "priority": 1},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]}});
        let cv = &served_versions(&crd)[0];
        let defs = columns(cv);
        let cols: Vec<&str> = defs.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(cols, ["Name", "Size", "Ready", "Age"]);
        assert_eq!(columns(cv)[2]["priority"], 1);
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": "1970-01-01T00:00:00Z"}, "spec": {"size": 3},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(
            cells(cv, &obj, 120),
            [json!("w"), json!(3), json!("True"), json!("2m")]
        );
        let bare = json!({"metadata": {"name": "b", "creationTimestamp": "1970-01-01T00:00:00Z"}});
        assert_eq!(
            cells(cv, &bare, 120),
            [json!("b"), Value::Null, Value::Null, json!("2m")]
        );
    }
}
