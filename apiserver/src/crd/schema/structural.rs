//! Structural-schema rules a CRD's `openAPIV3Schema` must follow beyond "every field has a
//! type" (apiextensions' `validateStructuralInvariants`, `validateNestedValueValidation` and
//! the list/map-type rules of `ValidateCustomResourceDefinitionOpenAPISchema`), checked on
//! one schema node at a time with its field path (`…openAPIV3Schema.properties[spec]`).
//!
//! # Guarantees
//! - Junctor branches (`allOf`, `anyOf`, `oneOf`, `not`) are value validations only: a type,
//!   `additionalProperties`, a default, a title or description, `nullable` or any
//!   `x-kubernetes-*` extension inside one makes the schema non-structural. The int-or-string
//!   pattern (`anyOf: [{type: integer}, {type: string}]` next to
//!   `x-kubernetes-int-or-string`) is the one exception, as upstream.
//! - `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`,
//!   `x-kubernetes-embedded-resource` and `x-kubernetes-int-or-string` are used consistently.

use serde_json::{json, Value};

use super::list_type::go_value;
use k3rs_apimachinery::status::Cause;

/// Where a schema node sits (upstream's `rootLevel`/`itemLevel`/`fieldLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Root,
    Item,
    Field,
}

/// The `Required` detail for a node without a type.
pub fn missing_type_detail(level: Level) -> &'static str {
    match level {
        Level::Root => "must not be empty at the root",
        Level::Item => "must not be empty for specified array items",
        Level::Field => "must not be empty for specified object fields",
    }
}

/// The rules of this node (not of its children, which the caller visits).
pub fn node_rules(s: &Value, at: &str, level: Level, out: &mut Vec<Cause>) {
    junctors(s, at, level, out);
    extensions(s, at, out);
    list_type(s, at, out);
    map_type(s, at, out);
}

fn is_int_or_string_any_of(any_of: &Value) -> bool {
    *any_of == json!([{"type": "integer"}, {"type": "string"}])
}

fn junctors(s: &Value, at: &str, level: Level, out: &mut Vec<Cause>) {
    let int_or_string = s["x-kubernetes-int-or-string"] == true;
    let skip_any_of = int_or_string && is_int_or_string_any_of(&s["anyOf"]);
    let skip_first_all_of_any_of =
        int_or_string && is_int_or_string_any_of(&s["allOf"][0]["anyOf"]);
    value_validation(s, at, level, skip_any_of, skip_first_all_of_any_of, out);
}

/// The junctors of a value validation, each branch checked as a nested value validation.
fn value_validation(
    v: &Value,
    at: &str,
    level: Level,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    out: &mut Vec<Cause>,
) {
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    if !skip_any_of {
        for (i, b) in list("anyOf").iter().enumerate() {
            nested(b, &format!("{at}.anyOf[{i}]"), level, false, out);
        }
    }
    for (i, b) in list("allOf").iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        nested(b, &format!("{at}.allOf[{i}]"), level, skip, out);
    }
    for (i, b) in list("oneOf").iter().enumerate() {
        nested(b, &format!("{at}.oneOf[{i}]"), level, false, out);
    }
    if let Some(n) = v.get("not").filter(|n| n.is_object()) {
        nested(n, &format!("{at}.not"), level, false, out);
    }
    if let Some(p) = v["pattern"].as_str() {
        if let Err(e) = regex::Regex::new(p) {
            out.push(Cause::invalid(
                format!("{at}.pattern"),
                p,
                &format!("must be a valid regular expression, but isn't: {e}"),
            ));
        }
    }
}

