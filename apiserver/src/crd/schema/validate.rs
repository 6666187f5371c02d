//! Validation of a custom resource against its structural schema, with kube-apiserver's
//! causes and field paths: types, `required`, `enum`, `pattern`, `minimum`/`maximum` (and
//! exclusive), `multipleOf`, `minLength`/`maxLength`, `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`, the cheap `format`s (`date`, `date-time`, `uuid`, `byte`,
//! `int32`, `int64`), `nullable`, `x-kubernetes-int-or-string`, embedded resources and the
//! junctors `allOf`, `anyOf`, `oneOf` and `not`.

use serde_json::{json, Value};

use super::{child, embedded, field_schema, index};
use k3rs_apimachinery::status::Cause;

/// Every violation of `schema` by `v`, a value found at field path `at` (not the root).
pub fn validate_at(schema: &Value, v: &Value, at: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(schema, v, at, false, &mut out);
    out
}

/// Every violation of `schema` by `obj` (a whole custom resource).
pub fn validate(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(schema, obj, "", true, &mut out);
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn cause(reason: &'static str, field: &str, message: String) -> Cause {
    Cause {
        reason,
        field: field.to_string(),
        message,
    }
}

fn invalid(field: &str, value: &Value, detail: String) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value}: {detail}"),
    )
}

/// The value as kube prints it in messages: strings quoted, numbers plain.
fn shown(v: &Value) -> Value {
    match v {
        Value::Object(_) => json!("object"),
        Value::Array(_) => json!("array"),
        other => other.clone(),
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
    }
}

fn walk(schema: &Value, v: &Value, at: &str, is_root: bool, out: &mut Vec<Cause>) {
    let name = if at.is_empty() { "body" } else { at };
    if v.is_null() {
        if schema["nullable"] != true && !is_root {
            if let Some(t) = schema["type"].as_str() {
                out.push(cause(
                    "FieldValueTypeInvalid",
                    at,
                    format!(
                        "Invalid value: \"null\": {name} in body must be of type {t}: \"null\""
                    ),
                ));
            }
        }
        return;
    }
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    if int_or_string {
        if !(v.is_string() || type_matches("integer", v)) {
            out.push(cause(
                "FieldValueTypeInvalid",
                at,
                format!(
                    "Invalid value: \"{t}\": {name} in body must be of type integer,string: \"{t}\"",
                    t = type_name(v)
                ),
            ));
            return;
        }
    } else if let Some(t) = schema["type"].as_str() {
        if !type_matches(t, v) {
            out.push(cause(
                "FieldValueTypeInvalid",
                at,
                format!(
                    "Invalid value: \"{actual}\": {name} in body must be of type {t}: \"{actual}\"",
                    actual = type_name(v)
                ),
            ));
            return;
        }
    }
    junctors(schema, v, at, is_root, out);
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(v) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            out.push(cause(
                "FieldValueNotSupported",
                at,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    shown(v),
                    list.join(", ")
                ),
            ));
        }
    }
    let counted = match v {
        Value::Array(a) => Some((a.len(), ("maxItems", "minItems", "items"))),
        Value::Object(m) => Some((m.len(), ("maxProperties", "minProperties", "properties"))),
        _ => None,
    };
    if let Some((n, keys)) = counted {
        count_rules(schema, keys, n as u64, (at, name), out);
    }
    match v {
        Value::String(s) => string_rules(schema, s, v, at, name, out),
        Value::Number(_) => number_rules(schema, v, at, name, out),
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    walk(s, item, &index(at, i), false, out);
                }
            }
        }
        Value::Object(fields) => {
            for r in schema["required"].as_array().into_iter().flatten() {
                if let Some(r) = r.as_str() {
                    if fields
                        .get(r)
                        .is_none_or(|x| x.is_null() && !nullable(schema, r))
                    {
                        out.push(Cause::required(child(at, r), ""));
                    }
                }
            }
            if embedded(schema) {
                for k in ["apiVersion", "kind"] {
                    if fields
                        .get(k)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        out.push(Cause::required(child(at, k), "must not be empty"));
                    }
                }
            }
            for (k, val) in fields {
                if (is_root || embedded(schema)) && k == "metadata" {
                    continue;
                }
                if let Some(s) = field_schema(schema, k) {
                    walk(s, val, &child(at, k), false, out);
                }
            }
        }
        _ => {}
    }
}

