//! Shapes from structural schemas, as apiextensions sizes CEL types (`SchemaDeclType`):
//! declared `maxItems`, `maxProperties` and `maxLength` bound what they bound; anything
//! unbounded is bounded by what fits in one request ([`MAX_REQUEST_BYTES`]) given the
//! smallest serialized size of its items.
//!
//! # Guarantees
//! - Every value that validates against the schema and fits in a request has a
//!   [`Shape::of_json`] that [`shape`] bounds, so an estimate made at write time bounds
//!   the estimate made at run time.

use std::collections::BTreeMap;

use serde_json::Value;

use super::shape::Shape;
use super::MAX_REQUEST_BYTES;

fn bound(s: &Value, key: &str) -> Option<u64> {
    s[key].as_i64().map(|n| n.max(0) as u64)
}

fn additional(s: &Value) -> Option<&Value> {
    s.get("additionalProperties").filter(|a| a.is_object())
}

/// The shape of values of schema node `s`; `root` for the root of a resource (or of an
/// embedded one), where `apiVersion`, `kind` and `metadata.name`/`generateName` are always
/// readable.
pub fn shape(s: &Value, root: bool) -> Shape {
    let unbounded_text = MAX_REQUEST_BYTES - 2;
    if s["x-kubernetes-int-or-string"] == true {
        return Shape::Text(bound(s, "maxLength").map_or(unbounded_text, |n| n.saturating_mul(4)));
    }
    let typ = s["type"].as_str().unwrap_or("");
    let root = root || s["x-kubernetes-embedded-resource"] == true;
    match typ {
        "array" => {
            let items = s.get("items").filter(|i| i.is_object());
            let item = items.map_or(Shape::Any(MAX_REQUEST_BYTES), |i| shape(i, false));
            let len = bound(s, "maxItems").unwrap_or_else(|| {
                (MAX_REQUEST_BYTES - 2) / (items.map_or(1, min_serialized_size) + 1)
            });
            Shape::list(len, item)
        }
        "string" => match s["format"].as_str().unwrap_or("") {
            "duration" | "date" | "date-time" => Shape::Scalar,
            "byte" => Shape::Text(bound(s, "maxLength").unwrap_or(unbounded_text)),
            _ => Shape::Text(match bound(s, "maxLength") {
                // maxLength counts code points, each up to 4 bytes.
                Some(n) => n.saturating_mul(4),
                None => match s["enum"].as_array() {
                    Some(e) if !e.is_empty() => e
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|v| v.len() as u64)
                        .max()
                        .unwrap_or(0),
                    _ => unbounded_text,
                },
            }),
        },
        "boolean" | "integer" | "number" => Shape::Scalar,
        _ if typ == "object"
            || s.get("properties").is_some()
            || additional(s).is_some()
            || root =>
        {
            object(s, root)
        }
        // No type: preserve-unknown-fields without structure.
        _ => Shape::Any(MAX_REQUEST_BYTES),
    }
}

fn object(s: &Value, root: bool) -> Shape {
    if let Some(a) = additional(s) {
        let len = bound(s, "maxProperties")
            .unwrap_or_else(|| (MAX_REQUEST_BYTES - 2) / (min_serialized_size(a) + 6));
        return Shape::map(len, Shape::Text(MAX_REQUEST_BYTES), shape(a, false));
    }
    let mut fields: BTreeMap<String, Shape> = s["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, p)| (k.clone(), shape(p, false)))
        .collect();
    if root {
        let text = Shape::Text(MAX_REQUEST_BYTES - 2);
        fields.entry("apiVersion".into()).or_insert(text.clone());
        fields.entry("kind".into()).or_insert(text.clone());
        let meta = fields
            .entry("metadata".into())
            .or_insert_with(|| Shape::object(BTreeMap::new()));
        if let Shape::Map { fields: m, len, .. } = meta {
            m.entry("name".into()).or_insert(text.clone());
            m.entry("generateName".into()).or_insert(text);
            *len = m.len() as u64;
        }
    }
    let mut out = Shape::object(fields);
    if s["x-kubernetes-preserve-unknown-fields"] == true {
        if let Shape::Map { len, other, .. } = &mut out {
            *len = MAX_REQUEST_BYTES / 6;
            **other = Shape::Any(MAX_REQUEST_BYTES);
        }
    }
    out
}

/// The fewest bytes a value of `s` takes in JSON (apiextensions' `MinSerializedSize`):
/// `{}` plus the required properties without defaults for objects, `""` for strings.
pub fn min_serialized_size(s: &Value) -> u64 {
    if s["x-kubernetes-int-or-string"] == true {
        return 1;
    }
    match s["type"].as_str().unwrap_or("") {
        "array" => 2,
        "boolean" => 4,
        "integer" | "number" => 1,
        "string" => match s["format"].as_str().unwrap_or("") {
            "duration" => 4,
            "date" => 12,
            "date-time" => 22,
            _ => 2,
        },
        "object" => {
            if additional(s).is_some() {
                return 2;
            }
            let required: Vec<&str> = s["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let props = s["properties"].as_object();
            2 + required
                .iter()
                .filter_map(|r| props.and_then(|p| p.get(*r)).map(|p| (r, p)))
                .filter(|(_, p)| p.get("default").is_none())
                .map(|(r, p)| r.len() as u64 + min_serialized_size(p) + 4)
                .sum::<u64>()
        }
        _ => 1,
    }
}

/// By how much `s` multiplies how often its children occur (`extractMaxElements`):
/// `maxItems` of arrays, `maxProperties` of maps, 1 for objects and scalars; `None` when
/// unbounded.
pub fn max_elements(s: &Value) -> Option<u64> {
    match s["type"].as_str().unwrap_or("") {
        "array" => bound(s, "maxItems"),
        "object" if additional(s).is_some() => bound(s, "maxProperties"),
        _ => Some(1),
    }
}

/// How many times, at most, a rule on `s` runs when the cardinality of its ancestors is
/// unbounded: as many values as fit in one request (`maxCardinality`).
pub fn unbounded_cardinality(s: &Value) -> u64 {
    MAX_REQUEST_BYTES / (min_serialized_size(s) + 1)
}