/// A junctor branch: value validations only.
fn nested(v: &Value, at: &str, level: Level, skip_any_of: bool, out: &mut Vec<Cause>) {
    value_validation(v, at, level, skip_any_of, false, out);
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        nested(items, &format!("{at}.items"), level, false, out);
    }
    if let Some(props) = v["properties"].as_object() {
        for (k, p) in props {
            nested(
                p,
                &format!("{at}.properties[{k}]"),
                Level::Field,
                false,
                out,
            );
        }
    }
    let forbid = |out: &mut Vec<Cause>, key: &str, detail: &str| {
        out.push(Cause::forbidden(format!("{at}.{key}"), detail));
    };
    let non_empty = |k: &str| v[k].as_str().is_some_and(|s| !s.is_empty());
    if non_empty("type") {
        forbid(out, "type", "must be empty to be structural");
    }
    if v.get("additionalProperties").is_some() {
        forbid(
            out,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if v.get("default").is_some_and(|d| !d.is_null()) {
        forbid(out, "default", "must be undefined to be structural");
    }
    if non_empty("title") {
        forbid(out, "title", "must be empty to be structural");
    }
    if non_empty("description") {
        forbid(out, "description", "must be empty to be structural");
    }
    if v["nullable"] == true {
        forbid(out, "nullable", "must be false to be structural");
    }
    for k in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if v[k] == true {
            forbid(out, k, "must be false to be structural");
        }
    }
    if v["x-kubernetes-list-map-keys"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        forbid(
            out,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.get("x-kubernetes-list-type")
        .is_some_and(|t| !t.is_null())
    {
        forbid(
            out,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if level == Level::Root && v["properties"].get("metadata").is_some() {
        forbid(
            out,
            "properties[metadata]",
            "must not be specified in a nested context",
        );
    }
}

fn extensions(s: &Value, at: &str, out: &mut Vec<Cause>) {
    let typ = s["type"].as_str().unwrap_or("");
    if s["x-kubernetes-int-or-string"] == true {
        for k in [
            "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-embedded-resource",
        ] {
            if s[k] == true {
                out.push(Cause::invalid_value(
                    format!("{at}.{k}"),
                    true,
                    "must be false if x-kubernetes-int-or-string is true",
                ));
            }
        }
    }
    if s["x-kubernetes-embedded-resource"] != true {
        return;
    }
    const OBJECT: &str = "must be object if x-kubernetes-embedded-resource is true";
    if typ.is_empty() {
        out.push(Cause::required(format!("{at}.type"), OBJECT));
    } else if typ != "object" {
        out.push(Cause::invalid(format!("{at}.type"), typ, OBJECT));
    }
    if s.get("additionalProperties").is_some() {
        out.push(Cause::forbidden(
            format!("{at}.additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    let no_properties = s["properties"].as_object().is_none_or(|p| p.is_empty());
    if s["x-kubernetes-preserve-unknown-fields"] != true && no_properties {
        out.push(Cause::required(
            format!("{at}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn map_type(s: &Value, at: &str, out: &mut Vec<Cause>) {
    let Some(mt) = s.get("x-kubernetes-map-type").and_then(Value::as_str) else {
        return;
    };
    let typ = s["type"].as_str().unwrap_or("");
    const OBJECT: &str = "must be object if x-kubernetes-map-type is specified";
    if typ.is_empty() {
        out.push(Cause::required(format!("{at}.type"), OBJECT));
    } else if typ != "object" {
        out.push(Cause::invalid(format!("{at}.type"), typ, OBJECT));
    }
    if mt != "atomic" && mt != "granular" {
        out.push(Cause::not_supported(
            format!("{at}.x-kubernetes-map-type"),
            mt,
            &["atomic", "granular"],
        ));
    }
}

fn list_type(s: &Value, at: &str, out: &mut Vec<Cause>) {
    let lt = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    let typ = s["type"].as_str().unwrap_or("");
    let items = s.get("items").filter(|i| i.is_object());
    let keys: Vec<String> = s["x-kubernetes-list-map-keys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect();
    const ARRAY: &str = "must be array if x-kubernetes-list-type is specified";
    if lt.is_some() && typ != "array" {
        if typ.is_empty() {
            out.push(Cause::required(format!("{at}.type"), ARRAY));
        } else {
            out.push(Cause::invalid(format!("{at}.type"), typ, ARRAY));
        }
    } else if let (Some("set"), Some(is)) = (lt, items) {
        const ATOMIC: &str = "must be atomic as item of a list with x-kubernetes-list-type=set";
        match is["type"].as_str() {
            Some("array") => {
                if let Some(t) = is["x-kubernetes-list-type"]
                    .as_str()
                    .filter(|t| *t != "atomic")
                {
                    out.push(Cause::invalid(
                        format!("{at}.items.x-kubernetes-list-type"),
                        t,
                        ATOMIC,
                    ));
                }
            }
            Some("object") if is["x-kubernetes-map-type"] != "atomic" => {
                out.push(Cause::invalid_value(
                    format!("{at}.items.x-kubernetes-map-type"),
                    go_value(&is["x-kubernetes-list-type"]),
                    ATOMIC,
                ));
            }
            _ => {}
        }
    }
    if let Some(t) = lt.filter(|t| !["atomic", "set", "map"].contains(t)) {
        out.push(Cause::not_supported(
            format!("{at}.x-kubernetes-list-type"),
            t,
            &["atomic", "set", "map"],
        ));
    }
    const MAP_IF_KEYS: &str = "must be map if x-kubernetes-list-map-keys is non-empty";
    if !keys.is_empty() {
        match lt {
            None => out.push(Cause::required(
                format!("{at}.x-kubernetes-list-type"),
                MAP_IF_KEYS,
            )),
            Some(t) if t != "map" => out.push(Cause::invalid(
                format!("{at}.x-kubernetes-list-type"),
                t,
                MAP_IF_KEYS,
            )),
            _ => {}
        }
    }
    if lt == Some("map") {
        map_list(at, items, &keys, out);
    }
    if let (Some(t @ ("set" | "map")), Some(is)) = (lt, items) {
        if is["nullable"] == true {
            out.push(Cause::forbidden(
                format!("{at}.items.nullable"),
                &format!("cannot be nullable when x-kubernetes-list-type is {t}"),
            ));
        }
    }
}

/// The rules of a `map` list: keys named, items objects, keys scalar properties that are
/// required or defaulted and never nullable.
fn map_list(at: &str, items: Option<&Value>, keys: &[String], out: &mut Vec<Cause>) {
    if keys.is_empty() {
        out.push(Cause::required(
            format!("{at}.x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(is) = items else {
        out.push(Cause::required(
            format!("{at}.items"),
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    let item_type = is["type"].as_str().unwrap_or("");
    if item_type != "object" {
        out.push(Cause::invalid(
            format!("{at}.items.type"),
            item_type,
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let go_keys = format!(
        "[]string{{{}}}",
        keys.iter()
            .map(|k| json!(k).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut seen = Vec::new();
    for k in keys {
        match is["properties"].get(k) {
            Some(p) => {
                if matches!(p["type"].as_str(), Some("array" | "object")) {
                    out.push(Cause::invalid(
                        format!("{at}.items.properties[{k}].type"),
                        item_type,
                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                    ));
                }
            }
            None => out.push(Cause::invalid_value(
                format!("{at}.x-kubernetes-list-map-keys"),
                &go_keys,
                "entries must all be names of item properties",
            )),
        }
        if seen.contains(&k) {
            out.push(Cause::invalid_value(
                format!("{at}.x-kubernetes-list-map-keys"),
                &go_keys,
                "must not contain duplicate entries",
            ));
        }
        seen.push(k);
    }
    let required: Vec<&str> = is["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for k in keys {
        let Some(p) = is["properties"].get(k) else {
            continue;
        };
        if !required.contains(&k.as_str()) && p.get("default").is_none_or(Value::is_null) {
            out.push(Cause::required(
                format!("{at}.items.properties[{k}].default"),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if p["nullable"] == true {
            out.push(Cause::forbidden(
                format!("{at}.items.properties[{k}].nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(s: Value, level: Level) -> Vec<String> {
        let mut out = Vec::new();
        node_rules(&s, "s", level, &mut out);
        out.into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn junctor_branches_are_value_validations_only() {
        let s = json!({"type": "object",
            "anyOf": [{"items": {"type": "string", "nullable": true}}],
            "allOf": [{"properties": {"foo": {"type": "string", "additionalProperties": true, "description": "d"}}}],
            "oneOf": [{"required": ["a"], "x-kubernetes-list-type": "set"}],
            "not": {"title": "t", "x-kubernetes-preserve-unknown-fields": true, "default": 1, "pattern": "("}});
        let mut got = rules(s, Level::Field);
        let pattern = got.remove(6);
        assert!(
            pattern.starts_with(
                "s.not.pattern: Invalid value: \"(\": must be a valid regular expression, but isn't: "
            ),
            "{pattern}"
        );
        assert_eq!(
            got,
            vec![
                "s.anyOf[0].items.type: Forbidden: must be empty to be structural",
                "s.anyOf[0].items.nullable: Forbidden: must be false to be structural",
                "s.allOf[0].properties[foo].type: Forbidden: must be empty to be structural",
                "s.allOf[0].properties[foo].additionalProperties: Forbidden: must be undefined to be structural",
                "s.allOf[0].properties[foo].description: Forbidden: must be empty to be structural",
                "s.oneOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be structural",
                "s.not.default: Forbidden: must be undefined to be structural",
                "s.not.title: Forbidden: must be empty to be structural",
                "s.not.x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural",
            ]
        );
    }

    #[test]
    fn the_int_or_string_pattern_may_name_types() {
        let s = json!({"x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}]});
        assert_eq!(rules(s, Level::Field), Vec::<String>::new());
        let s = json!({"x-kubernetes-int-or-string": true, "x-kubernetes-embedded-resource": true,
            "anyOf": [{"type": "integer"}, {"type": "boolean"}]});
        assert_eq!(
            rules(s, Level::Field),
            vec![
                "s.anyOf[0].type: Forbidden: must be empty to be structural",
                "s.anyOf[1].type: Forbidden: must be empty to be structural",
                "s.x-kubernetes-embedded-resource: Invalid value: true: must be false if x-kubernetes-int-or-string is true",
                "s.type: Required value: must be object if x-kubernetes-embedded-resource is true",
                "s.properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            ]
        );
    }

    #[test]
    fn metadata_in_a_root_junctor() {
        let s = json!({"type": "object", "anyOf": [{"properties": {"metadata": {}}}]});
        assert_eq!(
            rules(s, Level::Root),
            vec!["s.anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"]
        );
    }

    #[test]
    fn list_types() {
        assert_eq!(
            rules(json!({"type": "string", "x-kubernetes-list-type": "bag"}), Level::Field),
            vec![
                "s.type: Invalid value: \"string\": must be array if x-kubernetes-list-type is specified",
                "s.x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\"",
            ]
        );
        assert_eq!(
            rules(
                json!({"type": "array", "x-kubernetes-list-map-keys": ["a"], "items": {"type": "string"}}),
                Level::Field
            ),
            vec!["s.x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty"]
        );
        assert_eq!(
            rules(
                json!({"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "string"}}),
                Level::Field
            ),
            vec![
                "s.x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
                "s.items.type: Invalid value: \"string\": must be object if parent array's x-kubernetes-list-type is map",
            ]
        );
        let s = json!({"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "sub", "ghost", "name"],
            "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "sub": {"type": "object", "nullable": true}}}});
        assert_eq!(
            rules(s, Level::Field),
            vec![
                "s.items.properties[sub].type: Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map",
                "s.x-kubernetes-list-map-keys: Invalid value: []string{\"name\", \"sub\", \"ghost\", \"name\"}: entries must all be names of item properties",
                "s.x-kubernetes-list-map-keys: Invalid value: []string{\"name\", \"sub\", \"ghost\", \"name\"}: must not contain duplicate entries",
                "s.items.properties[sub].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                "s.items.properties[sub].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ]
        );
        assert_eq!(
            rules(
                json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "nullable": true}}),
                Level::Field
            ),
            vec![
                "s.items.x-kubernetes-map-type: Invalid value: \"null\": must be atomic as item of a list with x-kubernetes-list-type=set",
                "s.items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set",
            ]
        );
    }

    #[test]
    fn map_types() {
        assert_eq!(
            rules(json!({"type": "array", "x-kubernetes-map-type": "sometimes"}), Level::Field),
            vec![
                "s.type: Invalid value: \"array\": must be object if x-kubernetes-map-type is specified",
                "s.x-kubernetes-map-type: Unsupported value: \"sometimes\": supported values: \"atomic\", \"granular\"",
            ]
        );
    }
}