/// The causes of `v` against one junctor branch.
fn branch(schema: &Value, v: &Value, at: &str, is_root: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(schema, v, at, is_root, &mut out);
    out
}

/// A failed junctor as kube-openapi reports it: a composite error with no field
/// (`<nil>: Invalid value: "": "spec.x" must …`).
fn composite(at: &str, what: &str) -> Cause {
    invalid("<nil>", &json!(""), format!("{} {what}", json!(at)))
}

/// `allOf`, `anyOf`, `oneOf` and `not` (value validations only, in structural schemas).
/// Like kube-openapi: allOf reports every branch's errors; anyOf and oneOf with no valid
/// branch report the errors of the closest one (fewest errors, first on ties).
fn junctors(schema: &Value, v: &Value, at: &str, is_root: bool, out: &mut Vec<Cause>) {
    let branches = |k: &str| -> Vec<Vec<Cause>> {
        schema[k]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| branch(b, v, at, is_root))
            .collect()
    };
    let closest = |results: Vec<Vec<Cause>>| results.into_iter().min_by_key(Vec::len);
    let any_of = branches("anyOf");
    if !any_of.is_empty() && !any_of.iter().any(Vec::is_empty) {
        out.push(composite(at, "must validate at least one schema (anyOf)"));
        out.extend(closest(any_of).unwrap_or_default());
    }
    let one_of = branches("oneOf");
    if !one_of.is_empty() {
        match one_of.iter().filter(|r| r.is_empty()).count() {
            1 => {}
            0 => {
                out.push(composite(
                    at,
                    "must validate one and only one schema (oneOf). Found none valid",
                ));
                out.extend(closest(one_of).unwrap_or_default());
            }
            n => out.push(composite(
                at,
                &format!(
                    "must validate one and only one schema (oneOf). Found {n} valid alternatives"
                ),
            )),
        }
    }
    let all_of = branches("allOf");
    let valid = all_of.iter().filter(|r| r.is_empty()).count();
    if valid < all_of.len() {
        let none = if valid == 0 { ". None validated" } else { "" };
        out.extend(all_of.into_iter().flatten());
        out.push(composite(
            at,
            &format!("must validate all the schemas (allOf){none}"),
        ));
    }
    if let Some(not) = schema.get("not").filter(|n| n.is_object()) {
        if branch(not, v, at, is_root).is_empty() {
            out.push(composite(at, "must not validate the schema (not)"));
        }
    }
}

/// `max…`/`min…` on the number of items or properties (`what` names them in messages).
fn count_rules(
    schema: &Value,
    (max_key, min_key, what): (&str, &str, &str),
    n: u64,
    (at, name): (&str, &str),
    out: &mut Vec<Cause>,
) {
    if let Some(max) = schema[max_key].as_u64().filter(|m| n > *m) {
        out.push(cause(
            "FieldValueTooMany",
            at,
            format!("Too many: {n}: must have at most {max} items"),
        ));
    }
    if let Some(min) = schema[min_key].as_u64().filter(|m| n < *m) {
        out.push(invalid(
            at,
            &json!(n),
            format!("{name} in body should have at least {min} {what}"),
        ));
    }
}

fn nullable(schema: &Value, field: &str) -> bool {
    schema["properties"][field]["nullable"] == true
}

