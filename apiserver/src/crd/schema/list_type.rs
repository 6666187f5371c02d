//! Uniqueness of `x-kubernetes-list-type: set` items and `map` keys in a custom resource
//! (apiextensions' `listtype.ValidateListSetsAndMaps`): each value (set) or key tuple (map)
//! that appears again is reported once, at the index of its second appearance, as
//! `Duplicate value: …` with the value printed the way Go prints it.

use serde_json::{json, Map, Value};

use super::{child, index};
use k3rs_apimachinery::status::Cause;

/// The duplicates in `obj` (a whole custom resource) under `schema`.
pub fn validate(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Value::Object(m) = obj {
        object(schema, m, "", &mut out);
    }
    out
}

fn object(schema: &Value, obj: &Map<String, Value>, at: &str, out: &mut Vec<Cause>) {
    if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        for (k, v) in obj {
            value(extra, v, &format!("{at}[{k}]"), out);
        }
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, v) in obj {
            if let Some(s) = props.get(k) {
                value(s, v, &child(at, k), out);
            }
        }
    }
}

fn value(schema: &Value, v: &Value, at: &str, out: &mut Vec<Cause>) {
    match v {
        Value::Array(items) => array(schema, items, at, out),
        Value::Object(m) => object(schema, m, at, out),
        _ => {}
    }
}

fn array(schema: &Value, items: &[Value], at: &str, out: &mut Vec<Cause>) {
    match schema["x-kubernetes-list-type"].as_str() {
        Some("set") => {
            for i in second_appearances(items) {
                out.push(duplicate(&index(at, i), &items[i]));
            }
        }
        Some("map") => map_keys(schema, items, at, out),
        _ => {}
    }
    if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
        for (i, item) in items.iter().enumerate() {
            value(s, item, &index(at, i), out);
        }
    }
}

fn map_keys(schema: &Value, items: &[Value], at: &str, out: &mut Vec<Cause>) {
    if let Some(i) = items.iter().position(|x| !(x.is_null() || x.is_object())) {
        out.push(Cause::invalid_value(
            index(at, i),
            go_value(&items[i]),
            "must be an object for an array of list-type map",
        ));
        return;
    }
    let key_fields: Vec<&str> = schema["x-kubernetes-list-map-keys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            for f in &key_fields {
                if let Some(v) = x.get(*f) {
                    key.insert((*f).to_string(), v.clone());
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in second_appearances(&keys) {
        out.push(duplicate(&index(at, i), &keys[i]));
    }
}

/// The index of every value's second appearance (its third and later are not reported).
fn second_appearances(items: &[Value]) -> Vec<usize> {
    let mut seen: Vec<(&Value, usize)> = Vec::new();
    let mut out = Vec::new();
    for (i, x) in items.iter().enumerate() {
        match seen.iter_mut().find(|(v, _)| *v == x) {
            Some((_, n)) => {
                *n += 1;
                if *n == 2 {
                    out.push(i);
                }
            }
            None => seen.push((x, 1)),
        }
    }
    out
}

fn duplicate(field: &str, v: &Value) -> Cause {
    Cause {
        reason: "FieldValueDuplicate",
        field: field.to_string(),
        message: format!("Duplicate value: {}", go_value(v)),
    }
}

/// A value as `field.Error` prints it: scalars plainly (strings quoted), anything else in
/// Go syntax (`map[string]interface {}{"name":"a"}`).
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => json!("null").to_string(),
        Value::Object(_) | Value::Array(_) => go_syntax(v),
        other => other.to_string(),
    }
}

/// Go's `%#v` of an unstructured value.
fn go_syntax(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", json!(k), go_syntax(&m[k.as_str()])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {"type": "object", "properties": {"port": {"type": "integer"}, "protocol": {"type": "string"}}}},
            "byName": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"},
                    "ids": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}}}}},
            "plain": {"type": "array", "items": {"type": "string"}},
            "groups": {"type": "object", "additionalProperties": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}
        }}}})
    }

    fn got(obj: Value) -> Vec<String> {
        validate(&schema(), &obj)
            .into_iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect()
    }

    #[test]
    fn sets_report_each_duplicate_once_at_its_second_index() {
        assert_eq!(
            got(json!({"spec": {"tags": ["a", "b", "a", "a", "b"], "plain": ["x", "x"]}})),
            vec![
                "FieldValueDuplicate spec.tags[2]: Duplicate value: \"a\"",
                "FieldValueDuplicate spec.tags[4]: Duplicate value: \"b\"",
            ]
        );
    }

    #[test]
    fn maps_compare_key_tuples() {
        assert_eq!(
            got(json!({"spec": {"ports": [
                {"port": 80, "protocol": "TCP"},
                {"port": 80, "protocol": "UDP"},
                {"port": 80, "protocol": "TCP", "name": "again"}
            ]}})),
            vec!["FieldValueDuplicate spec.ports[2]: Duplicate value: map[string]interface {}{\"port\":80, \"protocol\":\"TCP\"}"]
        );
        assert_eq!(
            got(json!({"spec": {"byName": [{"name": "a", "ids": [1, 1]}, {"ids": []}, {}]}})),
            vec![
                "FieldValueDuplicate spec.byName[2]: Duplicate value: map[string]interface {}{}",
                "FieldValueDuplicate spec.byName[0].ids[1]: Duplicate value: 1",
            ]
        );
        assert_eq!(
            got(json!({"spec": {"byName": [{"name": "a"}, "x"]}})),
            vec!["FieldValueInvalid spec.byName[1]: Invalid value: \"x\": must be an object for an array of list-type map"]
        );
    }

    #[test]
    fn additional_properties_use_key_paths() {
        assert_eq!(
            got(json!({"spec": {"groups": {"g": ["x", "x"]}}})),
            vec!["FieldValueDuplicate spec.groups[g][1]: Duplicate value: \"x\""]
        );
    }

    #[test]
    fn go_printing() {
        assert_eq!(go_value(&json!("a")), "\"a\"");
        assert_eq!(go_value(&json!(1.5)), "1.5");
        assert_eq!(go_value(&json!(true)), "true");
        assert_eq!(
            go_value(&json!({"b": [1, "x"], "a": null})),
            "map[string]interface {}{\"a\":interface {}(nil), \"b\":[]interface {}{1, \"x\"}}"
        );
    }
}