fn string_rules(schema: &Value, s: &str, v: &Value, at: &str, name: &str, out: &mut Vec<Cause>) {
    let len = s.chars().count() as u64;
    if let Some(max) = schema["maxLength"].as_u64().filter(|m| len > *m) {
        out.push(cause(
            "FieldValueTooLong",
            at,
            format!("Too long: may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = schema["minLength"].as_u64().filter(|m| len < *m) {
        out.push(invalid(
            at,
            v,
            format!("{name} in body should be at least {min} chars long"),
        ));
    }
    if let Some(p) = schema["pattern"].as_str() {
        // Patterns were checked when the CRD was accepted; an uncompilable one matches nothing.
        if !regex::Regex::new(p).is_ok_and(|re| re.is_match(s)) {
            out.push(invalid(at, v, format!("{name} in body should match '{p}'")));
        }
    }
    if let Some(f) = schema["format"].as_str() {
        if !format_ok(f, s) {
            out.push(invalid(
                at,
                v,
                format!("{name} in body must be of type {f}: {v}"),
            ));
        }
    }
}

/// The cheap string formats; unknown formats accept anything (as kube does).
fn format_ok(format: &str, s: &str) -> bool {
    let digits = |x: &str, n: usize| x.len() == n && x.bytes().all(|b| b.is_ascii_digit());
    let date = |d: &str| {
        let p: Vec<&str> = d.split('-').collect();
        p.len() == 3 && digits(p[0], 4) && digits(p[1], 2) && digits(p[2], 2)
    };
    match format {
        "date" => date(s),
        "date-time" => s
            .split_once(['T', 't'])
            .is_some_and(|(d, t)| date(d) && t.len() >= 8 && t.as_bytes()[2] == b':'),
        "uuid" => uuid::Uuid::parse_str(s).is_ok(),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
        }
        _ => true,
    }
}

fn number_rules(schema: &Value, v: &Value, at: &str, name: &str, out: &mut Vec<Cause>) {
    let Some(x) = v.as_f64() else { return };
    for (key, exclusive_key, upper) in [
        ("maximum", "exclusiveMaximum", true),
        ("minimum", "exclusiveMinimum", false),
    ] {
        let Some(bound) = schema[key].as_f64() else {
            continue;
        };
        let exclusive = schema[exclusive_key] == true;
        let beyond = if upper { x > bound } else { x < bound };
        if beyond || (exclusive && x == bound) {
            let rel = match (upper, exclusive) {
                (true, true) => "less than",
                (true, false) => "less than or equal to",
                (false, true) => "greater than",
                (false, false) => "greater than or equal to",
            };
            out.push(invalid(
                at,
                v,
                format!("{name} in body should be {rel} {}", schema[key]),
            ));
        }
    }
    if let Some(m) = schema["multipleOf"].as_f64().filter(|m| *m > 0.0) {
        if (x / m).fract() != 0.0 {
            out.push(invalid(
                at,
                v,
                format!(
                    "{name} in body should be a multiple of {}",
                    schema["multipleOf"]
                ),
            ));
        }
    }
    if let Some(f) = schema["format"].as_str() {
        let fits = match f {
            "int32" => v.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            "int64" => v.is_i64(),
            _ => true,
        };
        if !fits {
            out.push(invalid(
                at,
                v,
                format!("{name} in body must be of type {f}: {v}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
            "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
            "port": {"x-kubernetes-int-or-string": true},
            "when": {"type": "string", "format": "date-time"},
            "note": {"type": "string", "nullable": true},
            "pod": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}}})
    }

    fn messages(obj: Value) -> Vec<(String, String, String)> {
        validate(&schema(), &obj)
            .into_iter()
            .map(|c| (c.reason.to_string(), c.field, c.message))
            .collect()
    }

    #[test]
    fn a_valid_object_passes() {
        let ok = json!({"metadata": {"name": "a"}, "spec": {"size": 3, "color": "red", "name": "abc",
            "tags": ["x"], "port": "http", "when": "2024-01-02T03:04:05Z", "note": null,
            "pod": {"apiVersion": "v1", "kind": "Pod"}}});
        assert_eq!(messages(ok), []);
        assert_eq!(messages(json!({"spec": {"size": 1, "port": 80}})), []);
    }

    #[test]
    fn violations_have_kube_paths_and_messages() {
        let bad = json!({"spec": {"size": "big", "color": "green", "name": "ABCDEFG",
            "tags": [], "port": true, "when": "yesterday", "pod": {"kind": "Pod"}}});
        let got = messages(bad);
        let expect = [
            ("FieldValueTypeInvalid", "spec.size", "Invalid value: \"string\": spec.size in body must be of type integer: \"string\""),
            ("FieldValueNotSupported", "spec.color", "Unsupported value: \"green\": supported values: \"red\", \"blue\""),
            ("FieldValueTooLong", "spec.name", "Too long: may not be more than 5 bytes"),
            ("FieldValueInvalid", "spec.name", "Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'"),
            ("FieldValueRequired", "spec.pod.apiVersion", "Required value: must not be empty"),
            ("FieldValueTypeInvalid", "spec.port", "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""),
            ("FieldValueInvalid", "spec.tags", "Invalid value: 0: spec.tags in body should have at least 1 items"),
            ("FieldValueInvalid", "spec.when", "Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\""),
        ];
        for (reason, field, message) in expect {
            assert!(
                got.iter()
                    .any(|g| g.0 == reason && g.1 == field && g.2 == message),
                "missing {field}: {message} in {got:#?}"
            );
        }
        assert_eq!(got.len(), expect.len(), "{got:#?}");
    }

    fn junctor_messages(schema: Value, obj: Value) -> Vec<String> {
        validate(&schema, &obj)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn junctors() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
            "allOf": [{"properties": {"a": {"minimum": 1}}}, {"properties": {"b": {"maxLength": 3}}}],
            "not": {"required": ["c"]}}}});
        assert_eq!(
            junctor_messages(s.clone(), json!({"spec": {"a": 2}})),
            Vec::<String>::new()
        );
        assert_eq!(
            junctor_messages(s.clone(), json!({"spec": {}})),
            vec![
                "<nil>: Invalid value: \"\": \"spec\" must validate at least one schema (anyOf)",
                "spec.a: Required value",
                "<nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found none valid",
                "spec.a: Required value",
            ]
        );
        assert_eq!(
            junctor_messages(s.clone(), json!({"spec": {"a": 0, "b": "long", "c": 1}})),
            vec![
                "<nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
                "spec.a: Invalid value: 0: spec.a in body should be greater than or equal to 1",
                "spec.b: Too long: may not be more than 3 bytes",
                "<nil>: Invalid value: \"\": \"spec\" must validate all the schemas (allOf). None validated",
                "<nil>: Invalid value: \"\": \"spec\" must not validate the schema (not)",
            ]
        );
        assert_eq!(
            junctor_messages(s, json!({"spec": {"a": 0}})),
            vec![
                "spec.a: Invalid value: 0: spec.a in body should be greater than or equal to 1",
                "<nil>: Invalid value: \"\": \"spec\" must validate all the schemas (allOf)",
            ]
        );
    }

    #[test]
    fn required_bounds_and_null() {
        let got = messages(json!({"spec": {"size": 11, "tags": ["a", "b", "c"], "color": null}}));
        assert_eq!(
            got,
            [
                (
                    "FieldValueTypeInvalid".into(),
                    "spec.color".into(),
                    "Invalid value: \"null\": spec.color in body must be of type string: \"null\""
                        .into()
                ),
                (
                    "FieldValueInvalid".into(),
                    "spec.size".into(),
                    "Invalid value: 11: spec.size in body should be less than or equal to 10"
                        .into()
                ),
                (
                    "FieldValueTooMany".into(),
                    "spec.tags".into(),
                    "Too many: 3: must have at most 2 items".into()
                ),
            ]
        );
        let missing = messages(json!({"spec": {}}));
        assert_eq!(
            missing,
            [(
                "FieldValueRequired".into(),
                "spec.size".into(),
                "Required value".into()
            )]
        );
    }
}
